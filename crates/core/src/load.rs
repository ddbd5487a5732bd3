//! Loading one version of a state store into a resident tree
//! (`spec/store-format.md`), without I/O: the loader says which records it
//! wants, the caller fetches them (one round trip per round), and hands the
//! bytes back. Every record is checked against the hash its parent names;
//! the first failed check is `STORE_CORRUPT`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::chunk::{Chunk, StoredChunk};
use crate::error::StoreError;
use crate::hash::{entry_hash, Hash};
use crate::node::{Inner, KeyCopy, Node, Stub};
use crate::record::{
    decode_entry, held_groups, held_values, values_ref, verify_slots, Child, ChunkRecord, Delta, Entry, NodeRecord,
    Ref, Slot, Table, VersionRecord, WaitingDeltas,
};
use crate::tree::Tree;

/// A full chunk record's slots and group nodes, as the base of deltas.
type FullChunk = (Arc<[Slot]>, Arc<[Hash]>);

/// A chunk whose record (and base) verified, waiting for its entries.
struct LoadedChunk {
    slots: Vec<Slot>,
    tree: Vec<Hash>,
    base: Ref,
    base_slots: Arc<[Slot]>,
    base_groups: Arc<[Hash]>,
}

/// Loads the version a version record describes.
///
/// ```
/// use bpavl_core::{Loader, Tree};
/// let mut tree = Tree::new(4).unwrap();
/// tree.insert(b"k", b"v").unwrap();
/// let (_, writes) = tree.commit_to_store();
/// let store: std::collections::HashMap<_, _> = writes.puts.iter().map(|(t, r, b)| ((*t, *r), b.clone())).collect();
/// let mut loader = Loader::new(1, &writes.version_record, 4).unwrap();
/// loop {
///     let wanted = loader.wanted();
///     if wanted.is_empty() { break }
///     for (table, r) in wanted {
///         loader.supply(table, &r, store.get(&(table, r)).map(Vec::as_slice)).unwrap();
///     }
/// }
/// assert_eq!(loader.finish().unwrap().head().root(), tree.head().root());
/// // The same from records at hand, in one call:
/// let loader = Loader::new(1, &writes.version_record, 4).unwrap();
/// let loaded = loader.load_from(|table, r| store.get(&(table, *r)).map(Vec::as_slice)).unwrap();
/// assert_eq!(loaded.head().root(), tree.head().root());
/// ```
pub struct Loader {
    version: u64,
    /// Load the inner nodes only; chunks stay in the store as stubs (`head.rs`).
    paged: bool,
    record: VersionRecord,
    /// Records asked for and not supplied yet.
    pending: HashSet<(Table, Ref)>,
    /// Records to ask for in the next round.
    next: Vec<(Table, Ref)>,
    nodes: HashMap<Ref, NodeRecord>,
    /// The chunks of the version (a full record may also be only a base).
    version_chunks: HashSet<Ref>,
    /// Deltas whose base is on its way, by the base they wait for.
    deltas: WaitingDeltas,
    /// Full records read so far, as bases for deltas that name them later.
    fulls: HashMap<Ref, FullChunk>,
    /// Chunk records asked for (a base shared by many deltas is asked once).
    asked_chunks: HashSet<Ref>,
    chunks: HashMap<Ref, LoadedChunk>,
    /// The key each wanted entry must hold, then its value.
    entry_keys: HashMap<Ref, Vec<u8>>,
    values: HashMap<Ref, Box<[u8]>>,
    /// The full record each values record asked for belongs to.
    values_of: HashMap<Ref, Ref>,
    /// The values that full records' values records hold, by full record
    /// and key: unchecked until a chunk takes one.
    held: HashMap<(Ref, Vec<u8>), Box<[u8]>>,
}

impl Loader {
    /// Starts loading `version` from its version record, in a store of `capacity`.
    pub fn new(version: u64, version_record: &[u8], capacity: usize) -> Result<Loader, StoreError> {
        Self::start(version, version_record, capacity, false)
    }

    /// Starts loading `version` as a paged head: its inner nodes only, each
    /// checked against its hash; its chunks load when a write needs them
    /// ([`Tree::needed_for`]). Memory grows with the chunk count (≈ 150
    /// bytes a chunk), not with the entries.
    pub fn head(version: u64, version_record: &[u8], capacity: usize) -> Result<Loader, StoreError> {
        Self::start(version, version_record, capacity, true)
    }

    /// Whether this loader loads a paged head ([`Loader::head`]).
    pub fn is_head(&self) -> bool {
        self.paged
    }

