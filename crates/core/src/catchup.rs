//! Catch-up (`docs/catchup.md`): moves a state store from its head to a
//! newer trusted root, fetching only what changed. The client walks the new
//! root's inner tree from the top and skips every subtree whose hash the
//! head already holds; of each changed chunk it fetches the entry-hash list,
//! takes the entries the head already stores (by entry hash, from the old
//! chunks around it) and fetches only the rest. Every piece is checked by
//! hashing up to the root; a piece that fails is its peer's fault. The new
//! version shares every unchanged record with the old one.
//!
//! No I/O, like the loader: [`CatchUp::fetches`] names what to ask peers,
//! [`CatchUp::needed`] the old chunk records to read from the store, and
//! [`CatchUp::take_puts`] the records to write as they are made; the last
//! write is [`CatchUp::finish`]'s.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::envelope::VerifiedChunk;
use crate::error::{ProofError, StoreError};
use crate::hash::{empty_root, entry_hash, Hash, GROUP_LEAVES};
use crate::node::Node;
use crate::persist::WriteSet;
use crate::record::{
    chunk_record, encode_entry, full_record_puts, in_key_order, verify_group, verify_groups, verify_slots, Child,
    ChunkRecord, Entry, NodeRecord, Ref, Slot, Table, VersionRecord, WaitingDeltas,
};
use crate::subtree::{
    positions_bitmap, verify_entries, verify_leaf_groups, verify_subtree, TreePath, VerifiedSubtree, WireNode,
};
use crate::tree::Tree;

/// Chunks whose entry-hash lists are held at once (fetched, not yet complete).
const IN_PROGRESS: usize = 256;
/// Old chunks searched for the entries of one new chunk: a chunk's keys
/// span at most three old chunks of at least ⌈C/2⌉ entries; more only
/// where many were deleted, and then the rest is fetched.
const MAX_CANDIDATES: usize = 8;
/// Old chunks' slots kept after use: neighbours share them.
const SLOT_CACHE: usize = 64;
/// Old chunks read at once for their stale entries.
const STALE_BATCH: usize = 128;

/// An entry's key and value.
type KeyValue = (Vec<u8>, Vec<u8>);

/// The whole chunk's entries in order, when a peer gave them all (they fill any slot).
type Given<'a> = Option<&'a [KeyValue]>;

