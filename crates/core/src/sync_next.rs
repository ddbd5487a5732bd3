//! A sync written as the next version of a store's head (the fallback of a
//! catch-up whose peers serve only whole chunks; `spec/store-format.md`,
//! "Syncing as the next version"): what the head can give the new version,
//! and what of it becomes stale. A chunk whose hash a head chunk has is
//! shared; any other chunk references the head's entry record of every
//! entry that a head chunk around it holds (same key, same entry hash) and
//! writes only the others, as a delta of the head chunk whose first key it
//! holds when that is small ("Writing deltas"). Once every chunk is in,
//! each head chunk the new version does not share is read again with the
//! new chunks over its keys: it and its delta's base (unless a new delta
//! names them), and each of its entries no new chunk references, are
//! marked stale. No I/O: the caller reads the records named.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::catchup::Base;
use crate::chunk::{Chunk, StoredAt};
use crate::error::StoreError;
use crate::hash::Hash;
use crate::node::Node;
use crate::record::{
    chunk_record, full_record_puts, in_key_order, verify_slots, ChunkRecord, Entry, Ref, Slot, Table, WaitingDeltas,
};
use crate::sync_store::{ChunkFacts, ChunkWrite};
use crate::tree::Tree;

/// Head chunks searched for a changed chunk's entries: its keys span at
/// most three head chunks of at least ⌈C/2⌉ entries; more only where many
/// were deleted, and the entries of the others are then written again.
const MAX_CANDIDATES: usize = 8;
/// Head chunks' slots kept after use: neighbours share them.
const SLOT_CACHE: usize = 64;
/// Head chunks read at once for their stale entries.
const STALE_BATCH: usize = 128;

/// A changed chunk waiting for the head chunks around it.
#[derive(Debug)]
struct Waiting {
    chunk: Chunk,
    progress: Vec<u8>,
    candidates: Vec<usize>,
    missing: usize,
    bytes: usize,
}

/// A head chunk read to take entries from: its slots (a delta applied), and
/// the full chunk record it is or is a delta of, to write a changed chunk against.
#[derive(Debug)]
struct HeadChunk {
    slots: Arc<[Slot]>,
    base: Base,
}

/// A head chunk read for its stale marks: its slots, once a delta has its base.
#[derive(Debug)]
struct Replaced {
    slots: Option<Vec<Slot>>,
    base: Option<Ref>,
}

/// The head a sync writes the next version of.
#[derive(Debug, Default)]
pub(crate) struct Head {
    capacity: usize,
    /// Its chunk records in key order, and each one's first key (the key
    /// copy before it; for the first, the head's smallest key if given).
    order: Vec<Ref>,
    firsts: Vec<Option<Box<[u8]>>>,
    /// Positions in `order` by chunk hash.
    by_hash: HashMap<Hash, usize>,
    /// Its inner node records by hash, with their children's records: the
    /// new version shares those it has with the same children, and marks
    /// the others stale.
    nodes: HashMap<Hash, (Ref, [Ref; 2])>,
    /// Positions of the chunks the new version shares: never marked stale,
    /// not even as a base.
    shared: HashSet<usize>,
    /// Head full chunk records that changed chunks are written as deltas
    /// of: never marked stale.
    bases: HashSet<Ref>,
    /// Head chunks' slots (deltas applied), by position, for matching; the
    /// recently used, and the records asked for.
    slots: HashMap<usize, HeadChunk>,
    recent: VecDeque<usize>,
    loading: HashMap<Ref, usize>,
    asked: HashSet<Ref>,
    deltas: WaitingDeltas,
    waiting: BTreeMap<u64, Waiting>,
    waiting_on: HashMap<usize, Vec<u64>>,
    waiting_bytes: usize,
    ready: Vec<ChunkWrite>,
    /// The stale phase: positions still to read, those being read, and the
    /// new chunk records (born at the new version) read for them.
    to_mark: Option<Vec<usize>>,
    /// The new tree's chunks in index (key) order: first key, and the
    /// record written at the new version (none for a shared chunk).
    new_chunks: Vec<(Box<[u8]>, Option<Ref>)>,
    marking: BTreeMap<usize, Replaced>,
    stale_asked: HashSet<Ref>,
    stale_deltas: WaitingDeltas,
    /// New chunk records that are deltas, waiting for their (head) bases.
    new_deltas: WaitingDeltas,
    new_slots: HashMap<Ref, Vec<Ref>>,
    stale: Vec<(Table, Ref)>,
}