    fn start(version: u64, version_record: &[u8], capacity: usize, paged: bool) -> Result<Loader, StoreError> {
        let record = VersionRecord::decode(version_record, capacity)?;
        let mut loader = Loader {
            version,
            paged,
            pending: HashSet::new(),
            next: Vec::new(),
            nodes: HashMap::new(),
            version_chunks: HashSet::new(),
            deltas: WaitingDeltas::default(),
            fulls: HashMap::new(),
            asked_chunks: HashSet::new(),
            chunks: HashMap::new(),
            entry_keys: HashMap::new(),
            values: HashMap::new(),
            values_of: HashMap::new(),
            held: HashMap::new(),
            record,
        };
        if let Some(top) = loader.record.top {
            loader.want_child(top)?;
        }
        Ok(loader)
    }

    fn want_child(&mut self, child: Child) -> Result<(), StoreError> {
        match child {
            Child::Chunk(_) if self.paged => {}
            Child::Chunk(r) => {
                self.version_chunks.insert(r);
                // Read already as another chunk's base: it is here.
                if let Some((slots, groups)) = self.fulls.get(&r).cloned() {
                    return self.accept_chunk(r, slots.to_vec(), &groups.clone(), r, (slots, groups));
                }
                self.want_chunk(r);
            }
            Child::Node(r) => self.next.push((Table::Nodes, r)),
        }
        Ok(())
    }

    fn want_chunk(&mut self, r: Ref) {
        if self.asked_chunks.insert(r) {
            self.next.push((Table::Chunks, r));
        }
    }

    /// The records to fetch next (each with its table), or none once every
    /// record has been supplied. Every record asked for must be supplied
    /// before the next call.
    pub fn wanted(&mut self) -> Vec<(Table, Ref)> {
        assert!(self.pending.is_empty(), "every wanted record is supplied before the next round");
        let wanted = std::mem::take(&mut self.next);
        self.pending = wanted.iter().copied().collect();
        wanted
    }

    /// Hands over a wanted record's bytes (`None`: the store lacks it).
    pub fn supply(&mut self, table: Table, r: &Ref, bytes: Option<&[u8]>) -> Result<(), StoreError> {
        if !self.pending.remove(&(table, *r)) {
            return Err(StoreError::Corrupt);
        }
        let bytes = bytes.ok_or(StoreError::Corrupt)?;
        match table {
            Table::Nodes => {
                let node = NodeRecord::decode(bytes, &r.hash)?;
                self.want_child(node.left)?;
                self.want_child(node.right)?;
                self.nodes.insert(*r, node);
            }
            Table::Chunks => match ChunkRecord::decode(bytes, self.record.capacity)? {
                ChunkRecord::Full { slots, groups } => {
                    for v in held_groups(&slots).map(|g| values_ref(r, g)) {
                        self.values_of.insert(v, *r);
                        self.next.push((Table::Values, v));
                    }
                    // A full record is the chunk itself, or the base some deltas wait for.
                    let (slots, groups): (Arc<[Slot]>, Arc<[Hash]>) = (slots.into(), groups.into());
                    for (at, delta) in self.deltas.take(r) {
                        self.accept_delta(at, &delta, (slots.clone(), groups.clone()))?;
                    }
                    if self.version_chunks.contains(r) {
                        self.accept_chunk(*r, slots.to_vec(), &groups.clone(), *r, (slots.clone(), groups.clone()))?;
                    }
                    self.fulls.insert(*r, (slots, groups));
                }
                ChunkRecord::Delta(delta) => match self.fulls.get(&delta.base) {
                    Some(base) => self.accept_delta(*r, &delta, base.clone())?,
                    None => {
                        let base = delta.base;
                        self.deltas.add(*r, delta);
                        self.want_chunk(base);
                    }
                },
            },
            Table::Entries => {
                let key = self.entry_keys.get(r).ok_or(StoreError::Corrupt)?;
                let value = decode_entry(bytes, &r.hash, key)?;
                self.values.insert(*r, value.into());
            }
            Table::Values => {
                let holder = self.values_of.remove(r).ok_or(StoreError::Corrupt)?;
                for (key, value) in held_values(bytes)? {
                    self.held.insert((holder, key.to_vec()), value.into());
                }
            }
        }
        Ok(())
    }

    fn accept_delta(&mut self, r: Ref, delta: &Delta, base: FullChunk) -> Result<(), StoreError> {
        let (slots, groups) = delta.apply(&base.0, &base.1, self.record.capacity)?;
        self.accept_chunk(r, slots, &groups, delta.base, base)
    }

