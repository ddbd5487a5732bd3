//! Reads from a stored version with bounded memory (`docs/store.md`,
//! "Bounded memory" and "Nothing from storage is trusted"): inner nodes are
//! loaded on demand and kept; verified chunks (keys, entry refs and in-chunk
//! tree, no values) live in a cache bounded in bytes, least recently used
//! first. No I/O: a lookup that reaches a record it does not hold says so,
//! the caller fetches it, hands it to [`Pages::supply`] and asks again.
//!
//! A lookup answers with the entry records that prove its answer: the
//! entry found, or the adjacent entries that bracket an absent key. The
//! caller checks each with [`crate::record::decode_entry`] against the key
//! its slot lists, so keys and key copies, which no hash covers, only
//! route the search and can never make an answer wrong.

use std::collections::{BTreeMap, HashMap};

use crate::error::StoreError;
use crate::hash::{multiproof, Hash};
use crate::limits::{MAX_KEY_LEN, MIN_CAPACITY};
use crate::path::{ChunkPath, PathStep};
use crate::proof::{AbsenceProof, EntryWitness, Neighbour};
use crate::record::{apply_edits, decode_entry, verify_slots, Child, ChunkRecord, Edit, NodeRecord, Ref, Slot, Table};

/// Resident bytes counted for a cached chunk besides its keys: per slot the
/// entry ref, the key's bookkeeping and two in-chunk hashes (its leaf and
/// about one inner node).
const SLOT_BYTES: usize = 40 + 24 + 64;
const CHUNK_BYTES: usize = 64;

/// A chunk verified against its hash.
struct CachedChunk {
    slots: Vec<Slot>,
    /// The in-chunk tree (`hash::inchunk_tree`), which existence proofs read.
    tree: Vec<Hash>,
    bytes: usize,
    last_used: u64,
    /// When it was loaded, to tell a cache hit from a chunk loaded for the lookup at hand.
    loaded_at: u64,
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Fetch these records, [`Pages::supply`] them, and look up again.
    Need(Vec<(Table, Ref)>),
    /// The key's entry record; its value is the answer once it checks.
    Found(Ref),
    /// The key is absent once these adjacent entry records check with these
    /// keys (one at either end of the tree, else two).
    Absent(Vec<(Ref, Vec<u8>)>),
}

