//! A paged head (`docs/store.md`, "The writable head, paged"): the head of
//! a state store, taking writes with its inner nodes resident and its
//! chunks in the store until a write needs them. Without I/O, like the
//! loader: [`Tree::needed_for`] names the chunk records a write needs, the
//! caller fetches them and hands them to [`Tree::supply_record`], which
//! checks each against its ref and loads it; before the commit,
//! [`Tree::unconfirmed`] names the entry records that confirm the slot keys
//! the writes relied on (or [`Tree::confirm_read`] confirms one from a
//! value the caller read); after it, [`Tree::evict`] turns loaded chunks
//! back into stubs down to a budget.
//!
//! A loaded chunk holds keys, entry hashes and records, not values: a
//! commit writes new entries by hash and never reads an old one back.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::chunk::{Chunk, StoredChunk};
use crate::error::StoreError;
use crate::hash::{entry_hash, preorder_above_groups, Hash};
use crate::keys::prefix;
use crate::limits::min_fill;
use crate::node::{KeyCopy, Node, Stub};
use crate::record::{
    decode_entry, held_values, in_key_order, values_ref, values_refs, verify_groups, ChunkRecord, Ref, Slot, Table,
    WaitingDeltas,
};
use crate::tree::{search, Tree};

/// The records a paged head asked for and has not loaded yet, and the
/// entry records to read before its commit.
#[derive(Clone, Debug, Default)]
pub(crate) struct Paging {
    /// The stub each asked record loads into, by chunk index (no write
    /// runs between [`Tree::needed_for`] and the supplies it asks for).
    awaited: HashMap<Ref, u64>,
    /// Deltas supplied before their base.
    deltas: WaitingDeltas,
    /// Entry records to read before the commit, with the key their slot
    /// lists: they confirm where the batch's writes landed.
    unconfirmed: HashMap<Ref, Vec<u8>>,
    /// The same for slots whose values are in values records: each full
    /// chunk record with the keys of its slots to confirm, and the group
    /// that holds each (`None`: not known, any may).
    held_unconfirmed: HashMap<Ref, Vec<HeldKey>>,
    /// Full chunk records whose values [`Tree::unconfirmed`] asked for, for
    /// those that changed chunks written whole must copy.
    values_wanted: HashSet<Ref>,
    /// The full chunk record each values record asked for belongs to.
    values_of: HashMap<Ref, Ref>,
    /// The values records asked for of each full chunk record, as they
    /// arrive: how many are still to come, and which groups were asked
    /// (`None`: all). Its values are taken once all are here (a group that
    /// holds none has no record).
    values_got: HashMap<Ref, ValuesAsked>,
    /// Counts loads, so that the oldest loaded chunks are evicted first.
    clock: u64,
    /// Whether the batch wrote a piece ahead ([`Tree::write_ahead`]): its
    /// records born at the coming version may have been dropped since.
    pub(crate) wrote_ahead: bool,
}

/// A slot key to confirm from a values record, with the group that holds
/// its value (`None`: not known).
type HeldKey = (Vec<u8>, Option<usize>);

/// The values records of one full chunk record that a batch asked for.
#[derive(Clone, Debug, Default)]
struct ValuesAsked {
    left: usize,
    groups: Option<BTreeSet<usize>>,
    got: Vec<Vec<u8>>,
}

/// Notes that the values record of `group` of full chunk record `holder`
/// is wanted (`None`: the group is not known, so every one is).
fn want_group(wanted: &mut HashMap<Ref, Option<BTreeSet<usize>>>, holder: Ref, group: Option<usize>) {
    let groups = wanted.entry(holder).or_insert_with(|| Some(BTreeSet::new()));
    match (groups.as_mut(), group) {
        (Some(set), Some(g)) => drop(set.insert(g)),
        _ => *groups = None,
    }
}

/// Walks from `node` to chunk `index`: the chunk, with the key copies that
/// bound it (where the path last turned right, and last turned left).
fn find(top: &Node, mut index: u64) -> (&Node, Option<&KeyCopy>, Option<&KeyCopy>) {
    let (mut node, mut lower, mut upper) = (top, None, None);
    while let Node::Inner(n) = node {
        let lc = n.left.chunks();
        if index < lc {
            upper = Some(&n.key);
            node = &n.left;
        } else {
            index -= lc;
            lower = Some(&n.key);
            node = &n.right;
        }
    }
    (node, lower, upper)
}

