//! Reads from a stored version with bounded memory (`docs/store.md`,
//! "Bounded memory" and "Nothing from storage is trusted"): inner nodes are
//! loaded on demand and kept; verified chunks (keys, entry refs and the
//! upper levels of the in-chunk tree, no values) live in a cache bounded in
//! bytes, least recently used first. No I/O: a lookup that reaches a record
//! it does not hold says so, the caller fetches it, hands it to
//! [`Pages::supply`] and asks again.
//!
//! A lookup answers with the entry records that prove its answer: the
//! entry found, or the adjacent entries that bracket an absent key. The
//! caller checks each with [`crate::record::decode_entry`] against the key
//! its slot lists, so keys and key copies, which no hash covers, only
//! route the search and can never make an answer wrong.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};

use crate::envelope::ChunkEnvelope;
use crate::error::{ProofError, StoreError, TreeError};
use crate::hash::{
    entry_hash, entry_hashes, group_count, inchunk_node, left_size, multiproof_by, subtree_level, Hash, GROUP_LEAVES,
    GROUP_LEVEL,
};
use crate::keys::Keys;
use crate::limits::{MAX_KEY_LEN, MIN_CAPACITY};
use crate::path::{ChunkPath, PathStep};
use crate::proof::{
    check_range_query, segment_len, AbsenceProof, ChunkProof, EntryWitness, Neighbour, RangeProof, Segment,
};
use crate::record::{
    decode_full, entry_value_unchecked, held_values, values_ref, verify_group, verify_groups, Child, ChunkRecord,
    Entry, FullParts, HeldValue, NodeRecord, Ref, Slot, Table, WaitingDeltas, FORMAT_FULL_CHUNK,
};
use crate::subtree::{bitmap_positions, check_levels, entries_bytes, leaves_bytes, write_subtree, TreePath, WireNode};

/// Resident bytes counted for a cached chunk besides its keys and its stored
/// in-chunk hashes: per slot the entry ref, where its key ends and its
/// prefix; per group whether it is checked; per chunk its vectors with their
/// heap headers, its map and LRU entries.
const SLOT_BYTES: usize = 40 + 4 + 8;
const GROUP_BYTES: usize = 1;
const CHUNK_BYTES: usize = 512;

/// A chunk checked against its hash by the group nodes its record stores
/// (`hash::GROUP_LEVEL`: about M/16 hashes, not M − 1), its keys in one buffer
/// (`keys::Keys`; a vector a key cost 40 bytes more a slot, and as many frees
/// at eviction). The leaves of a group are hashed to its node the first
/// time an answer uses one of them, so a cold read hashes one group.
struct CachedChunk {
    keys: Keys,
    entries: Vec<Entry>,
    /// The full record whose values records hold the values of its held
    /// slots (its own, or its delta's base), and, for a delta's chunk, the
    /// group of that record each slot lies in (a held slot's value is in
    /// that group's values record).
    holder: Ref,
    holder_groups: Option<Vec<u8>>,
    /// The in-chunk tree from the group level up (`hash::inchunk_levels` of the group nodes), which proofs read.
    upper: Vec<Vec<Hash>>,
    /// Whether each group's leaves were hashed to its node.
    checked: Vec<Cell<bool>>,
    bytes: usize,
    last_used: u64,
    /// When it was loaded, to tell a cache hit from a chunk loaded for the lookup at hand.
    loaded_at: u64,
}

impl CachedChunk {
    fn new(
        keys: Keys,
        entries: Vec<Entry>,
        holder: Ref,
        holder_groups: Option<Vec<u8>>,
        upper: Vec<Vec<Hash>>,
    ) -> CachedChunk {
        let checked = vec![Cell::new(false); upper[0].len()];
        CachedChunk { keys, entries, holder, holder_groups, upper, checked, bytes: 0, last_used: 0, loaded_at: 0 }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        self.keys.key(i)
    }

    /// Checks the groups that slots `[lo, hi)` lie in, each once.
    fn check(&self, lo: usize, hi: usize) -> Result<(), StoreError> {
        for g in lo / GROUP_LEAVES..hi.div_ceil(GROUP_LEAVES) {
            if !self.checked[g].get() {
                let group = &self.entries[g * GROUP_LEAVES..((g + 1) * GROUP_LEAVES).min(self.len())];
                verify_group(&group.iter().map(|e| *e.hash()).collect::<Vec<_>>(), &self.upper[0][g])?;
                self.checked[g].set(true);
            }
        }
        Ok(())
    }

    /// Where slot `i`'s value is, its group checked.
    fn entry(&self, i: usize) -> Result<Entry, StoreError> {
        self.check(i, i + 1)?;
        Ok(self.entries[i])
    }

    /// The record that holds slot `i`'s value, its group checked: its entry
    /// record, or a values record of the chunk's holder.
    fn source(&self, i: usize) -> Result<(Table, Ref), StoreError> {
        Ok(match self.entry(i)? {
            Entry::Record(r) => (Table::Entries, r),
            Entry::Held(_) => {
                let group = self.holder_groups.as_ref().map_or(i / GROUP_LEAVES, |g| g[i] as usize);
                (Table::Values, values_ref(&self.holder, group))
            }
        })
    }

    /// Every entry hash, every group checked.
    fn leaves(&self) -> Result<Vec<Hash>, StoreError> {
        self.check(0, self.len())?;
        Ok(self.entries.iter().map(|e| *e.hash()).collect())
    }