/// A request to make of a peer (`spec/wire.md`, "Catch-up").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// `NODES`: the inner nodes under this path.
    Nodes(TreePath),
    /// `LEAVES`: the entry-hash list of the chunk at this path.
    Leaves(TreePath),
    /// `ENTRIES`: the entries at the bitmap's positions of the chunk at this path.
    Entries(TreePath, Vec<u8>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum OldChild {
    Chunk(usize),
    Node(usize),
}

#[derive(Debug)]
struct OldChunk {
    record: Ref,
    /// The key copy before it: its first key (none for the first chunk).
    lower: Option<Box<[u8]>>,
}

#[derive(Debug)]
struct OldNode {
    record: Ref,
    /// Its leftmost chunk, and how many it holds.
    first: usize,
    chunks: u64,
    left: OldChild,
    right: OldChild,
}

/// The head being caught up from: its inner tree, records and key copies.
#[derive(Debug, Default)]
struct Old {
    chunks: Vec<OldChunk>,
    nodes: Vec<OldNode>,
    top: Option<OldChild>,
    chunk_by_hash: HashMap<Hash, usize>,
    node_by_hash: HashMap<Hash, usize>,
    /// Shared with the new version: matched by hash (their subtrees too).
    shared: HashSet<OldChild>,
    first_key: Option<Box<[u8]>>,
}

impl Old {
    /// `None` if a node or chunk was never stored (uncommitted writes).
    fn collect(&mut self, node: &Node, lower: Option<&[u8]>) -> Option<OldChild> {
        match node {
            Node::Leaf(c) => {
                let record = c.stored.as_ref().filter(|_| c.persisted)?.record;
                Some(self.push_chunk(record, lower))
            }
            Node::Stub(s) => Some(self.push_chunk(s.record, lower)),
            Node::Inner(n) => {
                let record = n.stored.filter(|_| n.persisted)?;
                let first = self.chunks.len();
                let left = self.collect(&n.left, lower)?;
                let right = self.collect(&n.right, Some(n.key.as_bytes()))?;
                self.node_by_hash.insert(record.hash, self.nodes.len());
                let chunks = (self.chunks.len() - first) as u64;
                self.nodes.push(OldNode { record, first, chunks, left, right });
                Some(OldChild::Node(self.nodes.len() - 1))
            }
        }
    }

    fn push_chunk(&mut self, record: Ref, lower: Option<&[u8]>) -> OldChild {
        self.chunk_by_hash.insert(record.hash, self.chunks.len());
        self.chunks.push(OldChunk { record, lower: lower.map(Into::into) });
        OldChild::Chunk(self.chunks.len() - 1)
    }

    fn first_chunk(&self, c: OldChild) -> usize {
        match c {
            OldChild::Chunk(j) => j,
            OldChild::Node(n) => self.nodes[n].first,
        }
    }

    fn record(&self, c: OldChild) -> Child {
        match c {
            OldChild::Chunk(j) => Child::Chunk(self.chunks[j].record),
            OldChild::Node(n) => Child::Node(self.nodes[n].record),
        }
    }

    /// The old chunks whose keys may fall in `[lower, upper)`.
    fn around(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Vec<usize> {
        let start = match lower {
            None => 0,
            Some(l) => self.chunks.partition_point(|c| c.lower.as_deref().is_none_or(|k| k <= l)).saturating_sub(1),
        };
        (start..self.chunks.len())
            .take_while(|&j| j == start || upper.is_none_or(|u| self.chunks[j].lower.as_deref().is_some_and(|k| k < u)))
            .take(MAX_CANDIDATES)
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NewChild {
    Old(OldChild),
    /// A changed chunk (index into `chunks`).
    Chunk(usize),
    /// A node fetched (index into `nodes`).
    Node(usize),
    /// A node still to fetch (its path is in `frontier`).
    Pending,
}

#[derive(Debug)]
struct NewNode {
    wire: WireNode,
    left: NewChild,
    right: NewChild,
    /// Who said its key copy (the caller's tag), to blame if it was wrong.
    source: u32,
}

#[derive(Debug)]
struct Frontier {
    hash: Hash,
    /// The node it hangs from, and on which side (`None`: the top).
    parent: Option<(usize, bool)>,
    lower: Option<Box<[u8]>>,
    upper: Option<Box<[u8]>>,
}

#[derive(Debug)]
enum ChunkState {
    /// A resumed catch-up asks the store first whether an earlier run wrote it.
    Probe,
    WantLeaves,
    /// Waiting for old chunks' slots to take entries from; or, with
    /// `restored`, to mark which of them the chunk an earlier run wrote took.
    Matching {
        leaves: Leaves,
        candidates: Vec<usize>,
        restored: Option<Restored>,
    },
    /// Some entries to fetch; those fetched wait here for their chunk's
    /// record, to be written as a delta of one of `offers` if that is small.
    WantEntries {
        leaves: Leaves,
        slots: Vec<Option<Slot>>,
        fetched: Vec<(Ref, Vec<u8>)>,
        offers: Vec<Offer>,
    },
    Done {
        first_key: Box<[u8]>,
    },
}

/// A changed chunk's entry hashes, checked against its hash, and its group
/// nodes, taken from the tree that checked them for its record.
#[derive(Debug, Default)]
struct Leaves {
    hashes: Vec<Hash>,
    groups: Vec<Hash>,
}

#[derive(Debug)]
struct NewChunk {
    path: TreePath,
    hash: Hash,
    lower: Option<Box<[u8]>>,
    upper: Option<Box<[u8]>>,
    state: ChunkState,
}

/// An old chunk's slots as read, its group nodes (which gave its chunk
/// hash), and the full chunk record it is or is a delta of.
#[derive(Debug, Clone)]
struct OldSlots {
    slots: Arc<[Slot]>,
    groups: Arc<[Hash]>,
    base: Base,
}

/// A full chunk record of the head, as read. Applying a delta to these
/// same bytes gives the chunk, which a reader checks against its hash.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub(crate) record: Ref,
    pub(crate) slots: Arc<[Slot]>,
    pub(crate) groups: Arc<[Hash]>,
}

impl Base {
    /// As [`chunk_record`] takes a base.
    pub(crate) fn parts(&self) -> (&Ref, &[Slot], &[Hash]) {
        (&self.record, &self.slots, &self.groups)
    }
}

/// A head chunk a changed chunk took entries from, offered as the base to
/// write it against (`spec/store-format.md`, "Writing deltas"): its first
/// key, how many entries it gave, and the full record it is or is a delta of.
#[derive(Debug, Clone)]
struct Offer {
    first_key: Box<[u8]>,
    given: usize,
    base: Base,
}

/// A chunk an earlier run wrote, read back and checked against its hash,
/// and the base its record is a delta of.
#[derive(Debug)]
struct Restored {
    slots: Vec<Slot>,
    base: Option<Ref>,
}

/// A catch-up of a store's head to the tree under `root`, as version `version`.
#[derive(Debug)]
pub struct CatchUp {
    capacity: usize,
    root: Hash,
    version: u64,
    old: Old,
    top: Option<NewChild>,
    top_known: bool,
    /// The new tree's chunk and entry counts, once its top is known.
    counts: (u64, u64),
    nodes: Vec<NewNode>,
    frontier: BTreeMap<TreePath, Frontier>,
    chunks: Vec<NewChunk>,
    chunk_by_path: HashMap<TreePath, usize>,
    want_leaves: BTreeSet<usize>,
    want_entries: BTreeSet<usize>,
    /// Chunks waiting for each old chunk's slots.
    waiting: HashMap<usize, Vec<usize>>,
    matching: usize,
    undone: usize,
    /// Old chunk records asked for (and deltas' bases), by ref.
    loading: HashMap<Ref, usize>,
    requested: HashSet<usize>,
    deltas: WaitingDeltas,
    slots: HashMap<usize, OldSlots>,
    recent: VecDeque<usize>,
    /// Per old chunk, which slots the new version took.
    reused: HashMap<usize, Vec<bool>>,
    /// Old chunks the new version does not use, still to mark stale.
    replaced: Option<BTreeSet<usize>>,
    capacity_mismatch: bool,
    failed: Option<StoreError>,
    puts: Vec<(Table, Ref, Vec<u8>)>,
    stale: Vec<(Table, Ref)>,
    /// Whether an earlier run of this catch-up may have written chunks.
    resuming: bool,
    /// Chunk records of an earlier run asked of the store, by ref.
    probes: HashMap<Ref, usize>,
    probes_asked: HashSet<usize>,
    /// Those that are deltas, waiting for their bases; and their chunks.
    probe_deltas: WaitingDeltas,
    probe_chunks: HashMap<Ref, usize>,
    /// Old full chunk records that deltas of the new version name: never stale.
    bases: HashSet<Ref>,
    restored: usize,
    /// Subtree answers taken (path, levels, answer), for a resume to take again.
    progress: Vec<(TreePath, u8, Vec<u8>)>,
    /// Entries of chunks that came whole (a chunk envelope), by chunk, until matched.
    given: HashMap<usize, Vec<KeyValue>>,
}

impl CatchUp {
    /// A catch-up from `head` (committed, every record stored: a tree
    /// loaded from the store, paged or whole) to `root`. `None` if the
    /// head has writes not committed to the store.
    pub fn new(head: &Tree, root: Hash) -> Option<CatchUp> {
        let mut old = Old::default();
        if let Some(top) = head.top() {
            old.top = Some(old.collect(top, None)?);
        }
        let capacity = head.capacity();
        let empty = root == empty_root(capacity);
        let mut frontier = BTreeMap::new();
        if !empty {
            frontier.insert(TreePath::top(), Frontier { hash: root, parent: None, lower: None, upper: None });
        }
        Some(CatchUp {
            capacity,
            root,
            version: head.head().version() + 1,
            old,
            top: None,
            top_known: empty,
            counts: (0, 0),
            nodes: Vec::new(),
            frontier,
            chunks: Vec::new(),
            chunk_by_path: HashMap::new(),
            want_leaves: BTreeSet::new(),
            want_entries: BTreeSet::new(),
            waiting: HashMap::new(),
            matching: 0,
            undone: 0,
            loading: HashMap::new(),
            requested: HashSet::new(),
            deltas: WaitingDeltas::default(),
            slots: HashMap::new(),
            recent: VecDeque::new(),
            reused: HashMap::new(),
            replaced: None,
            capacity_mismatch: false,
            failed: None,
            puts: Vec::new(),
            stale: Vec::new(),
            resuming: false,
            probes: HashMap::new(),
            probes_asked: HashSet::new(),
            probe_deltas: WaitingDeltas::default(),
            probe_chunks: HashMap::new(),
            bases: HashSet::new(),
            restored: 0,
            progress: Vec::new(),
            given: HashMap::new(),
        })
    }

    /// The same catch-up again, after an earlier run of it was stopped: the
    /// chunks it wrote (born at the same version) are read back from the
    /// store, checked against their hashes, and not fetched again. Give it
    /// the subtrees the earlier run kept with [`CatchUp::restore_subtree`].
    pub fn resume(head: &Tree, root: Hash) -> Option<CatchUp> {
        CatchUp::new(head, root).map(|c| CatchUp { resuming: true, ..c })
    }

    /// Chunks taken back from an earlier run.
    pub fn restored_chunks(&self) -> usize {
        self.restored
    }

    /// Subtree answers taken since the last call, `(path, levels, answer)`:
    /// kept by the caller so that a resume does not fetch them again.
    pub fn take_progress(&mut self) -> Vec<(TreePath, u8, Vec<u8>)> {
        std::mem::take(&mut self.progress)
    }

    /// A subtree answer an earlier run kept, checked again as if a peer
    /// sent it (parents before children: in path order). One that does not
    /// check is dropped (`Err`), and its subtree fetched again.
    pub fn restore_subtree(&mut self, path: &TreePath, levels: u8, bytes: &[u8]) -> Result<(), ProofError> {
        self.take_subtree(path, levels, bytes, u32::MAX, false)
    }

    pub fn root(&self) -> Hash {
        self.root
    }

    /// The version the catch-up commits.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the root's tree has another capacity than the store (a
    /// catch-up cannot hold it).
    pub fn capacity_mismatch(&self) -> bool {
        self.capacity_mismatch
    }

    /// Whether every piece of the new tree is fetched.
    pub fn is_fetched(&self) -> bool {
        self.top_known && self.frontier.is_empty() && self.undone == 0
    }

    /// Chunks of the new tree that differ from every chunk of the head,
    /// found so far.
    pub fn changed_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The indices of the changed chunks (those [`CatchUp::changed_chunks`]
    /// counts) in the new tree's chunk order, increasing: every other chunk
    /// of the new tree is a head chunk, shared (perhaps at another index).
    /// `None` until every piece is fetched (the counts of the subtrees left
    /// of a chunk give its index); empty when no chunk changed.
    pub fn changed_indices(&self) -> Option<Vec<u64>> {
        if !self.is_fetched() {
            return None;
        }
        let mut out = Vec::with_capacity(self.chunks.len());
        // Depth first, left before right: the indices come in order.
        let mut todo: Vec<(NewChild, u64)> = self.top.map(|t| (t, 0)).into_iter().collect();
        while let Some((child, first)) = todo.pop() {
            match child {
                NewChild::Chunk(_) => out.push(first),
                NewChild::Node(id) => {
                    let n = &self.nodes[id];
                    todo.push((n.right, first + self.count_of(n.left)?));
                    todo.push((n.left, first));
                }
                NewChild::Old(_) => {}
                NewChild::Pending => return None,
            }
        }
        Some(out)
    }

    /// What to ask peers now, at most `limit` requests: entries first (they
    /// finish chunks), then nodes, then leaves. The order is stable, so a
    /// caller with `k` requests in flight asks for `k` more than it wants.
    /// A request already in flight may be listed again; the caller keeps
    /// track of those.
    pub fn fetches(&self, limit: usize) -> Vec<Fetch> {
        let mut out: Vec<Fetch> = Vec::new();
        for &c in self.want_entries.iter().take(limit) {
            let ChunkState::WantEntries { slots, .. } = &self.chunks[c].state else { unreachable!("listed") };
            let missing: Vec<usize> = (0..slots.len()).filter(|&p| slots[p].is_none()).collect();
            out.push(Fetch::Entries(self.chunks[c].path.clone(), positions_bitmap(&missing, slots.len())));
        }
        out.extend(self.frontier.keys().take(limit - out.len()).map(|p| Fetch::Nodes(p.clone())));
        let room = IN_PROGRESS.saturating_sub(self.matching + self.want_entries.len());
        let leaves = room.max(1).min(limit - out.len());
        out.extend(self.want_leaves.iter().take(leaves).map(|&c| Fetch::Leaves(self.chunks[c].path.clone())));
        out
    }

    /// The subtree a peer (tagged `source`) sent for `NODES` at `path` with
    /// `levels`. Nodes must hash to what their parents (or the root) name;
    /// an answer for a path no longer wanted is checked the same way when
    /// it can be, and otherwise ignored. A node whose kinds the answer
    /// leaves unproven (`spec/catchup.md`, "Kinds") stays wanted: ask with
    /// `levels` ≥ 2, so that its inner child comes with it.
    pub fn add_subtree(&mut self, path: &TreePath, levels: u8, bytes: &[u8], source: u32) -> Result<(), ProofError> {
        self.take_subtree(path, levels, bytes, source, true)
    }

    fn take_subtree(
        &mut self,
        path: &TreePath,
        levels: u8,
        bytes: &[u8],
        source: u32,
        keep: bool,
    ) -> Result<(), ProofError> {
        let Some(f) = self.frontier.get(path) else { return Ok(()) };
        let VerifiedSubtree { capacity, nodes: parsed } = verify_subtree(path, &f.hash, levels, self.capacity, bytes)?;
        if path.depth() == 0 && capacity != self.capacity {
            self.capacity_mismatch = true;
            return Ok(());
        }
        if path.depth() == 0 {
            self.counts = (parsed[0].1.chunks, parsed[0].1.entries);
        }
        if keep {
            self.progress.push((path.clone(), levels, bytes.to_vec()));
        }
        for (at, node, proven) in parsed {
            // Nodes below a subtree the head already holds are not needed.
            if !self.frontier.contains_key(&at) {
                continue;
            }
            let shared = self.old.node_by_hash.get(&node.hash()).copied();
            // A node whose kinds only its inner child proves, cut before that child: asked again.
            if shared.is_none() && !proven {
                continue;
            }
            let f = self.frontier.remove(&at).expect("wanted");
            match shared {
                Some(n) => {
                    self.old.shared.insert(OldChild::Node(n));
                    self.place(f.parent, NewChild::Old(OldChild::Node(n)));
                }
                None => self.attach(at, f, node, source),
            }
        }
        Ok(())
    }

    /// Hangs a verified node where the frontier expects it, and lists its children.
    fn attach(&mut self, at: TreePath, f: Frontier, node: WireNode, source: u32) {
        let id = self.nodes.len();
        self.place(f.parent, NewChild::Node(id));
        let key: Box<[u8]> = node.key_copy.clone().into();
        let sides = [
            (false, node.left_is_chunk, node.left, f.lower.clone(), Some(key.clone())),
            (true, node.right_is_chunk, node.right, Some(key), f.upper.clone()),
        ];
        self.nodes.push(NewNode { wire: node, left: NewChild::Pending, right: NewChild::Pending, source });
        for (right, is_chunk, hash, lower, upper) in sides {
            let child = self.child(at.child(right), is_chunk, hash, lower, upper, Some((id, right)));
            self.place(Some((id, right)), child);
        }
    }

    /// What a child named by `hash` becomes: shared with the head, a changed
    /// chunk, or a node to fetch.
    fn child(
        &mut self,
        path: TreePath,
        is_chunk: bool,
        hash: Hash,
        lower: Option<Box<[u8]>>,
        upper: Option<Box<[u8]>>,
        parent: Option<(usize, bool)>,
    ) -> NewChild {
        let old = if is_chunk {
            self.old.chunk_by_hash.get(&hash).map(|&j| OldChild::Chunk(j))
        } else {
            self.old.node_by_hash.get(&hash).map(|&n| OldChild::Node(n))
        };
        if let Some(old) = old {
            self.old.shared.insert(old);
            return NewChild::Old(old);
        }
        if !is_chunk {
            self.frontier.insert(path, Frontier { hash, parent, lower, upper });
            return NewChild::Pending;
        }
        let c = self.chunks.len();
        self.chunk_by_path.insert(path.clone(), c);
        let state = if self.resuming { ChunkState::Probe } else { ChunkState::WantLeaves };
        if self.resuming {
            self.probes.insert(Ref { birth: self.version, hash }, c);
        } else {
            self.want_leaves.insert(c);
        }
        self.chunks.push(NewChunk { path, hash, lower, upper, state });
        self.undone += 1;
        NewChild::Chunk(c)
    }

    fn place(&mut self, parent: Option<(usize, bool)>, child: NewChild) {
        match parent {
            None => {
                self.top = Some(child);
                self.top_known = true;
            }
            Some((id, false)) => self.nodes[id].left = child,
            Some((id, true)) => self.nodes[id].right = child,
        }
    }

    /// The index of the changed chunk at `path`, once the counts of the
    /// subtrees left of it are known (a peer that serves no `LEAVES` is asked
    /// the chunk by index).
    pub fn chunk_index(&self, path: &TreePath) -> Option<u64> {
        let (mut at, mut index) = (self.top?, 0u64);
        for &right in path.turns() {
            let NewChild::Node(id) = at else { return None };
            let n = &self.nodes[id];
            if right {
                let left = self.count_of(n.left).or_else(|| Some(n.wire.chunks - self.count_of(n.right)?))?;
                index += left;
                at = n.right;
            } else {
                at = n.left;
            }
        }
        matches!(at, NewChild::Chunk(_)).then_some(index)
    }

    fn count_of(&self, child: NewChild) -> Option<u64> {
        match child {
            NewChild::Old(OldChild::Chunk(_)) | NewChild::Chunk(_) => Some(1),
            NewChild::Old(OldChild::Node(n)) => Some(self.old.nodes[n].chunks),
            NewChild::Node(id) => Some(self.nodes[id].wire.chunks),
            NewChild::Pending => None,
        }
    }

    /// The changed chunk at `path` whole (a chunk envelope verified against
    /// the root at its index): instead of its leaves and entries, from a peer
    /// that serves no `LEAVES` or `ENTRIES`. Its entries the head holds are
    /// still taken from the head. `CHUNK_INDEX_MISMATCH` unless it is the
    /// chunk the path names.
    pub fn add_chunk(&mut self, path: &TreePath, chunk: VerifiedChunk) -> Result<(), ProofError> {
        let Some(&c) = self.chunk_by_path.get(path) else { return Ok(()) };
        if chunk.root != self.root || chunk.chunk.hash() != self.chunks[c].hash {
            return Err(ProofError::ChunkIndexMismatch);
        }
        let entries = || -> Vec<KeyValue> { chunk.chunk.entries().map(|(k, v)| (k.to_vec(), v.to_vec())).collect() };
        if self.want_entries.remove(&c) {
            let ChunkState::WantEntries { leaves, slots, mut fetched, offers } =
                std::mem::replace(&mut self.chunks[c].state, ChunkState::WantLeaves)
            else {
                unreachable!("listed")
            };
            self.fill(c, slots, &mut fetched, &entries(), leaves, offers);
            return Ok(());
        }
        if !self.want_leaves.remove(&c) {
            return Ok(());
        }
        self.given.insert(c, entries());
        // The envelope's entry hashes were computed when it was verified.
        let leaves = Leaves { hashes: chunk.chunk.leaves(), groups: chunk.chunk.group_roots() };
        self.start_matching(c, leaves, None);
        Ok(())
    }

    /// Chunk `c` waits for the head's chunks around it to be read: to take
    /// the entries they hold (`leaves`), or to mark which of them the
    /// chunk an earlier run wrote took (`restored`).
    fn start_matching(&mut self, c: usize, leaves: Leaves, restored: Option<Restored>) {
        let chunk = &self.chunks[c];
        let candidates = self.old.around(chunk.lower.as_deref(), chunk.upper.as_deref());
        for &j in &candidates {
            self.waiting.entry(j).or_default().push(c);
        }
        self.chunks[c].state = ChunkState::Matching { leaves, candidates, restored };
        self.matching += 1;
        self.try_match(c);
    }

    /// Completes chunk `c` with the entries it lacks from `entries` (the
    /// whole chunk, in order, whose entry hashes are `leaves`).
    fn fill(
        &mut self,
        c: usize,
        slots: Vec<Option<Slot>>,
        fetched: &mut Vec<(Ref, Vec<u8>)>,
        entries: &[KeyValue],
        leaves: Leaves,
        offers: Vec<Offer>,
    ) {
        let slots: Vec<Slot> = slots
            .into_iter()
            .zip(entries.iter().zip(&leaves.hashes))
            .map(|(slot, ((k, v), hash))| {
                slot.unwrap_or_else(|| {
                    let entry = Ref { birth: self.version, hash: *hash };
                    fetched.push((entry, encode_entry(v)));
                    Slot::new(k, entry)
                })
            })
            .collect();
        self.puts.extend(fetched.drain(..).map(|(r, bytes)| (Table::Entries, r, bytes)));
        self.complete(c, slots, leaves.groups, offers, Some(entries));
    }

    /// The first chunk, verified against the root, when a peer says the
    /// top is no inner node. `true` if the tree is that one chunk (then it
    /// is complete); `false` if the tree has more chunks (the peer that
    /// said so lied).
    pub fn add_top_chunk(&mut self, chunk: VerifiedChunk) -> bool {
        if chunk.root != self.root || chunk.chunk_count != 1 || self.top_known {
            return self.top_known && chunk.chunk_count == 1;
        }
        if chunk.capacity != self.capacity {
            self.capacity_mismatch = true;
            return true;
        }
        self.frontier.remove(&TreePath::top());
        self.counts = (1, chunk.chunk.len() as u64);
        let hash = chunk.chunk.hash();
        let top = self.child(TreePath::top(), true, hash, None, None, None);
        self.place(None, top);
        if let NewChild::Chunk(c) = top {
            self.want_leaves.remove(&c);
            self.probes.remove(&Ref { birth: self.version, hash });
            let mut slots = Vec::with_capacity(chunk.chunk.len());
            for (k, v) in chunk.chunk.entries() {
                let entry = Ref { birth: self.version, hash: entry_hash(k, v) };
                self.puts.push((Table::Entries, entry, encode_entry(v)));
                slots.push(Slot::new(k, entry));
            }
            self.complete(c, slots, chunk.chunk.group_roots(), Vec::new(), None);
        }
        true
    }

    /// The entry-hash list a peer sent for `LEAVES` at `path`: it must give
    /// the chunk hash its parent names.
    pub fn add_leaves(&mut self, path: &TreePath, bytes: &[u8]) -> Result<(), ProofError> {
        let Some(&c) = self.chunk_by_path.get(path) else { return Ok(()) };
        let (hashes, groups) = verify_leaf_groups(&self.chunks[c].hash, self.capacity, bytes)?;
        if !self.want_leaves.remove(&c) {
            return Ok(());
        }
        self.start_matching(c, Leaves { hashes, groups }, None);
        Ok(())
    }

    /// The entries a peer sent for `ENTRIES` at `path` with `bitmap`: `k`
    /// of them (1 … asked, else `COUNT_INVALID`), each hashing to the
    /// entry hash at its position (else `ENTRY_MISMATCH`).
    pub fn add_entries(&mut self, path: &TreePath, bitmap: &[u8], bytes: &[u8]) -> Result<(), ProofError> {
        let Some(&c) = self.chunk_by_path.get(path) else { return Ok(()) };
        let ChunkState::WantEntries { leaves, slots, fetched, offers } = &mut self.chunks[c].state else {
            return Ok(());
        };
        for (p, key, value) in verify_entries(&leaves.hashes, bitmap, bytes)? {
            if slots[p].is_none() {
                let entry = Ref { birth: self.version, hash: leaves.hashes[p] };
                fetched.push((entry, encode_entry(value)));
                slots[p] = Some(Slot::new(key, entry));
            }
        }
        if slots.iter().all(Option::is_some) {
            let slots = slots.iter_mut().map(|s| s.take().expect("all filled")).collect();
            let fetched = std::mem::take(fetched);
            let groups = std::mem::take(&mut leaves.groups);
            let offers = std::mem::take(offers);
            self.want_entries.remove(&c);
            self.puts.extend(fetched.into_iter().map(|(r, bytes)| (Table::Entries, r, bytes)));
            self.complete(c, slots, groups, offers, None);
        }
        Ok(())
    }

    /// Matches chunk `c`'s entry hashes against its old neighbours once
    /// their slots are all read.
    fn try_match(&mut self, c: usize) {
        let ChunkState::Matching { candidates, .. } = &self.chunks[c].state else { return };
        if !candidates.iter().all(|j| self.slots.contains_key(j)) {
            return;
        }
        let ChunkState::Matching { leaves, candidates, restored } =
            std::mem::replace(&mut self.chunks[c].state, ChunkState::WantLeaves)
        else {
            unreachable!("checked")
        };
        self.matching -= 1;
        if let Some(restored) = restored {
            self.take_back(c, restored, &candidates);
            self.unwait(c, candidates);
            return;
        }
        // By entry hash: which candidate (its place in `candidates`) and which of its slots.
        let mut known: HashMap<Hash, (usize, usize)> = HashMap::new();
        for (i, j) in candidates.iter().enumerate() {
            for (p, s) in self.slots[j].slots.iter().enumerate() {
                known.insert(*s.entry.hash(), (i, p));
            }
        }
        let mut slots: Vec<Option<Slot>> = Vec::with_capacity(leaves.hashes.len());
        let mut taken = vec![0usize; candidates.len()];
        for h in &leaves.hashes {
            let Some(&(i, p)) = known.get(h) else {
                slots.push(None);
                continue;
            };
            let j = candidates[i];
            let old = &self.slots[&j].slots;
            self.reused.entry(j).or_insert_with(|| vec![false; old.len()])[p] = true;
            slots.push(Some(old[p].clone()));
            taken[i] += 1;
        }
        let offers = (0..candidates.len())
            .filter(|&i| taken[i] > 0)
            .map(|i| {
                let old = &self.slots[&candidates[i]];
                Offer { first_key: old.slots[0].key.as_slice().into(), given: taken[i], base: old.base.clone() }
            })
            .collect();
        self.unwait(c, candidates);
        if let Some(entries) = self.given.remove(&c) {
            self.fill(c, slots, &mut Vec::new(), &entries, leaves, offers);
        } else if slots.iter().all(Option::is_some) {
            let slots = slots.into_iter().map(|s| s.expect("all found")).collect();
            self.complete(c, slots, leaves.groups, offers, None);
        } else {
            self.chunks[c].state = ChunkState::WantEntries { leaves, slots, fetched: Vec::new(), offers };
            self.want_entries.insert(c);
        }
    }

    /// Chunk `c` no longer waits for `candidates`' slots.
    fn unwait(&mut self, c: usize, candidates: Vec<usize>) {
        for j in candidates {
            if let Some(w) = self.waiting.get_mut(&j) {
                w.retain(|&x| x != c);
                if w.is_empty() {
                    self.waiting.remove(&j);
                    self.release(j);
                }
            }
        }
    }

    /// Takes back chunk `c` as an earlier run wrote it (`slots`, checked
    /// against its hash): every entry it took from the head must be a slot
    /// of `candidates`, which is marked taken. Otherwise (a record that
    /// does not add up) it is fetched again, and rewritten.
    fn take_back(&mut self, c: usize, Restored { slots, base }: Restored, candidates: &[usize]) {
        let mut at: HashMap<Entry, (usize, usize)> = HashMap::new();
        for &j in candidates {
            for (p, s) in self.slots[&j].slots.iter().enumerate() {
                at.insert(s.entry, (j, p));
            }
        }
        let version = self.version;
        let from_head = |s: &&Slot| s.entry.record().is_none_or(|r| r.birth != version);
        let taken: Option<Vec<(usize, usize)>> =
            slots.iter().filter(from_head).map(|s| at.get(&s.entry).copied()).collect();
        let Some(taken) = taken else {
            self.want_leaves.insert(c);
            return;
        };
        for (j, p) in taken {
            let m = self.slots[&j].slots.len();
            self.reused.entry(j).or_insert_with(|| vec![false; m])[p] = true;
        }
        self.bases.extend(base);
        self.chunks[c].state = ChunkState::Done { first_key: slots[0].key.as_slice().into() };
        self.undone -= 1;
        self.restored += 1;
    }

    /// Old chunk `j`'s slots are no longer waited for: kept among the recent.
    fn release(&mut self, j: usize) {
        self.recent.push_back(j);
        while self.recent.len() > SLOT_CACHE {
            let old = self.recent.pop_front().expect("non-empty");
            if !self.waiting.contains_key(&old) && !self.recent.contains(&old) {
                self.slots.remove(&old);
            }
        }
    }

    /// Writes chunk `c` from its slots and group nodes: as a delta of an
    /// offered base when that is small, else whole. A base is named by one
    /// chunk of a version, so that a commit that rewrites that chunk may
    /// mark it stale: by the chunk that holds the first key of the head
    /// chunk that offers it (one chunk at most, whatever the order chunks
    /// complete in, in this run or a resumed one).
    fn complete(&mut self, c: usize, slots: Vec<Slot>, groups: Vec<Hash>, offers: Vec<Offer>, given: Given) {
        if slots.windows(2).any(|w| w[0].key >= w[1].key) {
            // Fetched keys hash to the root; only slot keys read from the store can be out of order.
            self.failed = Some(StoreError::Corrupt);
        }
        let hash = self.chunks[c].hash;
        let first_key = slots[0].key.as_slice().into();
        let holds = |key: &[u8]| slots.binary_search_by(|s| s.key.as_slice().cmp(key)).is_ok();
        let base = offers.iter().filter(|o| holds(&o.first_key)).max_by_key(|o| o.given).map(|o| o.base.clone());
        let base = base.as_ref();
        // A value a head chunk record holds stays there in a delta of that
        // record that keeps its slot. Any other such value moves: a whole
        // record holds it (kind 1) when a peer sent the chunk whole; else
        // it is fetched again (the head's records were read for their
        // slots, their values not kept), first those that block a delta.
        let in_base = |s: &Slot| {
            base.is_some_and(|b| {
                let at = b.slots.binary_search_by(|o| o.key.as_slice().cmp(&s.key));
                at.is_ok_and(|p| b.slots[p].entry == s.entry)
            })
        };
        let held = |s: &Slot| matches!(s.entry, Entry::Held(_));
        let record = chunk_record(base.map(Base::parts), &slots, groups.clone());
        let stored = Ref { birth: self.version, hash };
        let puts = match (&record, given) {
            (ChunkRecord::Full { slots: full, groups }, Some(entries)) => {
                full_record_puts(stored, full, groups, |i| &entries[i].1)
            }
            (ChunkRecord::Full { .. }, None) if slots.iter().any(held) => {
                let moved: Vec<usize> = (0..slots.len()).filter(|&p| held(&slots[p]) && !in_base(&slots[p])).collect();
                let again =
                    if moved.is_empty() { (0..slots.len()).filter(|&p| held(&slots[p])).collect() } else { moved };
                return self.refetch(c, slots, groups, offers, &again);
            }
            _ => vec![(Table::Chunks, stored, record.encode())],
        };
        if let ChunkRecord::Delta(delta) = &record {
            self.bases.insert(delta.base);
        }
        self.puts.extend(puts);
        self.chunks[c].state = ChunkState::Done { first_key };
        self.undone -= 1;
    }

    /// Chunk `c` needs the entries at positions `again` from peers.
    fn refetch(&mut self, c: usize, slots: Vec<Slot>, groups: Vec<Hash>, offers: Vec<Offer>, again: &[usize]) {
        let hashes = slots.iter().map(|s| *s.entry.hash()).collect();
        let mut slots: Vec<Option<Slot>> = slots.into_iter().map(Some).collect();
        again.iter().for_each(|&p| slots[p] = None);
        let leaves = Leaves { hashes, groups };
        self.chunks[c].state = ChunkState::WantEntries { leaves, slots, fetched: Vec::new(), offers };
        self.want_entries.insert(c);
    }

    /// Records made so far (entries and chunk records, born at this
    /// version), to write before [`CatchUp::finish`]'s write set.
    pub fn take_puts(&mut self) -> Vec<(Table, Ref, Vec<u8>)> {
        std::mem::take(&mut self.puts)
    }

    /// Old chunk records to read from the store now: those whose entries
    /// changed chunks may reuse, then (once everything is fetched) those
    /// the new version no longer uses, whose entries may go stale.
    pub fn needed(&mut self) -> Result<Vec<(Table, Ref)>, StoreError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut want: Vec<usize> = self.waiting.keys().copied().filter(|j| !self.slots.contains_key(j)).collect();
        if self.is_fetched() {
            let replaced = self.replaced.get_or_insert_with(|| replaced_chunks(&self.old));
            want.extend(replaced.iter().take(STALE_BATCH));
            if self.old.first_key.is_none() && !self.old.chunks.is_empty() {
                want.push(0);
            }
        }
        let mut out: Vec<(Table, Ref)> = Vec::new();
        for (r, &c) in &self.probes {
            if self.probes_asked.insert(c) {
                out.push((Table::Chunks, *r));
            }
        }
        for j in want {
            if self.requested.insert(j) {
                let r = self.old.chunks[j].record;
                self.loading.insert(r, j);
                out.push((Table::Chunks, r));
            }
        }
        for base in self.deltas.bases().chain(self.probe_deltas.bases()) {
            if !self.loading.contains_key(base) {
                out.push((Table::Chunks, *base));
            }
        }
        in_key_order(&mut out);
        out.dedup();
        Ok(out)
    }

    /// Hands over an old chunk record [`CatchUp::needed`] asked for
    /// (`None`: the store lacks it). It must hash to its ref.
    pub fn supply_record(&mut self, r: &Ref, bytes: Option<&[u8]>) -> Result<(), StoreError> {
        if let Some(c) = self.probes.remove(r) {
            self.probed(c, r, bytes);
            return Ok(());
        }
        let bytes = bytes.ok_or(StoreError::Corrupt)?;
        let probed = self.probe_deltas.take(r);
        match ChunkRecord::decode(bytes, self.capacity)? {
            ChunkRecord::Delta(delta) => {
                // A delta names a full chunk (`WaitingDeltas::refuses`): a delta that deltas wait for,
                // or that names itself, would be asked for again and again (or never again).
                let loading = self.loading.contains_key(r);
                let corrupt = if loading { self.deltas.refuses(r, &delta) } else { self.deltas.waits_for(r) };
                if loading && !corrupt {
                    self.deltas.add(*r, delta);
                }
                // An earlier run's delta that does not is fetched again.
                for (at, _) in probed {
                    self.restore(self.probe_chunks[&at], &at, None, None);
                }
                if corrupt {
                    return Err(StoreError::Corrupt);
                }
            }
            ChunkRecord::Full { slots, groups } => {
                let base = Base { record: *r, slots: slots.into(), groups: groups.into() };
                for (at, delta) in self.deltas.take(r) {
                    let (slots, groups) = delta.apply(&base.slots, &base.groups, self.capacity)?;
                    self.loaded(&at, slots.into(), groups.into(), base.clone())?;
                }
                for (at, delta) in probed {
                    let applied = delta.apply(&base.slots, &base.groups, self.capacity).ok();
                    self.restore(self.probe_chunks[&at], &at, applied, Some(*r));
                }
                if self.loading.contains_key(r) {
                    self.loaded(r, base.slots.clone(), base.groups.clone(), base)?;
                }
            }
        }
        Ok(())
    }

    /// What the store holds of chunk `c` from an earlier run: its record
    /// (a delta once its base is read), whole and checked, is taken back
    /// once the head's chunks around it are read; anything else (none, or
    /// one that does not check) is fetched.
    fn probed(&mut self, c: usize, r: &Ref, bytes: Option<&[u8]>) {
        match bytes.map(|b| ChunkRecord::decode(b, self.capacity)) {
            Some(Ok(ChunkRecord::Full { slots, groups })) => self.restore(c, r, Some((slots, groups)), None),
            Some(Ok(ChunkRecord::Delta(delta))) => {
                self.probe_chunks.insert(*r, c);
                self.probe_deltas.add(*r, delta);
            }
            _ => self.restore(c, r, None, None),
        }
    }

    /// Chunk `c` as an earlier run wrote it at `r` (its slots and group
    /// nodes, and the base its record is a delta of), if it checks against
    /// its hash; otherwise it is fetched.
    fn restore(&mut self, c: usize, r: &Ref, parts: Option<(Vec<Slot>, Vec<Hash>)>, base: Option<Ref>) {
        self.probe_chunks.remove(r);
        match parts {
            Some((slots, groups)) if verify_slots(&slots, &groups, &r.hash).is_ok() => {
                self.start_matching(c, Leaves::default(), Some(Restored { slots, base }));
            }
            _ => {
                self.chunks[c].state = ChunkState::WantLeaves;
                self.want_leaves.insert(c);
            }
        }
    }

    /// Old chunk `j`'s record, read: its group nodes must give its chunk
    /// hash. Its entry hashes are not hashed here: a slot is reused only
    /// when its entry hash equals a leaf checked against the new root, and
    /// the group of any other slot is checked before its entry is marked
    /// stale (`mark_stale`).
    fn loaded(&mut self, r: &Ref, slots: Arc<[Slot]>, groups: Arc<[Hash]>, base: Base) -> Result<(), StoreError> {
        let Some(j) = self.loading.remove(r) else { return Ok(()) };
        self.requested.remove(&j);
        verify_groups(slots.len(), &groups, &r.hash)?;
        if j == 0 {
            self.old.first_key = Some(slots[0].key.as_slice().into());
        }
        let slots = OldSlots { slots, groups, base };
        if self.replaced.as_mut().is_some_and(|set| set.remove(&j)) {
            self.mark_stale(j, &slots)?;
        }
        if let Some(chunks) = self.waiting.get(&j).cloned() {
            self.slots.insert(j, slots);
            for c in chunks {
                self.try_match(c);
            }
        }
        Ok(())
    }

    /// Old chunk `j` leaves: its record, its base (unless a new delta
    /// names it: `finish` keeps those), and the entries no new chunk took,
    /// each after its group checks (so that a corrupt entry hash never
    /// marks another version's entry stale).
    fn mark_stale(&mut self, j: usize, old: &OldSlots) -> Result<(), StoreError> {
        let record = self.old.chunks[j].record;
        self.stale.push((Table::Chunks, record));
        if old.base.record != record {
            self.stale.push((Table::Chunks, old.base.record));
        }
        let reused = self.reused.remove(&j);
        for (g, group) in old.slots.chunks(GROUP_LEAVES).enumerate() {
            let taken = |k: usize| reused.as_ref().is_some_and(|r| r[g * GROUP_LEAVES + k]);
            if (0..group.len()).all(taken) {
                continue;
            }
            verify_group(&group.iter().map(|s| *s.entry.hash()).collect::<Vec<_>>(), &old.groups[g])?;
            // A value in a chunk record's values records goes with that record: only entry records are marked.
            let dropped = group.iter().enumerate().filter(|&(k, _)| !taken(k));
            self.stale.extend(dropped.filter_map(|(_, s)| s.entry.record()).map(|r| (Table::Entries, r)));
        }
        Ok(())
    }

    /// The last write: the new inner nodes, the stale marks and the version
    /// record. Every key copy is the smallest key of its right subtree, as
    /// read; the tags of the peers whose key copies said otherwise come
    /// back with it (they lied, though nothing they said was used).
    pub fn finish(mut self) -> Result<(WriteSet, Vec<u32>), StoreError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let stale_left = self.replaced.as_ref().is_none_or(|r| !r.is_empty());
        if !self.is_fetched() || stale_left || (self.old.first_key.is_none() && !self.old.chunks.is_empty()) {
            return Err(StoreError::Corrupt);
        }
        let mut out = WriteSet { version: self.version, ..WriteSet::default() };
        let mut liars = Vec::new();
        let top = self.top.map(|t| self.write(t, &mut out, &mut liars));
        stale_nodes(&self.old, self.old.top, &mut out.stale);
        let bases = &self.bases;
        self.stale.retain(|(t, r)| *t != Table::Chunks || !bases.contains(r));
        out.stale.append(&mut self.stale);
        let (chunk_count, entry_count) = self.counts;
        let record = VersionRecord { capacity: self.capacity, chunk_count, entry_count, top, root: self.root };
        out.version_record = record.encode();
        Ok((out, liars))
    }

    /// Writes node records below `child` (new nodes only) and returns its ref.
    fn write(&self, child: NewChild, out: &mut WriteSet, liars: &mut Vec<u32>) -> Child {
        match child {
            NewChild::Old(o) => self.old.record(o),
            NewChild::Chunk(c) => Child::Chunk(Ref { birth: self.version, hash: self.chunks[c].hash }),
            NewChild::Pending => unreachable!("everything is fetched"),
            NewChild::Node(id) => {
                let n = &self.nodes[id];
                let left = self.write(n.left, out, liars);
                let right = self.write(n.right, out, liars);
                let key_copy = self.min_key(n.right).to_vec();
                if key_copy != n.wire.key_copy {
                    liars.push(n.source);
                }
                let at = Ref { birth: self.version, hash: n.wire.hash() };
                let record = NodeRecord {
                    height: n.wire.height,
                    chunk_count: n.wire.chunks,
                    entry_count: n.wire.entries,
                    left,
                    right,
                    key_copy,
                };
                out.puts.push((Table::Nodes, at, record.encode()));
                Child::Node(at)
            }
        }
    }

    /// The smallest key under `child`.
    fn min_key(&self, mut child: NewChild) -> &[u8] {
        loop {
            match child {
                NewChild::Node(id) => child = self.nodes[id].left,
                NewChild::Chunk(c) => match &self.chunks[c].state {
                    ChunkState::Done { first_key } => return first_key,
                    _ => unreachable!("every chunk is done"),
                },
                NewChild::Old(o) => {
                    let j = self.old.first_chunk(o);
                    let key = if j == 0 { &self.old.first_key } else { &self.old.chunks[j].lower };
                    return key.as_deref().expect("read before finishing");
                }
                NewChild::Pending => unreachable!("everything is fetched"),
            }
        }
    }
}

/// Old chunks that no shared subtree holds.
fn replaced_chunks(old: &Old) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut todo: Vec<OldChild> = old.top.into_iter().collect();
    while let Some(c) = todo.pop() {
        if old.shared.contains(&c) {
            continue;
        }
        match c {
            OldChild::Chunk(j) => {
                out.insert(j);
            }
            OldChild::Node(n) => todo.extend([old.nodes[n].left, old.nodes[n].right]),
        }
    }
    out
}

/// Old inner nodes that no shared subtree holds.
fn stale_nodes(old: &Old, top: Option<OldChild>, out: &mut Vec<(Table, Ref)>) {
    let mut todo: Vec<OldChild> = top.into_iter().collect();
    while let Some(c) = todo.pop() {
        if let OldChild::Node(n) = c {
            if !old.shared.contains(&c) {
                out.push((Table::Nodes, old.nodes[n].record));
                todo.extend([old.nodes[n].left, old.nodes[n].right]);
            }
        }
    }
}