impl Head {
    /// `None` if a node or chunk of `head` was never stored (uncommitted writes).
    pub(crate) fn of(head: &Tree, first_key: Option<&[u8]>) -> Option<Head> {
        let mut out = Head { capacity: head.capacity(), ..Head::default() };
        let mut todo: Vec<(&Node, Option<&[u8]>)> = head.top().map(|t| (t, first_key)).into_iter().collect();
        while let Some((node, lower)) = todo.pop() {
            let record = stored(node)?;
            if let Node::Inner(n) = node {
                out.nodes.insert(record.hash, (record, [stored(&n.left)?, stored(&n.right)?]));
                // Left first: chunks come in key order.
                todo.extend([(&n.right, Some(n.key.as_bytes())), (&n.left, lower)]);
                continue;
            }
            out.by_hash.insert(record.hash, out.order.len());
            out.order.push(record);
            out.firsts.push(lower.map(Into::into));
        }
        Some(out)
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The head chunk record with hash `hash` and its first key, if the new
    /// version can share it (its first key known).
    pub(crate) fn held(&self, hash: &Hash) -> Option<(Ref, &[u8])> {
        let p = *self.by_hash.get(hash)?;
        Some((self.order[p], self.firsts[p].as_deref()?))
    }

    /// The new version shares the head chunk with hash `hash`.
    pub(crate) fn share(&mut self, hash: &Hash) {
        if let Some(&p) = self.by_hash.get(hash) {
            self.shared.insert(p);
        }
    }

    /// A changed chunk an earlier run wrote is a delta of `base`, a head record.
    pub(crate) fn based_on(&mut self, base: Ref) {
        self.bases.insert(base);
    }

    /// Whether `record` is a head chunk record the new version shares.
    fn is_shared(&self, record: &Ref) -> bool {
        self.by_hash.get(&record.hash).is_some_and(|&p| self.order[p] == *record && self.shared.contains(&p))
    }

    /// The head chunks whose keys may fall in `[first, last]`, in key order.
    fn around(&self, first: &[u8], last: &[u8]) -> Vec<usize> {
        let holds = |key: &[u8]| self.firsts.partition_point(|f| f.as_deref().is_none_or(|k| k <= key));
        let start = holds(first).saturating_sub(1);
        (start..holds(last).max(start + 1)).filter(|&p| p < self.order.len()).take(MAX_CANDIDATES).collect()
    }

    /// A changed chunk (chunk `index` of the new tree): written once the head
    /// chunks around it are read ([`Head::needed`], [`Head::supply`]),
    /// referencing the entry records they hold.
    pub(crate) fn queue(&mut self, index: u64, chunk: Chunk, progress: Vec<u8>, version: u64) {
        let candidates = self.around(chunk.first_key(), chunk.key(chunk.len() - 1));
        let missing: Vec<usize> = candidates.iter().copied().filter(|p| !self.slots.contains_key(p)).collect();
        let bytes = chunk.resident_bytes();
        let w = Waiting { chunk, progress, candidates, missing: missing.len(), bytes };
        if missing.is_empty() {
            self.complete(index, w, version);
            return;
        }
        for p in missing {
            self.waiting_on.entry(p).or_default().push(index);
            self.loading.insert(self.order[p], p);
        }
        self.waiting_bytes += w.bytes;
        self.waiting.insert(index, w);
    }

    /// Bytes of the changed chunks waiting for head chunks.
    pub(crate) fn waiting_bytes(&self) -> usize {
        self.waiting_bytes
    }

    /// Whether changed chunks are still waiting for head chunks.
    pub(crate) fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Head chunk records to read now for the changed chunks waiting (and
    /// the bases of those that are deltas).
    pub(crate) fn needed(&mut self) -> Vec<(Table, Ref)> {
        // A delta read already waits for its base: it is not asked again.
        let loading = self.loading.keys().filter(|r| self.deltas.base_of(r).is_none());
        let wanted = loading.chain(self.deltas.bases()).copied().collect::<Vec<_>>();
        let mut out: Vec<(Table, Ref)> =
            wanted.into_iter().filter(|r| self.asked.insert(*r)).map(|r| (Table::Chunks, r)).collect();
        in_key_order(&mut out);
        out
    }

    /// Hands over a head chunk record [`Head::needed`] named (`None`: the
    /// store lacks it). Its slots must verify against its chunk hash.
    pub(crate) fn supply(&mut self, r: &Ref, bytes: Option<&[u8]>, version: u64) -> Result<(), StoreError> {
        self.asked.remove(r);
        let record = ChunkRecord::decode(bytes.ok_or(StoreError::Corrupt)?, self.capacity)?;
        match record {
            ChunkRecord::Delta(delta) if self.deltas.refuses(r, &delta) => return Err(StoreError::Corrupt),
            ChunkRecord::Delta(delta) if self.loading.contains_key(r) => self.deltas.add(*r, delta),
            ChunkRecord::Delta(_) => return Err(StoreError::Corrupt),
            ChunkRecord::Full { slots, groups } => {
                let base = Base { record: *r, slots: slots.into(), groups: groups.into() };
                for (at, delta) in self.deltas.take(r) {
                    let (slots, groups) = delta.apply(&base.slots, &base.groups, self.capacity)?;
                    self.loaded(&at, slots.into(), &groups, base.clone(), version)?;
                }
                if self.loading.contains_key(r) {
                    self.loaded(r, base.slots.clone(), &base.groups.clone(), base, version)?;
                }
            }
        }
        Ok(())
    }

    fn loaded(
        &mut self,
        r: &Ref,
        slots: Arc<[Slot]>,
        groups: &[Hash],
        base: Base,
        version: u64,
    ) -> Result<(), StoreError> {
        let Some(p) = self.loading.remove(r) else { return Ok(()) };
        verify_slots(&slots, groups, &r.hash)?;
        self.slots.insert(p, HeadChunk { slots, base });
        for index in self.waiting_on.remove(&p).unwrap_or_default() {
            let w = self.waiting.get_mut(&index).expect("waiting");
            w.missing -= 1;
            if w.missing == 0 {
                let w = self.waiting.remove(&index).expect("waiting");
                self.waiting_bytes -= w.bytes;
                self.complete(index, w, version);
            }
        }
        self.recent.push_back(p);
        while self.recent.len() > SLOT_CACHE {
            let old = self.recent.pop_front().expect("non-empty");
            if !self.waiting_on.contains_key(&old) && !self.recent.contains(&old) {
                self.slots.remove(&old);
            }
        }
        Ok(())
    }

    /// Writes changed chunk `index`: its entries that a candidate head chunk
    /// holds (same key, same entry hash) referenced, the rest new; as a
    /// delta of the candidate whose first key it holds (of several, the one
    /// it takes most entries from) when that is small, else whole. So a
    /// head record is the base of one chunk of the new version at most, as
    /// a commit's rule ("Writing deltas") wants.
    fn complete(&mut self, index: u64, w: Waiting, version: u64) {
        let Waiting { mut chunk, progress, candidates, .. } = w;
        let held: Vec<&HeadChunk> = candidates.iter().filter_map(|p| self.slots.get(p)).collect();
        let find = |slots: &[Slot], key: &[u8]| slots.binary_search_by(|slot| slot.key.as_slice().cmp(key)).ok();
        let stored = |key: &[u8], hash: &Hash| {
            held.iter().find_map(|h| {
                let at = find(&h.slots, key)?;
                (h.slots[at].entry.hash() == hash).then_some(match h.slots[at].entry {
                    Entry::Record(r) => StoredAt::Record(r.birth),
                    // The chunk has the value from the wire: a whole record holds it again.
                    Entry::Held(_) => StoredAt::Held(h.base.record),
                })
            })
        };
        let hash = chunk.hash();
        let mut puts = Vec::with_capacity(chunk.len() + 1);
        let slots = chunk.slots_reusing(version, stored, |v, entry| {
            puts.push((Table::Entries, entry, crate::record::encode_entry(v)));
        });
        let given = |h: &HeadChunk| {
            slots.iter().filter(|s| find(&h.slots, &s.key).is_some_and(|at| h.slots[at].entry == s.entry)).count()
        };
        let base =
            held.iter().filter(|h| find(&slots, &h.slots[0].key).is_some()).max_by_key(|h| given(h)).map(|h| &h.base);
        let record = chunk_record(base.map(Base::parts), &slots, chunk.group_roots());
        if let ChunkRecord::Delta(delta) = &record {
            self.bases.insert(delta.base);
        }
        let stored = Ref { birth: version, hash };
        match &record {
            ChunkRecord::Full { slots, groups } => {
                puts.extend(full_record_puts(stored, slots, groups, |i| chunk.value(i)))
            }
            ChunkRecord::Delta(_) => puts.push((Table::Chunks, stored, record.encode())),
        }
        self.ready.push(ChunkWrite { index, puts, progress });
    }

    /// A chunk written at once (one the head holds: its progress record only).
    pub(crate) fn ready(&mut self, write: ChunkWrite) {
        self.ready.push(write);
    }

    /// Changed chunks written since the last call.
    pub(crate) fn take_ready(&mut self) -> Vec<ChunkWrite> {
        std::mem::take(&mut self.ready)
    }

    /// Records to read for the stale marks, once every chunk is in and
    /// written: the next head chunks the new version does not share (and
    /// their bases), and the new chunk records over their keys. Marks what
    /// it can first. Empty when all is marked.
    pub(crate) fn stale_needed(&mut self, new: &BTreeMap<u64, ChunkFacts>, version: u64) -> Vec<(Table, Ref)> {
        self.mark_ready();
        if self.to_mark.is_none() {
            self.to_mark = Some((0..self.order.len()).rev().filter(|p| !self.shared.contains(p)).collect());
            let written = |f: &ChunkFacts| self.held(&f.hash).is_none().then_some(Ref { birth: version, hash: f.hash });
            self.new_chunks = new.values().map(|f| (f.first_key.clone(), written(f))).collect();
        }
        if self.marking.is_empty() {
            let to_mark = self.to_mark.as_mut().expect("set above");
            for _ in 0..STALE_BATCH {
                let Some(p) = to_mark.pop() else { break };
                self.marking.insert(p, Replaced { slots: None, base: None });
            }
        }
        let mut out: Vec<Ref> = self.marking.keys().map(|&p| self.order[p]).collect();
        out.extend(self.stale_deltas.bases().chain(self.new_deltas.bases()).copied());
        for &p in self.marking.keys() {
            let upper = self.firsts.get(p + 1).and_then(|f| f.as_deref());
            let lower = self.firsts[p].as_deref();
            // New chunks over [lower, upper): from the one holding `lower` to the last starting below `upper`.
            let firsts = |pred: &dyn Fn(&[u8]) -> bool| self.new_chunks.partition_point(|(k, _)| pred(k));
            let start = lower.map_or(0, |l| firsts(&|k| k <= l).saturating_sub(1));
            let end = upper.map_or(self.new_chunks.len(), |u| firsts(&|k| k < u));
            out.extend(self.new_chunks[start..end.max(start)].iter().filter_map(|(_, r)| *r));
        }
        // Records read already (deltas waiting for their bases among them) are not asked again.
        let waiting = |r: &Ref| self.stale_deltas.base_of(r).or(self.new_deltas.base_of(r)).is_some();
        let mut out: Vec<(Table, Ref)> = out
            .into_iter()
            .filter(|r| !self.new_slots.contains_key(r) && !waiting(r) && self.stale_asked.insert(*r))
            .map(|r| (Table::Chunks, r))
            .collect();
        in_key_order(&mut out);
        out
    }

    /// Hands over a record [`Head::stale_needed`] named (`None`: the store
    /// lacks it, `STORE_CORRUPT`).
    pub(crate) fn stale_supply(&mut self, r: &Ref, bytes: Option<&[u8]>, version: u64) -> Result<(), StoreError> {
        self.stale_asked.remove(r);
        let record = ChunkRecord::decode(bytes.ok_or(StoreError::Corrupt)?, self.capacity)?;
        let new = r.birth == version;
        let position = self.marking.iter().find(|(&p, _)| !new && self.order[p] == *r).map(|(&p, _)| p);
        match record {
            // A new chunk's delta names a head record.
            ChunkRecord::Delta(delta) if new && delta.base.birth < version => self.new_deltas.add(*r, delta),
            ChunkRecord::Delta(delta) if position.is_some() => self.stale_deltas.add(*r, delta),
            ChunkRecord::Delta(_) => return Err(StoreError::Corrupt),
            ChunkRecord::Full { slots, groups } => {
                for (at, delta) in self.new_deltas.take(r) {
                    let (applied, applied_groups) = delta.apply(&slots, &groups, self.capacity)?;
                    verify_slots(&applied, &applied_groups, &at.hash)?;
                    self.new_slots.insert(at, applied.into_iter().filter_map(|s| s.entry.record()).collect());
                }
                if new {
                    verify_slots(&slots, &groups, &r.hash)?;
                    self.new_slots.insert(*r, slots.into_iter().filter_map(|s| s.entry.record()).collect());
                    return Ok(());
                }
                for (at, delta) in self.stale_deltas.take(r) {
                    let (applied, applied_groups) = delta.apply(&slots, &groups, self.capacity)?;
                    verify_slots(&applied, &applied_groups, &at.hash)?;
                    let p = self.marking.iter().find(|(&p, _)| self.order[p] == at).map(|(&p, _)| p);
                    if let Some(m) = p.and_then(|p| self.marking.get_mut(&p)) {
                        *m = Replaced { slots: Some(applied), base: Some(*r) };
                    }
                }
                if let Some(p) = position {
                    verify_slots(&slots, &groups, &r.hash)?;
                    self.marking.insert(p, Replaced { slots: Some(slots), base: None });
                }
            }
        }
        Ok(())
    }

    /// Marks each head chunk being read whose slots are in: it and its base
    /// (unless a new chunk's delta names them), and its entries that no new
    /// chunk over its keys references.
    fn mark_ready(&mut self) {
        let done: Vec<usize> = self.marking.iter().filter(|(_, m)| m.slots.is_some()).map(|(&p, _)| p).collect();
        if done.len() < self.marking.len() || !self.new_deltas.is_empty() {
            return; // the batch's new chunk records were all asked with it: wait for the whole batch
        }
        let used: HashSet<Ref> = self.new_slots.values().flatten().copied().collect();
        for p in done {
            let Replaced { slots, base } = self.marking.remove(&p).expect("marking");
            let unused = |r: &Ref| !self.bases.contains(r);
            self.stale.extend(Some(self.order[p]).filter(unused).map(|r| (Table::Chunks, r)));
            self.stale.extend(base.filter(|b| !self.is_shared(b) && unused(b)).map(|b| (Table::Chunks, b)));
            let dropped =
                slots.expect("read").into_iter().filter_map(|s| s.entry.record()).filter(|e| !used.contains(e));
            self.stale.extend(dropped.map(|e| (Table::Entries, e)));
        }
        self.new_slots.clear();
    }

    /// Stale marks made so far.
    pub(crate) fn take_stale(&mut self) -> Vec<(Table, Ref)> {
        std::mem::take(&mut self.stale)
    }

    /// Whether every head chunk the new version does not share is marked.
    pub(crate) fn stale_done(&self) -> bool {
        self.to_mark.as_ref().is_some_and(Vec::is_empty)
            && self.marking.is_empty()
            && self.stale_deltas.is_empty()
            && self.new_deltas.is_empty()
    }

    /// The head's inner node records.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Ref> {
        self.nodes.values().map(|(r, _)| r)
    }

    /// The head's inner node record with hash `hash`, if its children are
    /// the records `children` (a child the new version writes again, as
    /// the head's first chunk may be, makes the node its own).
    pub(crate) fn node(&self, hash: &Hash, children: [&Ref; 2]) -> Option<Ref> {
        let (record, [left, right]) = self.nodes.get(hash)?;
        (children == [left, right]).then_some(*record)
    }
}

/// The record a node of a loaded tree was stored as; `None` if it never was.
fn stored(node: &Node) -> Option<Ref> {
    match node {
        Node::Leaf(c) => Some(c.stored.as_ref().filter(|_| c.persisted)?.record),
        Node::Stub(s) => Some(s.record),
        Node::Inner(n) => n.stored.filter(|_| n.persisted),
    }
}