    /// The MTH of leaves `[a, a + n)`, a subtree of the in-chunk tree: kept,
    /// or hashed from the leaves below the group level (whose groups the
    /// caller checked).
    fn subtree(&self, a: usize, n: usize) -> Hash {
        let level = subtree_level(n);
        if level >= GROUP_LEVEL {
            return self.upper[level - GROUP_LEVEL][a >> level];
        }
        if n == 1 {
            return *self.entries[a].hash();
        }
        let k = left_size(n);
        inchunk_node(&self.subtree(a, k), &self.subtree(a + k, n - k))
    }

    fn root(&self) -> Hash {
        self.upper[self.upper.len() - 1][0]
    }

    /// The in-chunk multiproof of slots `[lo, hi)` (`hash::multiproof`),
    /// their groups checked (the hashes below the group level it needs lie
    /// in the groups of `lo` and `hi − 1`).
    fn multiproof(&self, lo: usize, hi: usize) -> Result<Vec<Hash>, StoreError> {
        self.check(lo, hi)?;
        Ok(multiproof_by(self.len(), lo, hi, |_, a, n| self.subtree(a, n)))
    }
}

/// A value found: in a record still to read, or at hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// The entry record that holds it: the value once it checks against the key.
    Record(Ref),
    /// The values record that holds it, with its entry hash: the value
    /// once it checks (`record::held_value`).
    Held(Ref, Hash),
    /// The value, checked (its record was read for the question).
    Here(Vec<u8>),
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Fetch these records, [`Pages::supply`] them, and look up again.
    Need(Vec<(Table, Ref)>),
    /// The key's value.
    Found(Value),
    /// The key is absent once these adjacent entry records check with these
    /// keys (one at either end of the tree, else two; a neighbour whose
    /// value a values record holds was checked here, and is not listed).
    Absent(Vec<(Ref, Vec<u8>)>),
}

/// What `Pages::witness` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Witness {
    /// Fetch these records, [`Pages::supply`] them, and ask again.
    Need(Vec<(Table, Ref)>),
    /// The value and its witness: an existence proof once wrapped in `ExistenceProof`.
    Found(Value, EntryWitness),
    /// No slot holds the key (`lookup` proves the absence).
    NotFound,
}

/// What `Pages::prove_absence` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Absence {
    /// Fetch these records, [`Pages::supply`] them, and ask again.
    Need(Vec<(Table, Ref)>),
    /// The absence proof, to verify against the version's root; its
    /// neighbours' values come from entry records checked against their slots.
    Proof(Box<AbsenceProof>),
    /// The key is in the version (its entry record checked).
    Present,
}

/// What `Pages::prove_range`, `prove_chunk` and `export_chunk` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Paged<T> {
    /// Fetch these records, [`Pages::supply`] them, and ask again.
    Need(Vec<(Table, Ref)>),
    Done(T),
}

impl<T> Paged<T> {
    fn is_need(&self) -> bool {
        matches!(self, Paged::Need(_))
    }
}

/// A range proof built chunk by chunk across rounds of fetches: finished
/// segments stay here, so a cache smaller than the range still ends.
pub struct RangeCursor {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    limit: usize,
    /// The chunk index and position the next segment starts at; `None` until the window is found.
    next: Option<(u64, usize)>,
    results: usize,
    segments: Vec<Segment>,
}