/// Stubs of unknown count at most `depth` levels below `node` (whose first
/// chunk is `base`): the rebalancing after a merge may rotate them.
fn unknown_stubs(node: &Node, base: u64, depth: u8, out: &mut Vec<(u64, Ref)>) {
    match node {
        Node::Stub(s) if s.entries.is_none() => out.push((base, s.record)),
        Node::Inner(n) if depth > 0 => {
            unknown_stubs(&n.left, base, depth - 1, out);
            unknown_stubs(&n.right, base + n.left.chunks(), depth - 1, out);
        }
        _ => {}
    }
}

/// Loads `chunk` (verified, with `m` entries) into the stub at `index`
/// below `node`. On the way down, a stub beside the path gets its count:
/// the parent's less the path child's.
fn attach(node: &mut Node, index: u64, m: u64, chunk: Chunk) -> Result<(), StoreError> {
    match node {
        Node::Stub(s) => {
            let loaded = chunk.stored.as_ref().map(|c| c.record);
            if loaded != Some(s.record) || s.entries.is_some_and(|e| e != m) {
                return Err(StoreError::Corrupt);
            }
            *node = Node::leaf(chunk);
            Ok(())
        }
        Node::Leaf(_) => unreachable!("a loaded chunk is not asked for again"),
        Node::Inner(_) => {
            let n = node.inner_mut();
            let lc = n.left.chunks();
            let (on, off, rel) =
                if index < lc { (&mut n.left, &mut n.right, index) } else { (&mut n.right, &mut n.left, index - lc) };
            let on_count = if on.is_chunk() { m } else { on.entries() };
            match off {
                Node::Stub(s @ Stub { entries: None, .. }) => s.resolve(n.entries, on_count)?,
                _ if off.entries() + on_count != n.entries => return Err(StoreError::Corrupt),
                _ => {}
            }
            attach(on, rel, m, chunk)
        }
    }
}

impl Tree {
    /// The chunk records to fetch before `key` can be written (`removing`:
    /// deleted; else inserted or updated), or none once the write can be
    /// applied. Every record returned must be supplied
    /// ([`Tree::supply_record`]) before the next call or write; it may take
    /// a few rounds (a chunk, then a delta's base, or a neighbour). The
    /// entry records that confirm the slot keys the write lands on or
    /// between join [`Tree::unconfirmed`]. Once none are needed it checks
    /// the loaded groups the write uses (`STORE_CORRUPT`): a chunk loads
    /// with its group nodes checked, its entry hashes not yet.
    pub fn needed_for(&mut self, key: &[u8], removing: bool) -> Result<Vec<(Table, Ref)>, StoreError> {
        // What an earlier call asked for was supplied, or given up on.
        self.paging.awaited.clear();
        let Some(top) = self.top() else { return Ok(Vec::new()) };
        let (mut stubs, mut entries) = (Vec::new(), Vec::new());
        // The groups to check before the write, those of every slot it relies
        // on: an updated entry's, every group of a chunk whose entries may
        // move or whose slots place the key, and the next chunk's first.
        let mut checks: Vec<(u64, Option<usize>)> = Vec::new();
        let confirm = |c: &Chunk, i: usize, entries: &mut Vec<(Table, Ref, Vec<u8>, Option<usize>)>| {
            if c.is_trusted(i) {
                return;
            }
            if let Some(r) = c.stored_entry(i) {
                entries.push((Table::Entries, r, c.key(i).to_vec(), None));
            } else if let Some(holder) = c.holder(i) {
                entries.push((Table::Chunks, holder, c.key(i).to_vec(), c.held_group(i)));
            }
        };
        match search(top, key) {
            (index, Node::Stub(s)) => stubs.push((index, s.record)),
            (index, Node::Leaf(c)) => {
                // Slot keys and key copies are not hashed: confirm the keys the
                // write lands on or between, past the chunk's end the next one's first.
                let found = match c.search(key) {
                    Ok(i) => {
                        confirm(c, i, &mut entries);
                        checks.push((index, (!removing).then_some(i)));
                        true
                    }
                    Err(i) => {
                        (i.saturating_sub(1)..(i + 1).min(c.len())).for_each(|j| confirm(c, j, &mut entries));
                        // (A removal of an absent key writes nothing, but its answer relies on these slots.)
                        checks.push((index, None));
                        if i == c.len() && index + 1 < top.chunks() {
                            match find(top, index + 1).0 {
                                Node::Stub(s) => stubs.push((index + 1, s.record)),
                                Node::Leaf(next) if next.first_key() <= key => return Err(StoreError::Corrupt),
                                Node::Leaf(next) => {
                                    // Its first slot's entry hash, which the confirmation reads by, is checked too.
                                    confirm(next, 0, &mut entries);
                                    checks.push((index + 1, Some(0)));
                                }
                                Node::Inner(_) => unreachable!("a walk by index ends at a chunk"),
                            }
                        }
                        false
                    }
                };
                if removing && found && top.chunks() > 1 && c.len() - 1 < min_fill(self.capacity()) {
                    // The deletion refills the chunk from a neighbour.
                    let neighbour = if index + 1 < top.chunks() { index + 1 } else { index - 1 };
                    // An entry moves from it, or it merges with this chunk.
                    checks.push((neighbour, None));
                    match find(top, neighbour).0 {
                        Node::Stub(s) => stubs.push((neighbour, s.record)),
                        // A merge removes the right chunk of the pair and rebalances its path.
                        Node::Leaf(nc) if nc.len() <= min_fill(self.capacity()) => {
                            merge_stubs(top, index.max(neighbour), &mut stubs)
                        }
                        _ => {}
                    }
                }
            }
            _ => unreachable!("a search ends at a chunk"),
        }
        for (table, r, key, group) in entries {
            match table {
                Table::Entries => drop(self.paging.unconfirmed.insert(r, key)),
                _ => self.paging.held_unconfirmed.entry(r).or_default().push((key, group)),
            }
        }
        if stubs.is_empty() {
            let top = self.top_mut().expect("a tree with a top");
            for (index, entry) in checks {
                if let Node::Leaf(c) = chunk_node_mut(top, index) {
                    let c = Arc::make_mut(c);
                    match entry {
                        Some(i) => c.check_group_of(i)?,
                        None => c.check_groups()?,
                    }
                }
            }
        }
        Ok(self.await_stubs(stubs))
    }