/// What `Pages::witness` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Witness {
    /// Fetch these records, [`Pages::supply`] them, and ask again.
    Need(Vec<(Table, Ref)>),
    /// The entry record (check it with `decode_entry`) and its witness: an
    /// existence proof once wrapped in `ExistenceProof`.
    Found(Ref, EntryWitness),
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
    /// Deltas supplied before their base, by delta.
    deltas: HashMap<Ref, (Ref, Vec<Edit>)>,
    /// Entry records supplied for the question at hand, dropped once it is answered.
    entries: HashMap<Ref, Vec<u8>>,
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
            budget: budget.max(2 * Self::chunk_bytes(capacity, MAX_KEY_LEN * capacity)),
            nodes: HashMap::new(),
            chunks: HashMap::new(),
            lru: BTreeMap::new(),
            clock: 0,
            answered_at: 0,
            resident: 0,
            deltas: HashMap::new(),
            entries: HashMap::new(),
            hits: 0,
            misses: 0,
        }
    }

    fn chunk_bytes(m: usize, key_bytes: usize) -> usize {
        CHUNK_BYTES + key_bytes + m * SLOT_BYTES
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
            Table::Chunks => match ChunkRecord::decode(bytes, self.capacity)? {
                ChunkRecord::Full(slots) => {
                    let waiting: Vec<Ref> = self.deltas.iter().filter(|(_, (b, _))| b == r).map(|(d, _)| *d).collect();
                    for delta in waiting {
                        let (_, edits) = self.deltas.remove(&delta).expect("listed");
                        let applied = apply_edits(&slots, &edits, self.capacity)?;
                        self.cache(delta, applied)?;
                    }
                    // A base is the chunk it was when written: it verifies, and may serve that version.
                    self.cache(*r, slots)?;
                }
                ChunkRecord::Delta { base, edits } => {
                    self.deltas.insert(*r, (base, edits));
                }
            },
            Table::Entries => {
                self.entries.insert(*r, bytes.to_vec());
            }
        }
        Ok(())
    }

    /// The value of a supplied entry record, checked against its hash and the key its slot lists.
    fn entry_value(&self, r: &Ref, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.entries.get(r).map(|bytes| decode_entry(bytes, &r.hash, key).map(<[u8]>::to_vec)).transpose()
    }

    fn cache(&mut self, r: Ref, slots: Vec<Slot>) -> Result<(), StoreError> {
        let tree = verify_slots(&slots, &r.hash)?;
        if self.chunks.contains_key(&r) {
            return Ok(());
        }
        let bytes = Self::chunk_bytes(slots.len(), slots.iter().map(|s| s.key.len()).sum());
        while self.resident + bytes > self.budget {
            let Some((_, old)) = self.lru.pop_first() else { break };
            self.resident -= self.chunks.remove(&old).expect("cached").bytes;
        }
        self.misses += 1;
        self.clock += 1;
        self.lru.insert(self.clock, r);
        self.resident += bytes;
        self.chunks.insert(r, CachedChunk { slots, tree, bytes, last_used: self.clock, loaded_at: self.clock });
        Ok(())
    }

    /// The cached chunk `r`, marked used; or the record to fetch for it.
    fn chunk(&mut self, r: &Ref) -> Result<&CachedChunk, (Table, Ref)> {
        let Some(c) = self.chunks.get_mut(r) else {
            let wanted = self.deltas.get(r).map_or(*r, |(base, _)| *base);
            return Err((Table::Chunks, wanted));
        };
        self.lru.remove(&c.last_used);
        self.clock += 1;
        c.last_used = self.clock;
        self.lru.insert(self.clock, *r);
        Ok(c)
    }

    /// The chunk `child` names, walking down through left children to the
    /// leftmost chunk of an inner node.
    fn leftmost(&mut self, mut child: Child) -> Result<Ref, (Table, Ref)> {
        loop {
            match child {
                Child::Chunk(r) => return Ok(r),
                Child::Node(r) => child = self.nodes.get(&r).ok_or((Table::Nodes, r))?.left,
            }
        }
    }

    fn descend(&self, top: Child, key: &[u8]) -> Result<Descent, Step> {
        let (mut lower, mut upper, mut path) = (None, None, Vec::new());
        let mut child = top;
        loop {
            match child {
                Child::Chunk(at) => return Ok(Descent { at, lower, upper, path }),
                Child::Node(r) => {
                    let n = self.nodes.get(&r).ok_or(Step::Need(Table::Nodes, r))?;
                    let left = key < n.key_copy.as_slice();
                    let (next, other) = if left { (n.left, n.right) } else { (n.right, n.left) };
                    path.push((left, n.height, n.chunk_count, n.entry_count, other.record().hash));
                    if left {
                        upper = Some((n.key_copy.clone(), n.right));
                    } else {
                        lower = Some(n.key_copy.clone());
                    }
                    child = next;
                }
            }
        }
    }

    /// The witness of `key`'s entry in the version whose top is `top`
    /// (`spec/proof-format.md`), with the entry record that holds its value.
    pub fn witness(&mut self, top: Child, key: &[u8]) -> Result<Witness, StoreError> {
        let d = match self.descend(top, key) {
            Ok(d) => d,
            Err(Step::Need(t, r)) => return Ok(Witness::Need(vec![(t, r)])),
            Err(Step::Corrupt) => return Err(StoreError::Corrupt),
        };
        let c = match self.chunk(&d.at) {
            Ok(c) => c,
            Err(need) => return Ok(Witness::Need(vec![need])),
        };
        let Ok(position) = c.slots.binary_search_by(|s| s.key.as_slice().cmp(key)) else {
            return Ok(Witness::NotFound);
        };
        let witness = entry_witness(&d.path, c, position)?;
        Ok(Witness::Found(c.slots[position].entry, witness))
    }

    /// The absence proof of `key` in the version whose top is `top` (`None`:
    /// the empty tree), with its neighbours' values from their entry records.
    pub fn prove_absence(&mut self, top: Option<Child>, key: &[u8]) -> Result<Absence, StoreError> {
        let Some(top) = top else {
            return Ok(Absence::Proof(Box::new(AbsenceProof { capacity: self.capacity, left: None, right: None })));
        };
        match self.absence_step(top, key) {
            Ok(Absence::Need(need)) => Ok(Absence::Need(need)),
            Ok(answer) => {
                self.entries.clear();
                Ok(answer)
            }
            Err(Step::Need(t, r)) => Ok(Absence::Need(vec![(t, r)])),
            Err(Step::Corrupt) => Err(StoreError::Corrupt),
        }
    }

    fn absence_step(&mut self, top: Child, key: &[u8]) -> Result<Absence, Step> {
        let d = self.descend(top, key)?;
        let c = self.chunk(&d.at)?;
        let (found, m) = (c.slots.binary_search_by(|s| s.key.as_slice().cmp(key)), c.slots.len());
        if d.lower.as_deref().is_some_and(|l| l != c.slots[0].key.as_slice()) {
            return Err(Step::Corrupt);
        }
        // Each neighbour as (its search, its position); the right one may open the next chunk.
        let (left, right) = match found {
            Ok(i) => {
                let slot = &c.slots[i];
                let entry = slot.entry;
                return match self.entry_value(&entry, key)? {
                    Some(_) => Ok(Absence::Present),
                    None => Err(Step::Need(Table::Entries, entry)),
                };
            }
            Err(0) if d.lower.is_some() => return Err(Step::Corrupt),
            Err(i) if i < m => ((i > 0).then_some(i - 1), Some((None, i))),
            Err(_) => {
                let next = match &d.upper {
                    None => None,
                    Some((separator, _)) => {
                        let next = self.descend(top, separator)?;
                        if self.chunk(&next.at)?.slots[0].key != *separator {
                            return Err(Step::Corrupt);
                        }
                        Some((Some(next), 0))
                    }
                };
                (Some(m - 1), next)
            }
        };
        // Both entry records are asked for in one round.
        let mut need = Vec::new();
        let left = left.map(|i| self.neighbour(&d, i, &mut need)).transpose()?.flatten();
        let right =
            right.map(|(next, i)| self.neighbour(next.as_ref().unwrap_or(&d), i, &mut need)).transpose()?.flatten();
        if !need.is_empty() {
            return Ok(Absence::Need(need));
        }
        Ok(Absence::Proof(Box::new(AbsenceProof { capacity: self.capacity, left, right })))
    }

    /// The neighbour at `position` of the chunk `d` ends at; `None` once its
    /// entry record is added to `need`.
    fn neighbour(&self, d: &Descent, position: usize, need: &mut Vec<(Table, Ref)>) -> Result<Option<Neighbour>, Step> {
        let c = self.chunks.get(&d.at).ok_or(Step::Need(Table::Chunks, d.at))?;
        let slot = &c.slots[position];
        let Some(value) = self.entry_value(&slot.entry, &slot.key)? else {
            need.push((Table::Entries, slot.entry));
            return Ok(None);
        };
        let witness = entry_witness(&d.path, c, position)?;
        Ok(Some(Neighbour { key: slot.key.clone(), value, witness }))
    }

    /// Looks `key` up in the version whose top is `top`.
    pub fn lookup(&mut self, top: Child, key: &[u8]) -> Result<Lookup, StoreError> {
        match self.lookup_step(top, key) {
            Ok(found) => Ok(found),
            Err(Step::Need(t, r)) => Ok(Lookup::Need(vec![(t, r)])),
            Err(Step::Corrupt) => Err(StoreError::Corrupt),
        }
    }

    fn lookup_step(&mut self, top: Child, key: &[u8]) -> Result<Lookup, Step> {
        let Descent { at, lower, upper, .. } = self.descend(top, key)?;
        let answered_at = self.answered_at;
        let c = self.chunk(&at)?;
        let hit = c.loaded_at <= answered_at;
        let slot = |i: usize| (c.slots[i].entry, c.slots[i].key.clone());
        let (found, m) = (c.slots.binary_search_by(|s| s.key.as_slice().cmp(key)), c.slots.len());
        // The routing separator below this chunk must be its first key.
        if lower.as_deref().is_some_and(|l| l != c.slots[0].key.as_slice()) {
            return Err(Step::Corrupt);
        }
        let answer = match found {
            Ok(i) => Lookup::Found(c.slots[i].entry),
            // Below the first key of a chunk that has a separator: the routing lied.
            Err(0) if lower.is_some() => return Err(Step::Corrupt),
            Err(0) => Lookup::Absent(vec![slot(0)]),
            Err(i) if i < m => Lookup::Absent(vec![slot(i - 1), slot(i)]),
            Err(_) => {
                let last = slot(m - 1);
                match upper {
                    None => Lookup::Absent(vec![last]),
                    Some((separator, right)) => {
                        let next = self.leftmost(right)?;
                        let first = &self.chunk(&next)?.slots[0];
                        if first.key != separator {
                            return Err(Step::Corrupt);
                        }
                        Lookup::Absent(vec![last, (first.entry, first.key.clone())])
                    }
                }
            }
        };
        self.hits += u64::from(hit);
        self.answered_at = self.clock;
        Ok(answer)
    }
}