impl RangeCursor {
    /// A proof of every entry with `start ≤ key < end`, at most `limit` of them.
    pub fn new(start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<RangeCursor, ProofError> {
        check_range_query(start, end, limit)?;
        let (start, end) = (start.to_vec(), end.map(<[u8]>::to_vec));
        Ok(RangeCursor { start, end, limit, next: None, results: 0, segments: Vec::new() })
    }
}

/// Inner nodes and a byte-bounded chunk cache over a store's records.
pub struct Pages {
    capacity: usize,
    budget: usize,
    nodes: HashMap<Ref, NodeRecord>,
    chunks: HashMap<Ref, CachedChunk>,
    /// Cached chunks by last use, oldest first.
    lru: BTreeMap<u64, Ref>,
    clock: u64,
    /// The clock when the last lookup answered.
    answered_at: u64,
    resident: usize,
    /// Deltas supplied before their base.
    deltas: WaitingDeltas,
    /// Entry records supplied for the question at hand, dropped once it is answered.
    entries: HashMap<Ref, Vec<u8>>,
    /// Values records supplied for the question at hand; dropped with `entries`.
    held: HashMap<Ref, Vec<u8>>,
    hits: u64,
    misses: u64,
}

impl Pages {
    /// Pages of a store of chunk `capacity`, caching at most `budget` bytes
    /// of chunks. The budget is raised to what two chunks of the largest keys
    /// need, so that a question about two adjacent chunks always fits.
    pub fn new(capacity: usize, budget: usize) -> Pages {
        let capacity = capacity.max(MIN_CAPACITY);
        Pages {
            capacity,
            budget: budget
                .max(2 * Self::chunk_bytes(capacity, MAX_KEY_LEN * capacity, capacity, group_count(capacity))),
            nodes: HashMap::new(),
            chunks: HashMap::new(),
            lru: BTreeMap::new(),
            clock: 0,
            answered_at: 0,
            resident: 0,
            deltas: WaitingDeltas::default(),
            entries: HashMap::new(),
            held: HashMap::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// What a chunk of `m` slots holding `key_bytes` of keys, `hashes` in-chunk hashes and `groups` groups counts for.
    fn chunk_bytes(m: usize, key_bytes: usize, hashes: usize, groups: usize) -> usize {
        CHUNK_BYTES + key_bytes + m * SLOT_BYTES + hashes * 32 + groups * GROUP_BYTES
    }

    /// Bytes of chunks cached now (counted from their contents, never above the budget).
    pub fn resident_bytes(&self) -> usize {
        self.resident
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Chunk lookups served from the cache, and chunks loaded from the store.
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Hands over a record a question needed (`None`: the store lacks it),
    /// checked against the hash of its ref. Entry records are kept for the
    /// question at hand and checked against their slot's key when used.
    pub fn supply(&mut self, table: Table, r: &Ref, bytes: Option<&[u8]>) -> Result<(), StoreError> {
        let bytes = bytes.ok_or(StoreError::Corrupt)?;
        match table {
            Table::Nodes => {
                self.nodes.insert(*r, NodeRecord::decode(bytes, &r.hash)?);
            }
            Table::Chunks if bytes.first() == Some(&FORMAT_FULL_CHUNK) => {
                let full = decode_full(bytes, self.capacity)?;
                let waiting = self.deltas.take(r);
                let base = if waiting.is_empty() { Vec::new() } else { full.slots() };
                for (at, delta) in waiting {
                    let (applied, applied_groups) = delta.apply(&base, &full.groups, self.capacity)?;
                    // A held slot of a delta is one it keeps from its base: its value is in the base's group.
                    let group_in_base = |s: &Slot| match s.entry {
                        Entry::Held(_) => {
                            base.binary_search_by(|b| b.key.cmp(&s.key)).map_or(0, |p| (p / GROUP_LEAVES) as u8)
                        }
                        Entry::Record(_) => 0,
                    };
                    let groups = applied.iter().map(group_in_base).collect();
                    self.cache(at, *r, Some(groups), FullParts::of_slots(applied, applied_groups))?;
                }
                // A base is the chunk it was when written: it verifies, and may serve that version.
                self.cache(*r, *r, None, full)?;
            }
            Table::Chunks => match ChunkRecord::decode(bytes, self.capacity)? {
                ChunkRecord::Delta(delta) => {
                    self.deltas.add(*r, delta);
                }
                ChunkRecord::Full { .. } => unreachable!("a full record is read above"),
            },
            Table::Entries => {
                self.entries.insert(*r, bytes.to_vec());
            }
            Table::Values => {
                self.held.insert(*r, bytes.to_vec());
            }
        }
        Ok(())
    }

    /// The values of slots `range` of chunk `c`, unchecked, from the
    /// records supplied for the question at hand; or the records to fetch.
    fn values_unchecked(
        &self,
        c: &CachedChunk,
        range: std::ops::Range<usize>,
    ) -> Result<Result<Vec<&[u8]>, Wanted>, StoreError> {
        // Each values record parsed once for the range: no copy of its values.
        let mut parsed: HashMap<Ref, Vec<HeldValue>> = HashMap::new();
        let (mut found, mut need) = (Vec::with_capacity(range.len()), Vec::new());
        for i in range {
            let (table, r) = c.source(i)?;
            let value = match table {
                Table::Entries => self.entries.get(&r).map(|bytes| entry_value_unchecked(bytes)).transpose()?,
                _ => match self.held.get(&r) {
                    Some(bytes) => {
                        let held = match parsed.entry(r) {
                            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                            std::collections::hash_map::Entry::Vacant(v) => v.insert(held_values(bytes)?),
                        };
                        let at = held.binary_search_by(|(k, _)| (*k).cmp(c.key(i))).map_err(|_| StoreError::Corrupt)?;
                        Some(held[at].1)
                    }
                    None => None,
                },
            };
            match value {
                Some(v) => found.push(v),
                None if !need.contains(&(table, r)) => need.push((table, r)),
                None => {}
            }
        }
        Ok(if need.is_empty() { Ok(found) } else { Err(need) })
    }

    /// The value of slot `i` of chunk `c`, checked against its entry hash
    /// with the key the slot lists; or the record to fetch for it.
    fn value(&self, c: &CachedChunk, i: usize) -> Result<Result<Vec<u8>, (Table, Ref)>, StoreError> {
        Ok(match self.values_unchecked(c, i..i + 1)? {
            Ok(v) if entry_hash(c.key(i), v[0]) == *c.entries[i].hash() => Ok(v[0].to_vec()),
            Ok(_) => return Err(StoreError::Corrupt),
            Err(need) => Err(need[0]),
        })
    }

    /// The answer for a key found at slot `i` of `c`: its value if its
    /// chunk record was read for the question, else the record to read it
    /// from (a caller that holds the value already reads nothing).
    fn found(&self, c: &CachedChunk, i: usize) -> Result<Value, Step> {
        Ok(match c.source(i)? {
            (Table::Entries, r) => Value::Record(r),
            (_, r) if !self.held.contains_key(&r) => Value::Held(r, *c.entries[i].hash()),
            _ => Value::Here(self.value(c, i)??),
        })
    }

    /// Drops the records supplied for a question once it is answered.
    fn forget_values(&mut self) {
        self.entries.clear();
        self.held.clear();
    }

    fn cache(
        &mut self,
        r: Ref,
        holder: Ref,
        holder_groups: Option<Vec<u8>>,
        full: FullParts,
    ) -> Result<(), StoreError> {
        let FullParts { keys, entries, groups } = full;
        let upper = verify_groups(entries.len(), &groups, &r.hash)?;
        if self.chunks.contains_key(&r) {
            return Ok(());
        }
        let hashes = upper.iter().map(Vec::len).sum();
        let mut chunk = CachedChunk::new(keys, entries, holder, holder_groups, upper);
        let bytes = Self::chunk_bytes(chunk.len(), chunk.keys.byte_len(), hashes, groups.len());
        while self.resident + bytes > self.budget {
            let Some((_, old)) = self.lru.pop_first() else { break };
            self.resident -= self.chunks.remove(&old).expect("cached").bytes;
        }
        self.misses += 1;
        self.clock += 1;
        self.lru.insert(self.clock, r);
        self.resident += bytes;
        (chunk.bytes, chunk.last_used, chunk.loaded_at) = (bytes, self.clock, self.clock);
        self.chunks.insert(r, chunk);
        Ok(())
    }

    /// The cached chunk `r`, marked used; or the record to fetch for it.
    fn chunk(&mut self, r: &Ref) -> Result<&CachedChunk, (Table, Ref)> {
        let Some(c) = self.chunks.get_mut(r) else {
            let wanted = self.deltas.base_of(r).unwrap_or(*r);
            return Err((Table::Chunks, wanted));
        };
        self.lru.remove(&c.last_used);
        self.clock += 1;
        c.last_used = self.clock;
        self.lru.insert(self.clock, *r);
        Ok(c)
    }

    /// The search for `key`, by the key copies.
    fn descend(&self, top: Child, key: &[u8]) -> Result<Descent, Step> {
        self.walk(top, |n| Ok(key < n.key_copy.as_slice()))
    }

    /// A walk from `top` to a chunk, turning left where `go_left` says.
    fn walk(&self, top: Child, mut go_left: impl FnMut(&NodeRecord) -> Result<bool, Step>) -> Result<Descent, Step> {
        let (mut lower, mut path, mut key_height, mut child) = (None, Vec::new(), 0, top);
        loop {
            match child {
                Child::Chunk(at) => return Ok(Descent { at, lower, path, key_height }),
                Child::Node(r) => {
                    let n = self.nodes.get(&r).ok_or((Table::Nodes, r))?;
                    let left = go_left(n)?;
                    let (next, other) = if left { (n.left, n.right) } else { (n.right, n.left) };
                    path.push((left, n.height, n.chunk_count, n.entry_count, other.record().hash));
                    if !left {
                        lower = Some(n.key_copy.clone());
                        key_height = n.height;
                    }
                    child = next;
                }
            }
        }
    }

    /// Where `key` is in the version whose top is `top`: its slot, or the
    /// slots either side of it. The key copies that route the search are not
    /// hashed, so the answer is checked against what is: the key copy below
    /// the key's chunk must be its first key, and a key past the chunk's end
    /// must sort below the first key of the next chunk, found by index.
    fn place(&mut self, top: Child, key: &[u8]) -> Result<Place, Step> {
        let d = self.descend(top, key)?;
        let c = self.chunk(&d.at)?;
        let (found, m) = (c.keys.search(key), c.len());
        if d.lower.as_deref().is_some_and(|l| l != c.key(0)) {
            return Err(Step::Corrupt);
        }
        match found {
            Ok(i) => Ok(Place::Found(d, i)),
            // Below the first key of a chunk that has a separator: the routing lied.
            Err(0) if d.lower.is_some() => Err(Step::Corrupt),
            Err(0) => Ok(Place::Between(None, Some((d, 0)))),
            Err(i) if i < m => Ok(Place::Between(Some((d.clone(), i - 1)), Some((d, i)))),
            Err(_) => {
                // The next chunk by index (counts are hashed, key copies are not); the key must sort below it.
                let index = chunk_index(&chunk_path(&d.path, 1)?);
                if index + 1 == self.chunk_count(top)? {
                    return Ok(Place::Between(Some((d, m - 1)), None));
                }
                let next = self.descend_index(top, index + 1)?;
                if self.chunks[&next.at].key(0) <= key {
                    return Err(Step::Corrupt);
                }
                Ok(Place::Between(Some((d, m - 1)), Some((next, 0))))
            }
        }
    }

    /// The witness of `key`'s entry in the version whose top is `top`
    /// (`spec/proof-format.md`), with the entry record that holds its value.
    pub fn witness(&mut self, top: Child, key: &[u8]) -> Result<Witness, StoreError> {
        let found = answer(self.witness_step(top, key), Witness::Need);
        self.settle(found, |w| matches!(w, Witness::Need(_)))
    }

    fn witness_step(&mut self, top: Child, key: &[u8]) -> Result<Witness, Step> {
        let place = self.place(top, key)?;
        self.answered(&place);
        let Place::Found(d, position) = place else {
            return Ok(Witness::NotFound);
        };
        let c = &self.chunks[&d.at];
        Ok(Witness::Found(self.found(c, position)?, entry_witness(&d.path, c, position)?))
    }

    /// Counts a question answered at `place` as a hit when the chunk it
    /// ended in was cached before the question (after the last answer).
    fn answered(&mut self, place: &Place) {
        let at = match place {
            Place::Found(d, _) => d.at,
            Place::Between(left, right) => left.as_ref().or(right.as_ref()).expect("a chunk holds a key").0.at,
        };
        self.hits += u64::from(self.chunks[&at].loaded_at <= self.answered_at);
        self.answered_at = self.clock;
    }

    /// The absence proof of `key` in the version whose top is `top` (`None`:
    /// the empty tree), with its neighbours' values from their entry records.
    pub fn prove_absence(&mut self, top: Option<Child>, key: &[u8]) -> Result<Absence, StoreError> {
        let Some(top) = top else {
            return Ok(Absence::Proof(Box::new(AbsenceProof { capacity: self.capacity, left: None, right: None })));
        };
        let found = answer(self.absence_step(top, key), Absence::Need);
        self.settle(found, |a| matches!(a, Absence::Need(_)))
    }

    fn absence_step(&mut self, top: Child, key: &[u8]) -> Result<Absence, Step> {
        let (left, right) = match self.place(top, key)? {
            Place::Found(d, i) => {
                self.value(&self.chunks[&d.at], i)??;
                return Ok(Absence::Present);
            }
            Place::Between(left, right) => (left, right),
        };
        // Both entry records are asked for in one round.
        let mut need = Vec::new();
        let left = left.map(|(d, i)| self.neighbour(&d, i, &mut need)).transpose()?.flatten();
        let right = right.map(|(d, i)| self.neighbour(&d, i, &mut need)).transpose()?.flatten();
        if !need.is_empty() {
            return Err(Step::Need(need));
        }
        Ok(Absence::Proof(Box::new(AbsenceProof { capacity: self.capacity, left, right })))
    }

    /// The neighbour at `position` of the chunk `d` ends at; `None` once its
    /// entry record is added to `need`.
    fn neighbour(&self, d: &Descent, position: usize, need: &mut Vec<(Table, Ref)>) -> Result<Option<Neighbour>, Step> {
        let c = self.chunks.get(&d.at).ok_or((Table::Chunks, d.at))?;
        let value = match self.value(c, position)? {
            Ok(value) => value,
            Err(record) => {
                if !need.contains(&record) {
                    need.push(record);
                }
                return Ok(None);
            }
        };
        let witness = entry_witness(&d.path, c, position)?;
        Ok(Some(Neighbour { key: c.key(position).to_vec(), value, witness }))
    }

    /// Builds `cursor`'s range proof in the version whose top is `top`
    /// (`None`: the empty tree), the same proof `Snapshot::prove_range` gives.
    pub fn prove_range(
        &mut self,
        top: Option<Child>,
        cursor: &mut RangeCursor,
    ) -> Result<Paged<RangeProof>, StoreError> {
        if let Some(top) = top {
            match self.range_step(top, cursor) {
                Ok(()) => {}
                Err(Step::Need(records)) => return Ok(Paged::Need(records)),
                Err(Step::Corrupt) => return Err(StoreError::Corrupt),
            }
        }
        let segments = std::mem::take(&mut cursor.segments);
        Ok(Paged::Done(RangeProof { capacity: self.capacity, segments }))
    }

    /// Adds segments to `cur` until its proof is whole (the window of
    /// `spec/proof-format.md`: the left neighbour, the results, the successor).
    fn range_step(&mut self, top: Child, cur: &mut RangeCursor) -> Result<(), Step> {
        let total = self.chunk_count(top)?;
        if cur.next.is_none() {
            // The window starts at the left neighbour of the first key at or above `start`.
            let start = cur.start.clone();
            let index = |d: &Descent| chunk_path(&d.path, 1).map(|path| chunk_index(&path));
            cur.next = Some(match self.place(top, &start)? {
                // `start` is a key: the entry before it (the previous chunk's last, at a chunk's start).
                Place::Found(d, 0) => match index(&d)? {
                    0 => (0, 0),
                    i => (i - 1, usize::MAX),
                },
                Place::Found(d, i) => (index(&d)?, i - 1),
                // The entry just below `start`.
                Place::Between(Some((d, i)), _) => (index(&d)?, i),
                // Nothing below `start`: the first entry.
                Place::Between(None, _) => (0, 0),
            });
        }
        while let Some((index, lo)) = cur.next {
            let d = self.descend_index(top, index)?;
            let c = &self.chunks[&d.at];
            let m = c.len();
            let lo = lo.min(m - 1);
            let keys = (lo..m).map(|i| c.key(i));
            let (taken, results, ends) = segment_len(keys, &cur.start, cur.end.as_deref(), cur.limit, cur.results);
            let hi = lo + taken;
            let entries = self.values(c, lo..hi)?;
            let (inchunk, path) = (c.multiproof(lo, hi)?, chunk_path(&d.path, m)?);
            cur.segments.push(Segment { chunk_entries: m, lo, entries, inchunk, path });
            cur.results = results;
            self.forget_values();
            cur.next = (!ends && index + 1 < total).then_some((index + 1, 0));
        }
        Ok(())
    }

    /// The proof that chunk `index` sits at `index` in the version whose top is `top`.
    pub fn prove_chunk(&mut self, top: Option<Child>, index: u64) -> Result<Paged<ChunkProof>, StoreError> {
        let capacity = self.capacity;
        let found = answer(
            self.chunk_step(top, index, |_, c, path, _| {
                Ok(ChunkProof { capacity, chunk_entries: c.len(), chunk_root: c.root(), path })
            }),
            Paged::Need,
        );
        self.settle(found, Paged::is_need)
    }

    /// The envelope of chunk `index` (`spec/chunk-format.md`), its values from checked entry records.
    pub fn export_chunk(&mut self, top: Option<Child>, index: u64) -> Result<Paged<ChunkEnvelope>, StoreError> {
        let capacity = self.capacity;
        let found = answer(
            self.chunk_step(top, index, |pages, c, path, key_height| {
                let entries = pages.values(c, 0..c.len())?;
                Ok(ChunkEnvelope { capacity, key_height, entries, path })
            }),
            Paged::Need,
        );
        self.settle(found, Paged::is_need)
    }

    /// The `NODES` answer (`spec/catchup.md`): the subtree at `path` of the
    /// version whose top is `top`, `levels` deep, cut to `max_bytes`; its
    /// nodes' hashes are their records' (checked when supplied). Inside:
    /// `CHUNK_OUT_OF_RANGE` if `path` names no inner node, `QUERY_INVALID`
    /// for `levels` out of range.
    pub fn export_subtree(
        &mut self,
        top: Option<Child>,
        path: &TreePath,
        levels: u8,
        max_bytes: usize,
    ) -> Result<Paged<Result<Vec<u8>, TreeError>>, StoreError> {
        let found = answer(self.subtree_step(top, path, levels, max_bytes), Paged::Need);
        self.settle(found, Paged::is_need)
    }

    fn subtree_step(
        &mut self,
        top: Option<Child>,
        path: &TreePath,
        levels: u8,
        max_bytes: usize,
    ) -> Result<Paged<Result<Vec<u8>, TreeError>>, Step> {
        if let Err(e) = check_levels(levels) {
            return Ok(Paged::Done(Err(e)));
        }
        let Some(Child::Node(at)) = self.follow(top, path)? else {
            return Ok(Paged::Done(Err(TreeError::ChunkOutOfRange)));
        };
        // Every node of the subtree first, a level a round.
        let mut level = vec![at];
        for _ in 0..levels {
            let missing: Vec<(Table, Ref)> =
                level.iter().filter(|r| !self.nodes.contains_key(r)).map(|r| (Table::Nodes, *r)).collect();
            if !missing.is_empty() {
                return Err(Step::Need(missing));
            }
            level = level
                .iter()
                .flat_map(|r| [self.nodes[r].left, self.nodes[r].right])
                .filter_map(|c| match c {
                    Child::Node(r) => Some(r),
                    Child::Chunk(_) => None,
                })
                .collect();
        }
        let nodes = &self.nodes;
        let expand = |c: &Child| -> Result<_, Step> {
            Ok(match c {
                Child::Node(r) => nodes.get(r).map(|n| (WireNode::of_record(n), [n.left, n.right])),
                Child::Chunk(_) => None,
            })
        };
        Ok(Paged::Done(Ok(write_subtree(self.capacity, Child::Node(at), levels, max_bytes, expand)?)))
    }

    /// The `LEAVES` answer: the entry hashes of the chunk at `path` (inside:
    /// `CHUNK_OUT_OF_RANGE` if `path` names no chunk).
    pub fn export_leaves(
        &mut self,
        top: Option<Child>,
        path: &TreePath,
    ) -> Result<Paged<Result<Vec<u8>, TreeError>>, StoreError> {
        let step = self.follow(top, path).and_then(|found| {
            let Some(Child::Chunk(r)) = found else { return Ok(Err(TreeError::ChunkOutOfRange)) };
            let leaves = self.chunk(&r)?.leaves()?;
            Ok(Ok(leaves_bytes(&leaves)))
        });
        let found = answer(step.map(Paged::Done), Paged::Need);
        self.settle(found, Paged::is_need)
    }

    /// The `ENTRIES` answer: the entries of the chunk at `path` at the
    /// positions `bitmap` asks for, from checked entry records, the first
    /// that fit `max_bytes` (inside: `CHUNK_OUT_OF_RANGE` if `path` names no
    /// chunk, `QUERY_INVALID` for a bitmap that is not one of its).
    pub fn export_entries(
        &mut self,
        top: Option<Child>,
        path: &TreePath,
        bitmap: &[u8],
        max_bytes: usize,
    ) -> Result<Paged<Result<Vec<u8>, TreeError>>, StoreError> {
        let step = self.follow(top, path).and_then(|found| {
            let Some(Child::Chunk(r)) = found else { return Ok(Err(TreeError::ChunkOutOfRange)) };
            self.chunk(&r)?;
            let c = &self.chunks[&r];
            let Ok(positions) = bitmap_positions(bitmap, c.len()) else {
                return Ok(Err(TreeError::QueryInvalid));
            };
            let (mut entries, mut need) = (Vec::with_capacity(positions.len()), Vec::new());
            for &p in &positions {
                match self.value(c, p)? {
                    Ok(v) => entries.push((c.key(p), v)),
                    Err(record) if !need.contains(&record) => need.push(record),
                    Err(_) => {}
                }
            }
            if !need.is_empty() {
                return Err(Step::Need(need));
            }
            Ok(Ok(entries_bytes(entries.iter().map(|(k, v)| (*k, v.as_slice())), max_bytes)))
        });
        let found = answer(step.map(Paged::Done), Paged::Need);
        self.settle(found, Paged::is_need)
    }

    /// What `path` leads to from `top` (`None`: it names nothing).
    fn follow(&self, top: Option<Child>, path: &TreePath) -> Result<Option<Child>, Step> {
        let Some(mut child) = top else { return Ok(None) };
        for &right in path.turns() {
            let Child::Node(r) = child else { return Ok(None) };
            let n = self.nodes.get(&r).ok_or((Table::Nodes, r))?;
            child = if right { n.right } else { n.left };
        }
        Ok(Some(child))
    }

    /// Chunk `index` with its path and key height, handed to `then`
    /// (`STORE_CORRUPT` for an index out of range: callers check it against the version's count).
    fn chunk_step<T>(
        &mut self,
        top: Option<Child>,
        index: u64,
        then: impl FnOnce(&Pages, &CachedChunk, ChunkPath, u8) -> Result<T, Step>,
    ) -> Result<Paged<T>, Step> {
        let top = top.ok_or(Step::Corrupt)?;
        if index >= self.chunk_count(top)? {
            return Err(Step::Corrupt);
        }
        let d = self.descend_index(top, index)?;
        let c = &self.chunks[&d.at];
        let path = chunk_path(&d.path, c.len())?;
        then(self, c, path, d.key_height).map(Paged::Done)
    }

    /// The keys and values of slots `range` of chunk `c`, each value checked
    /// against its entry hash (hashed together, four at a time); or every
    /// entry record missing.
    fn values(&self, c: &CachedChunk, range: std::ops::Range<usize>) -> Result<KeyValues, Step> {
        let found = self.values_unchecked(c, range.clone())?.map_err(Step::Need)?;
        let hashes = entry_hashes(range.clone().zip(&found).map(|(i, v)| (c.key(i), *v)));
        if range.clone().zip(&hashes).any(|(i, h)| h != c.entries[i].hash()) {
            return Err(StoreError::Corrupt.into());
        }
        Ok(range.zip(found).map(|(i, v)| (c.key(i).to_vec(), v.to_vec())).collect())
    }

    /// How many chunks the version whose top is `top` has.
    fn chunk_count(&self, top: Child) -> Result<u64, Step> {
        match top {
            Child::Chunk(_) => Ok(1),
            Child::Node(r) => Ok(self.nodes.get(&r).ok_or((Table::Nodes, r))?.chunk_count),
        }
    }

    /// The search for chunk `index` (below the top's chunk count), by the
    /// nodes' chunk counts; the chunk is cached, and starts with the key copy
    /// where the search last went right (`STORE_CORRUPT` otherwise: key
    /// copies are not hashed, so this is where a walk over every chunk
    /// checks each of them).
    fn descend_index(&mut self, top: Child, index: u64) -> Result<Descent, Step> {
        let d = self.index_path(top, index)?;
        let first = self.chunk(&d.at)?.key(0);
        if d.lower.as_deref().is_some_and(|l| l != first) {
            return Err(Step::Corrupt);
        }
        Ok(d)
    }

    fn index_path(&self, top: Child, mut index: u64) -> Result<Descent, Step> {
        self.walk(top, |n| {
            let left_chunks = self.chunk_count(n.left)?;
            let left = index < left_chunks;
            if !left {
                index -= left_chunks;
            }
            Ok(left)
        })
    }

    /// Looks `key` up in the version whose top is `top`.
    pub fn lookup(&mut self, top: Child, key: &[u8]) -> Result<Lookup, StoreError> {
        let found = answer(self.lookup_step(top, key), Lookup::Need);
        self.settle(found, |l| matches!(l, Lookup::Need(_)))
    }

    fn lookup_step(&mut self, top: Child, key: &[u8]) -> Result<Lookup, Step> {
        let place = self.place(top, key)?;
        let answer = match &place {
            Place::Found(d, i) => Lookup::Found(self.found(&self.chunks[&d.at], *i)?),
            Place::Between(left, right) => {
                // Entry records are the caller's to read; a value a values record holds is checked here.
                let mut records = Vec::new();
                for (d, i) in left.iter().chain(right) {
                    let c = &self.chunks[&d.at];
                    match c.entry(*i)? {
                        Entry::Record(r) => records.push((r, c.key(*i).to_vec())),
                        Entry::Held(_) => drop(self.value(c, *i)??),
                    }
                }
                Lookup::Absent(records)
            }
        };
        self.answered(&place);
        Ok(answer)
    }

    /// Drops the records supplied for a question once its answer is final
    /// (not a list of records to fetch), so that they never outlive it.
    fn settle<T>(&mut self, found: Result<T, StoreError>, needs: impl Fn(&T) -> bool) -> Result<T, StoreError> {
        if !found.as_ref().is_ok_and(needs) {
            self.forget_values();
        }
        found
    }
}

/// The witness of the entry at `position` of chunk `c`, reached by `path`.
fn entry_witness(path: &[PathNode], c: &CachedChunk, position: usize) -> Result<EntryWitness, StoreError> {
    let m = c.len();
    let inchunk = c.multiproof(position, position + 1)?;
    Ok(EntryWitness { chunk_entries: m, position, inchunk, path: chunk_path(path, m)? })
}

/// The chunk path (bottom first) of a chunk of `m` entries reached by
/// `path`: each sibling's counts are its parent's less the child's.
fn chunk_path(path: &[PathNode], m: usize) -> Result<ChunkPath, StoreError> {
    let (mut chunks, mut entries, mut steps) = (1u64, m as u64, Vec::with_capacity(path.len()));
    for &(went_left, parent_height, parent_chunks, parent_entries, sibling_hash) in path.iter().rev() {
        steps.push(PathStep {
            sibling_is_left: !went_left,
            parent_height,
            sibling_chunks: parent_chunks.checked_sub(chunks).ok_or(StoreError::Corrupt)?,
            sibling_entries: parent_entries.checked_sub(entries).ok_or(StoreError::Corrupt)?,
            sibling_hash,
        });
        (chunks, entries) = (parent_chunks, parent_entries);
    }
    Ok(ChunkPath { steps })
}

/// The index of the chunk a path reaches: the chunks of every left sibling.
fn chunk_index(path: &ChunkPath) -> u64 {
    path.steps.iter().filter(|s| s.sibling_is_left).map(|s| s.sibling_chunks).sum()
}

/// Keys and values, in key order.
type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Records to fetch, with their tables.
type Wanted = Vec<(Table, Ref)>;

/// A node a search passed: whether it went left, the node's height and
/// counts, and the hash of the child it did not take.
type PathNode = (bool, u8, u64, u64, Hash);

/// Where a key is in a version: its slot, or the slots either side of it
/// (none beyond the tree's ends), each as the search that reaches its chunk
/// and the position there.
enum Place {
    Found(Descent, usize),
    Between(Option<(Descent, usize)>, Option<(Descent, usize)>),
}

/// Where a search ends: the chunk, the key copy where the search last went
/// right, and the nodes passed, top first.
#[derive(Clone)]
struct Descent {
    at: Ref,
    lower: Option<Vec<u8>>,
    path: Vec<PathNode>,
    /// The height of the lowest node where the search went right (0: none).
    key_height: u8,
}

/// Why a question stopped early.
enum Step {
    Need(Vec<(Table, Ref)>),
    Corrupt,
}

impl From<StoreError> for Step {
    fn from(_: StoreError) -> Step {
        Step::Corrupt
    }
}

impl From<(Table, Ref)> for Step {
    fn from(need: (Table, Ref)) -> Step {
        Step::Need(vec![need])
    }
}

/// An answer, or the records to fetch first.
fn answer<T>(step: Result<T, Step>, need: impl FnOnce(Vec<(Table, Ref)>) -> T) -> Result<T, StoreError> {
    match step {
        Ok(answer) => Ok(answer),
        Err(Step::Need(records)) => Ok(need(records)),
        Err(Step::Corrupt) => Err(StoreError::Corrupt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{entry_hash, inchunk_levels, inchunk_tree, multiproof};
    use crate::record::Slot;

    fn cached(slots: Vec<Slot>, groups: Vec<Hash>) -> CachedChunk {
        let full = FullParts::of_slots(slots, groups);
        CachedChunk::new(full.keys, full.entries, Ref { birth: 1, hash: [0; 32] }, None, inchunk_levels(&full.groups))
    }

    #[test]
    fn a_cached_chunk_checks_a_group_when_it_is_first_used() {
        let slots: Vec<Slot> = (0..40u32)
            .map(|i| {
                let key = i.to_be_bytes().to_vec();
                Slot::new(&key, Ref { birth: 1, hash: entry_hash(&key, b"v") })
            })
            .collect();
        let leaves: Vec<Hash> = slots.iter().map(|s| *s.entry.hash()).collect();
        let groups = crate::hash::group_roots(&inchunk_tree(&leaves), 40);
        let mut bad = slots.clone();
        if let Entry::Record(r) = &mut bad[20].entry {
            r.hash[0] ^= 1;
        }
        let c = cached(bad, groups);
        // Groups 0 and 2 check; group 1 (slots 16 … 31) holds the flipped leaf.
        assert_eq!(c.entry(3), Ok(slots[3].entry));
        assert_eq!(c.entry(35), Ok(slots[35].entry));
        assert_eq!(c.multiproof(0, 16).map(|p| p.len()), Ok(2)); // the nodes over slots 16 … 31 and 32 … 39
        assert_eq!(c.entry(20), Err(StoreError::Corrupt));
        assert_eq!(c.entry(16), Err(StoreError::Corrupt), "its group stays unchecked");
        assert_eq!(c.multiproof(15, 17), Err(StoreError::Corrupt));
        assert_eq!(c.leaves(), Err(StoreError::Corrupt));
        assert_eq!(c.checked.iter().map(Cell::get).collect::<Vec<_>>(), vec![true, false, true]);
    }

    /// The group nodes and the levels hashed again below them give exactly
    /// the whole tree's root and multiproofs.
    #[test]
    fn a_cached_chunk_proves_as_its_whole_tree() {
        for m in 1..=70usize {
            let slots: Vec<Slot> = (0..m)
                .map(|i| {
                    let key = (i as u32).to_be_bytes().to_vec();
                    Slot::new(&key, Ref { birth: 1, hash: entry_hash(&key, b"v") })
                })
                .collect();
            let leaves: Vec<Hash> = slots.iter().map(|s| *s.entry.hash()).collect();
            let tree = inchunk_tree(&leaves);
            let groups = crate::hash::group_roots(&tree, m);
            let c = cached(slots, groups);
            assert_eq!(c.root(), tree[0]);
            for lo in 0..m {
                for hi in lo + 1..=m {
                    assert_eq!(c.multiproof(lo, hi), Ok(multiproof(&tree, m, lo, hi)), "m = {m}, [{lo}, {hi})");
                }
            }
        }
    }
}