    /// The chunk records to fetch so that writes of `keys` find their
    /// chunks loaded, in one round for all (and one more for deltas'
    /// bases), where [`Tree::needed_for`] takes a round per write. Only a
    /// prefetch: each write still asks `needed_for` (a delete may need a
    /// neighbour, and earlier writes of the batch move chunks). The same
    /// contract: supply every record returned before the next call or write.
    pub fn needed_for_all<'a>(&mut self, keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<(Table, Ref)> {
        self.paging.awaited.clear();
        let Some(top) = self.top() else { return Vec::new() };
        let mut stubs = Vec::new();
        for key in keys {
            if let (index, Node::Stub(s)) = search(top, key) {
                stubs.push((index, s.record));
            }
        }
        self.await_stubs(stubs)
    }

    /// Notes which stub each record loads into, and returns the records to
    /// fetch for them: each stub's record, or the base of a delta supplied.
    fn await_stubs(&mut self, stubs: Vec<(u64, Ref)>) -> Vec<(Table, Ref)> {
        let paging = &mut self.paging;
        let (mut wanted, mut asked) = (Vec::new(), HashSet::new());
        for (index, r) in stubs {
            if paging.awaited.insert(r, index).is_some() {
                continue;
            }
            let record = paging.deltas.base_of(&r).unwrap_or(r);
            if asked.insert(record) {
                wanted.push((Table::Chunks, record));
            }
        }
        wanted
    }

    /// The records to read and supply before the commit, in key order:
    /// entry records (or the values records of full chunk records), each
    /// confirming a slot key that a write of the batch relied on (slot keys
    /// are not hashed); and the values records of full chunk records that hold values a
    /// changed chunk written whole must copy. Read together, not one round
    /// per write; a record that does not hold its slot's key, or the value
    /// its slot's entry hash names, fails the commit (`STORE_CORRUPT`).
    pub fn unconfirmed(&mut self) -> Vec<(Table, Ref)> {
        let version = self.head().version() + 1;
        let mut copies = Vec::new();
        // Changed chunks are the working tree's own: walking them copies nothing the committed snapshot shares.
        if let Some(top) = self.top_mut() {
            changed_chunks(top, &mut |c| copies.extend(c.values_to_copy(version)));
        }
        self.paging.values_wanted = copies.iter().map(|(h, _)| *h).collect();
        // Only the groups that hold a value wanted: a full record has up to 16 (`values_refs`).
        let mut groups = HashMap::new();
        let keys = self.paging.held_unconfirmed.iter().flat_map(|(h, keys)| keys.iter().map(|(_, g)| (*h, *g)));
        for (holder, group) in copies.into_iter().chain(keys) {
            want_group(&mut groups, holder, group);
        }
        let capacity = self.capacity();
        let mut wanted: Vec<(Table, Ref)> = Vec::new();
        for (h, groups) in groups {
            let refs: Vec<Ref> = match &groups {
                Some(set) => set.iter().map(|&g| values_ref(&h, g)).collect(),
                None => values_refs(&h, capacity).collect(),
            };
            self.paging.values_got.insert(h, ValuesAsked { left: refs.len(), groups, got: Vec::new() });
            for v in refs {
                self.paging.values_of.insert(v, h);
                wanted.push((Table::Values, v));
            }
        }
        wanted.extend(self.paging.unconfirmed.keys().map(|r| (Table::Entries, *r)));
        in_key_order(&mut wanted);
        wanted.dedup();
        wanted
    }

    /// Hands over a record [`Tree::needed_for`] or [`Tree::unconfirmed`] asked for (`None`: the
    /// store lacks it). A chunk loads once its record (and, for a delta,
    /// its base) checks against its ref, its first key equals the key copy
    /// before it, and its last key sorts below the one after it. An entry
    /// record must hash to its ref with the key its slot lists. Returns the
    /// bytes of the chunks it loaded ([`Chunk::resident_bytes`]; 0 for an
    /// entry record, or a delta waiting for its base), so that a caller
    /// bounding a batch counts its loads without walking the tree.
    pub fn supply_record(&mut self, table: Table, r: &Ref, bytes: Option<&[u8]>) -> Result<usize, StoreError> {
        if table == Table::Values {
            self.supply_values(r, bytes)?;
            return Ok(0);
        }
        let bytes = bytes.ok_or(StoreError::Corrupt)?;
        match table {
            Table::Chunks => self.supply_chunk(r, bytes),
            Table::Entries => {
                let key = self.paging.unconfirmed.remove(r).ok_or(StoreError::Corrupt)?;
                decode_entry(bytes, &r.hash, &key)?;
                self.trust(&key, r);
                Ok(0)
            }
            Table::Nodes | Table::Values => Err(StoreError::Corrupt),
        }
    }

    /// Takes a values record [`Tree::unconfirmed`] asked for (`None`: its
    /// group holds no value); once every group of its full chunk record is
    /// here, the values they hold.
    fn supply_values(&mut self, r: &Ref, bytes: Option<&[u8]>) -> Result<(), StoreError> {
        let holder = self.paging.values_of.remove(r).ok_or(StoreError::Corrupt)?;
        let asked = self.paging.values_got.get_mut(&holder).ok_or(StoreError::Corrupt)?;
        asked.left -= 1;
        asked.got.extend(bytes.map(<[u8]>::to_vec));
        if asked.left > 0 {
            return Ok(());
        }
        let asked = self.paging.values_got.remove(&holder).expect("just seen");
        self.take_held(&holder, asked.groups.as_ref(), &asked.got)
    }

    /// Confirms the slot key of `key` without reading its value's record,
    /// from `value`: what a checked read found for `key` at the committed
    /// version. The slot's entry hash must be `entry_hash(key, value)`,
    /// which only the slot's own entry gives. Call it once
    /// [`Tree::needed_for`] names no records, before the write; a value that
    /// does not match changes nothing, and the record stays in
    /// [`Tree::unconfirmed`].
    pub fn confirm_read(&mut self, key: &[u8], value: &[u8]) {
        let hash = entry_hash(key, value);
        let Some((entry, holder)) = self.trust_if(key, |c, i| c.entry_hash(i) == Some(hash)) else { return };
        if let Some(r) = entry {
            self.paging.unconfirmed.remove(&r);
        }
        if let Some(keys) = holder.and_then(|h| self.paging.held_unconfirmed.get_mut(&h)) {
            keys.retain(|(k, _)| k.as_slice() != key);
        }
    }

    /// Marks the slot of `key` trusted if it still names entry record `r`,
    /// whose key was just read.
    fn trust(&mut self, key: &[u8], r: &Ref) {
        self.trust_if(key, |c, i| c.stored_entry(i) == Some(*r));
    }

    /// Takes what the values `records` of full chunk record `r` hold (of
    /// `groups`; `None`: all), which [`Tree::unconfirmed`] asked for: the
    /// values that confirm the slot keys waiting for it (each must give its
    /// slot's entry hash), and those that changed chunks written whole copy.
    fn take_held(&mut self, r: &Ref, groups: Option<&BTreeSet<usize>>, records: &[Vec<u8>]) -> Result<(), StoreError> {
        let keys = self.paging.held_unconfirmed.remove(r).unwrap_or_default();
        if keys.is_empty() && !self.paging.values_wanted.remove(r) {
            return Ok(());
        }
        let mut held: HashMap<&[u8], &[u8]> = HashMap::new();
        for bytes in records {
            held.extend(held_values(bytes)?);
        }
        for (key, _) in keys {
            let hash = held.get(key.as_slice()).map(|v| entry_hash(&key, v));
            // A slot that still names the record must find its value there.
            let named = |c: &Chunk, i: usize| c.holder(i) == Some(*r);
            if self.trust_if(&key, |c, i| named(c, i) && c.entry_hash(i) == hash).is_none()
                && self.trust_if(&key, named).is_some()
            {
                return Err(StoreError::Corrupt);
            }
        }
        // Changed chunks are the working tree's own: walking them copies nothing the committed snapshot shares.
        if let Some(top) = self.top_mut() {
            let mut result = Ok(());
            changed_chunks(top, &mut |c| {
                if result.is_ok() {
                    result = c.take_held(r, groups, &held);
                }
            });
            result?;
        }
        Ok(())
    }

    /// Marks the slot of `key` trusted if it passes `ok` (the loaded chunk
    /// and the slot's position), and returns where its value is: its entry
    /// record, or the record that holds it. The chunk was not changed (nor
    /// copied from the committed snapshot) for nothing: a write relies on the slot.
    fn trust_if(&mut self, key: &[u8], ok: impl Fn(&Chunk, usize) -> bool) -> Option<(Option<Ref>, Option<Ref>)> {
        let mut node = self.top_mut()?;
        loop {
            match node {
                Node::Inner(_) => {
                    let n = node.inner_mut();
                    node = if n.key.is_above(key, prefix(key)) { &mut n.left } else { &mut n.right };
                }
                Node::Leaf(c) => {
                    let i = c.search(key).ok().filter(|&i| ok(c, i))?;
                    let place = (c.stored_entry(i), c.holder(i));
                    Arc::make_mut(c).trust(i);
                    return Some(place);
                }
                Node::Stub(_) => return None,
            }
        }
    }

    fn supply_chunk(&mut self, r: &Ref, bytes: &[u8]) -> Result<usize, StoreError> {
        let mut loaded = 0;
        match ChunkRecord::decode(bytes, self.capacity())? {
            ChunkRecord::Delta(delta) if self.paging.deltas.refuses(r, &delta) => {
                return Err(StoreError::Corrupt);
            }
            ChunkRecord::Delta(delta) => {
                self.paging.deltas.add(*r, delta);
            }
            ChunkRecord::Full { slots, groups } => {
                let (slots, groups): (Arc<[Slot]>, Arc<[Hash]>) = (slots.into(), groups.into());
                for (at, delta) in self.paging.deltas.take(r) {
                    let (applied, applied_groups) = delta.apply(&slots, &groups, self.capacity())?;
                    loaded += self.load(at, &applied, &applied_groups, *r, slots.clone(), groups.clone())?;
                }
                if self.paging.awaited.contains_key(r) {
                    // The record is its own base: its slots load, shared, as both.
                    let (base_slots, base_groups) = (slots.clone(), groups.clone());
                    loaded += self.load(*r, &slots, &groups, *r, base_slots, base_groups)?;
                }
            }
        }
        Ok(loaded)
    }

    fn load(
        &mut self,
        r: Ref,
        slots: &[Slot],
        groups: &[Hash],
        base: Ref,
        base_slots: Arc<[Slot]>,
        base_groups: Arc<[Hash]>,
    ) -> Result<usize, StoreError> {
        let Some(index) = self.paging.awaited.remove(&r) else { return Ok(0) };
        // The group nodes against the chunk hash now; each group's entries when a write uses them.
        let tree = preorder_above_groups(&verify_groups(slots.len(), groups, &r.hash)?, slots.len());
        let top = self.top().expect("a stub is in the tree");
        let (_, lower, upper) = find(top, index);
        let (first, last) = (&slots[0].key, &slots[slots.len() - 1].key);
        if lower.is_some_and(|l| l.as_bytes() != first.as_slice())
            || upper.is_some_and(|u| !u.is_above(last, prefix(last)))
        {
            return Err(StoreError::Corrupt);
        }
        let m = slots.len() as u64;
        let values = vec![None; slots.len()];
        let mut chunk = Chunk::from_stored(slots, values, tree, StoredChunk::new(r, base, base_slots, base_groups))
            .with_groups_unchecked();
        self.paging.clock += 1;
        chunk.loaded_at = self.paging.clock;
        let bytes = chunk.resident_bytes();
        attach(self.top_mut().expect("a stub is in the tree"), index, m, chunk)?;
        Ok(bytes)
    }

    /// Bytes of the loaded chunks, counted from their contents
    /// ([`Chunk::resident_bytes`]), never through RSS.
    pub fn resident_bytes(&self) -> usize {
        let mut loaded = Vec::new();
        if let Some(top) = self.top() {
            loaded_chunks(top, 0, &mut loaded);
        }
        loaded.iter().map(|l| l.2).sum()
    }

    /// Turns the oldest loaded chunks back into stubs until the loaded ones
    /// take at most `budget` bytes: after a commit, or during a batch.
    /// Chunks with unstored changes stay.
    pub fn evict(&mut self, budget: usize) {
        let Some(top) = self.top() else { return };
        // The committed snapshot shares the working tree only while no write is pending.
        let pending = !self.dropped.is_empty() || !top.is_persisted();
        let mut loaded = Vec::new();
        loaded_chunks(top, 0, &mut loaded);
        let mut total: usize = loaded.iter().map(|l| l.2).sum();
        if total <= budget {
            return;
        }
        loaded.sort_unstable();
        let committed = self.release_committed();
        for (_, index, bytes) in loaded {
            if total <= budget {
                break;
            }
            if stub_out(self.top_mut().expect("loaded chunks"), index) {
                total -= bytes;
            }
        }
        if !pending {
            self.restore_committed(committed);
        }
    }
}