/// The witness of the entry at `position` of chunk `c`, reached by `path`.
fn entry_witness(path: &[PathNode], c: &CachedChunk, position: usize) -> Result<EntryWitness, StoreError> {
    let m = c.slots.len();
    let inchunk = multiproof(&c.tree, m, position, position + 1);
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
    Ok(EntryWitness { chunk_entries: m, position, inchunk, path: ChunkPath { steps } })
}

/// A node a search passed: whether it went left, the node's height and
/// counts, and the hash of the child it did not take.
type PathNode = (bool, u8, u64, u64, Hash);

/// Where a search for a key ends: the chunk, the key copies that bound it
/// (where the search last went right, and where it last went left with that
/// node's right subtree), and the nodes passed, top first.
struct Descent {
    at: Ref,
    lower: Option<Vec<u8>>,
    upper: Option<(Vec<u8>, Child)>,
    path: Vec<PathNode>,
}

/// Why a lookup stopped early.
enum Step {
    Need(Table, Ref),
    Corrupt,
}

impl From<StoreError> for Step {
    fn from(_: StoreError) -> Step {
        Step::Corrupt
    }
}

impl From<(Table, Ref)> for Step {
    fn from((t, r): (Table, Ref)) -> Step {
        Step::Need(t, r)
    }
}