    fn accept_chunk(
        &mut self,
        r: Ref,
        slots: Vec<Slot>,
        groups: &[Hash],
        base: Ref,
        (base_slots, base_groups): FullChunk,
    ) -> Result<(), StoreError> {
        let tree = verify_slots(&slots, groups, &r.hash)?;
        for s in &slots {
            if let Entry::Record(e) = s.entry {
                self.entry_keys.insert(e, s.key.to_vec());
                self.next.push((Table::Entries, e));
            }
        }
        self.chunks.insert(r, LoadedChunk { slots, tree, base, base_slots, base_groups });
        Ok(())
    }

    /// Supplies every wanted record from `read`, round after round, then
    /// finishes: the load of records at hand (in memory, in tests and tools).
    pub fn load_from<'a>(mut self, mut read: impl FnMut(Table, &Ref) -> Option<&'a [u8]>) -> Result<Tree, StoreError> {
        loop {
            let wanted = self.wanted();
            if wanted.is_empty() {
                return self.finish();
            }
            for (table, r) in wanted {
                self.supply(table, &r, read(table, &r))?;
            }
        }
    }

    /// The loaded tree, at the loaded version, ready to take writes and to
    /// commit deltas against what the store holds.
    pub fn finish(mut self) -> Result<Tree, StoreError> {
        if !self.pending.is_empty() || !self.next.is_empty() || !self.deltas.is_empty() {
            return Err(StoreError::Corrupt);
        }
        let top = match self.record.top {
            None => None,
            // The version record's counts are the top's (its root hashes them).
            Some(Child::Chunk(r)) if self.paged => {
                Some(Node::Stub(Stub { record: r, entries: Some(self.record.entry_count) }))
            }
            Some(top) => Some(self.build(top)?),
        };
        Ok(Tree::from_committed(top, self.record.capacity, self.version, self.record.root))
    }

    fn build(&mut self, child: Child) -> Result<Node, StoreError> {
        match child {
            Child::Chunk(r) if self.paged => Ok(Node::Stub(Stub { record: r, entries: None })),
            Child::Chunk(r) => {
                let c = self.chunks.remove(&r).ok_or(StoreError::Corrupt)?;
                let mut value = |s: &Slot| match s.entry {
                    Entry::Record(e) => self.values.remove(&e).ok_or(StoreError::Corrupt),
                    Entry::Held(h) => match self.held.remove(&(c.base, s.key.to_vec())) {
                        Some(v) if entry_hash(&s.key, &v) == h => Ok(v),
                        _ => Err(StoreError::Corrupt),
                    },
                };
                let values = c.slots.iter().map(|s| value(s).map(Some)).collect::<Result<Vec<_>, _>>()?;
                let stored = StoredChunk::new(r, c.base, c.base_slots, c.base_groups);
                Ok(Node::leaf(Chunk::from_stored(&c.slots, values, c.tree, stored)))
            }
            Child::Node(r) => {
                let n = self.nodes.remove(&r).ok_or(StoreError::Corrupt)?;
                let (mut left, mut right) = (self.build(n.left)?, self.build(n.right)?);
                if self.paged {
                    // A stub beside a node: its count is the parent's less the node's.
                    // (The key copy is checked when the chunk after it loads.)
                    resolve_stub(&mut left, &right, n.entry_count)?;
                    resolve_stub(&mut right, &left, n.entry_count)?;
                } else if leftmost_key(&right) != n.key_copy.as_slice() {
                    // The key copy is not hashed: it must be the right subtree's smallest key.
                    return Err(StoreError::Corrupt);
                }
                let inner = Inner {
                    left,
                    right,
                    height: n.height,
                    key: KeyCopy::new(&n.key_copy),
                    chunks: n.chunk_count,
                    entries: n.entry_count,
                    hash: Some(r.hash),
                    stored: Some(r),
                    persisted: true,
                };
                Ok(Node::Inner(Arc::new(inner)))
            }
        }
    }
}

/// Sets the count of a stub whose sibling's count is known.
fn resolve_stub(node: &mut Node, sibling: &Node, entries: u64) -> Result<(), StoreError> {
    match (node, sibling.known_entries()) {
        (Node::Stub(s), Some(other)) => s.resolve(entries, other),
        _ => Ok(()),
    }
}

fn leftmost_key(node: &Node) -> &[u8] {
    node.chunk_at(0).first_key()
}