/// Adds the unknown stubs that the merge removing chunk `index` may rotate:
/// up to two levels below each sibling along its path.
fn merge_stubs(top: &Node, mut index: u64, out: &mut Vec<(u64, Ref)>) {
    let (mut node, mut base) = (top, 0u64);
    while let Node::Inner(n) = node {
        let lc = n.left.chunks();
        if index < lc {
            unknown_stubs(&n.right, base + lc, 2, out);
            node = &n.left;
        } else {
            unknown_stubs(&n.left, base, 2, out);
            index -= lc;
            base += lc;
            node = &n.right;
        }
    }
}

/// Hands each changed chunk below `node` to `f`.
fn changed_chunks(node: &mut Node, f: &mut impl FnMut(&mut Chunk)) {
    match node {
        Node::Leaf(c) if !c.persisted => f(Arc::make_mut(c)),
        Node::Inner(n) if !n.persisted => {
            let n = node.inner_mut();
            changed_chunks(&mut n.left, f);
            changed_chunks(&mut n.right, f);
        }
        _ => {}
    }
}

/// Every loaded chunk below `node` (whose first chunk is `base`): when it
/// loaded, its index and its resident bytes.
fn loaded_chunks(node: &Node, base: u64, out: &mut Vec<(u64, u64, usize)>) {
    match node {
        Node::Leaf(c) => out.push((c.loaded_at, base, c.resident_bytes())),
        Node::Stub(_) => {}
        Node::Inner(n) => {
            loaded_chunks(&n.left, base, out);
            loaded_chunks(&n.right, base + n.left.chunks(), out);
        }
    }
}

/// The node of chunk `index` below `node` (a loaded chunk or a stub). The
/// nodes on the way are made the working tree's own, not marked changed.
fn chunk_node_mut(node: &mut Node, index: u64) -> &mut Node {
    match node {
        Node::Inner(_) => {
            let n = node.inner_mut();
            let lc = n.left.chunks();
            if index < lc {
                chunk_node_mut(&mut n.left, index)
            } else {
                chunk_node_mut(&mut n.right, index - lc)
            }
        }
        _ => node,
    }
}

/// Turns the loaded chunk `index` into a stub if the store holds it as it is.
fn stub_out(top: &mut Node, index: u64) -> bool {
    let node = chunk_node_mut(top, index);
    let Node::Leaf(c) = &*node else { return false };
    let stub = match (&c.stored, c.persisted) {
        (Some(s), true) => Stub { record: s.record, entries: Some(c.len() as u64) },
        _ => return false,
    };
    *node = Node::Stub(stub);
    true
}
