//! The B+AVL tree: the working state, and the committed snapshots that proofs
//! and chunk exports are taken from.

use std::sync::Arc;

use crate::chunk::Chunk;
use crate::codec::{check_key, check_value};
use crate::error::{ProofError, TreeError};
use crate::hash::{empty_root, root_hash, Hash};
use crate::head::Paging;
use crate::keys::prefix;
use crate::limits::{min_fill, DEFAULT_CAPACITY, MAX_CAPACITY, MAX_CHUNKS, MAX_ENTRIES, MIN_CAPACITY};
use crate::node::{Inner, KeyCopy, Node};
use crate::record::{Ref, Table};

/// What `commit()` returns: the new version and its root hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    pub version: u64,
    pub root: Hash,
}

/// A committed, immutable version of a tree. Cheap to clone; proofs and
/// chunk exports are taken from it while the tree goes on changing.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub(crate) top: Option<Node>,
    pub(crate) capacity: usize,
    pub(crate) version: u64,
    pub(crate) root: Hash,
}

/// A B+AVL tree: an AVL tree whose leaves are chunks of up to `capacity`
/// sorted entries (`spec/hashing.md`).
///
/// ```
/// use bpavl_core::{Tree, verify_existence};
/// let mut tree = Tree::new(4).unwrap();
/// tree.insert(b"apple", b"red").unwrap();
/// let commit = tree.commit();
/// let proof = tree.head().prove_existence(b"apple").unwrap().encode();
/// verify_existence(&commit.root, b"apple", b"red", &proof).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Tree {
    top: Option<Node>,
    capacity: usize,
    committed: Snapshot,
    /// Stored records that left the tree since it was last persisted.
    pub(crate) dropped: Vec<(Table, Ref)>,
    /// For a paged head: the chunk records being loaded.
    pub(crate) paging: Paging,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new(DEFAULT_CAPACITY).expect("default capacity is valid")
    }
}

/// Maps a failed key, value or query check to the tree's error (same code).
pub(crate) fn tree_error(e: ProofError) -> TreeError {
    match e {
        ProofError::KeyEmpty => TreeError::KeyEmpty,
        ProofError::KeyTooLong => TreeError::KeyTooLong,
        ProofError::ValueTooLong => TreeError::ValueTooLong,
        _ => TreeError::QueryInvalid,
    }
}

impl Tree {
    /// An empty tree whose chunks hold up to `capacity` entries (2 … 4096).
    pub fn new(capacity: usize) -> Result<Tree, TreeError> {
        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(TreeError::CapacityInvalid);
        }
        let committed = Snapshot { top: None, capacity, version: 0, root: empty_root(capacity) };
        Ok(Tree { top: None, capacity, committed, dropped: Vec::new(), paging: Paging::default() })
    }

    /// A tree rebuilt from verified parts; `top` is fully hashed.
    pub(crate) fn from_committed(top: Option<Node>, capacity: usize, version: u64, root: Hash) -> Tree {
        let committed = Snapshot { top: top.clone(), capacity, version, root };
        Tree { top, capacity, committed, dropped: Vec::new(), paging: Paging::default() }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries in the working state.
    pub fn len(&self) -> u64 {
        self.top.as_ref().map_or(0, Node::entries)
    }

    pub fn is_empty(&self) -> bool {
        self.top.is_none()
    }

    /// Chunks in the working state.
    pub fn chunk_count(&self) -> u64 {
        self.top.as_ref().map_or(0, Node::chunks)
    }

    /// Height of the AVL tree over chunks (0 for one chunk or none).
    pub fn height(&self) -> u8 {
        self.top.as_ref().map_or(0, Node::height)
    }

    /// Inserts `key` → `value`, replacing an existing value. Returns true if
    /// the key was new. Refused keys or values leave the tree unchanged.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, TreeError> {
        check_key(key).map_err(tree_error)?;
        check_value(value).map_err(tree_error)?;
        if self.len() >= MAX_ENTRIES || self.chunk_count() >= MAX_CHUNKS {
            return Err(TreeError::TreeFull);
        }
        match &mut self.top {
            None => {
                let mut c = Chunk::default();
                c.insert_at(0, key, value);
                self.top = Some(Node::leaf(c));
                Ok(true)
            }
            Some(top) => Ok(insert(top, key, value, self.capacity)),
        }
    }

    /// The value of `key` in the working state.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        get(self.top.as_ref()?, key)
    }

    /// Removes `key`; returns whether it was present. Keeps every chunk of a
    /// multi-chunk tree at least ⌈C/2⌉ full by borrowing from or merging with
    /// a neighbour chunk (see docs/algorithms.md).
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let Some(top) = self.top.as_mut() else { return false };
        let Some((index, position)) = locate(top, key) else { return false };
        let len = top.with_chunk(index, |c| {
            c.remove_at(position);
            c.len()
        });
        if top.chunks() == 1 {
            if len == 0 {
                self.dropped.append(&mut top.with_chunk(0, Chunk::take_stored));
                self.top = None;
            }
            return true;
        }
        if position == 0 && len > 0 {
            fix_separator(top, index);
        }
        if len < min_fill(self.capacity) {
            refill(top, index, self.capacity, &mut self.dropped);
        }
        true
    }

    /// All entries in key order.
    pub fn iter(&self) -> Entries<'_> {
        Entries::new(self.top.as_ref(), &[], None)
    }

    /// Entries with `start ≤ key < end` (`end = None`: unbounded), in key order.
    pub fn range<'a>(&'a self, start: &[u8], end: Option<&'a [u8]>) -> Entries<'a> {
        Entries::new(self.top.as_ref(), start, end)
    }

    /// Hashes what changed since the last commit and makes the working state
    /// the new committed version.
    pub fn commit(&mut self) -> Commit {
        let root = self.hash_changes();
        self.take_snapshot(root)
    }

    /// Hashes what changed since the last commit; returns the new root.
    pub(crate) fn hash_changes(&mut self) -> Hash {
        match self.top.as_mut() {
            None => empty_root(self.capacity),
            Some(top) => {
                let mut dirty = Vec::new();
                top.dirty_chunks(&mut dirty);
                rehash_chunks(dirty);
                let h = top.rehash();
                root_hash(self.capacity, top.chunks(), top.entries(), &h)
            }
        }
    }

    /// Makes the (hashed) working state the next committed version.
    pub(crate) fn take_snapshot(&mut self, root: Hash) -> Commit {
        let version = self.committed.version + 1;
        self.committed = Snapshot { top: self.top.clone(), capacity: self.capacity, version, root };
        Commit { version, root }
    }

    /// The head: the last committed version (version 0 is the empty tree).
    /// Proofs, chunk exports, the root and the version number are read from
    /// it, while `get` on the tree reads the working state, writes included.
    pub fn head(&self) -> &Snapshot {
        &self.committed
    }

    /// The working state's AVL top node, for invariant checks.
    pub(crate) fn top(&self) -> Option<&Node> {
        self.top.as_ref()
    }

    pub(crate) fn top_mut(&mut self) -> Option<&mut Node> {
        self.top.as_mut()
    }

    /// Takes the committed snapshot's top, so that changing the working
    /// tree without changing its contents (loading or evicting a paged
    /// head's chunks) copies no shared node; give it back with
    /// [`Tree::restore_committed`].
    pub(crate) fn release_committed(&mut self) -> Option<Node> {
        self.committed.top.take()
    }

    /// Points the committed snapshot at the working top again, which
    /// holds the same contents as `released`.
    pub(crate) fn restore_committed(&mut self, released: Option<Node>) {
        if released.is_some() {
            self.committed.top = self.top.clone();
        }
    }

    /// The working top, for writing store records. The previous snapshot
    /// lets go of the nodes first, so that marking them stored copies
    /// nothing it shared (the next snapshot replaces it at once).
    pub(crate) fn top_for_store(&mut self) -> Option<&mut Node> {
        self.release_committed();
        self.top.as_mut()
    }
}

impl Snapshot {
    pub fn root(&self) -> Hash {
        self.root
    }
    pub fn version(&self) -> u64 {
        self.version
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn len(&self) -> u64 {
        self.top.as_ref().map_or(0, Node::entries)
    }
    pub fn is_empty(&self) -> bool {
        self.top.is_none()
    }
    pub fn chunk_count(&self) -> u64 {
        self.top.as_ref().map_or(0, Node::chunks)
    }
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        get(self.top.as_ref()?, key)
    }
    pub fn iter(&self) -> Entries<'_> {
        Entries::new(self.top.as_ref(), &[], None)
    }
}

/// Hashes changed chunks, on every core where threads exist (not on wasm32)
/// and there is enough work: chunks are independent, and hashing their
/// entries is most of a commit.
fn rehash_chunks(mut chunks: Vec<&mut Chunk>) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        const MIN_PARALLEL: usize = 64;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads > 1 && chunks.len() >= MIN_PARALLEL {
            let per_thread = chunks.len().div_ceil(threads);
            std::thread::scope(|s| {
                for part in chunks.chunks_mut(per_thread) {
                    s.spawn(move || {
                        part.iter_mut().for_each(|c| {
                            c.rehash();
                        })
                    });
                }
            });
            return;
        }
    }
    chunks.iter_mut().for_each(|c| {
        c.rehash();
    });
}

fn insert(node: &mut Node, key: &[u8], value: &[u8], capacity: usize) -> bool {
    match node {
        Node::Leaf(c) => {
            let c = Arc::make_mut(c);
            match c.search(key) {
                Ok(i) => {
                    c.set_value(i, value);
                    false
                }
                Err(i) => {
                    c.insert_at(i, key, value);
                    if c.len() > capacity {
                        // A full chunk splits into halves, the left one keeping the extra entry.
                        let right = c.split_off(c.len().div_ceil(2));
                        let sep = KeyCopy::new(right.first_key());
                        let right = Node::leaf(right);
                        let left = std::mem::replace(node, right.clone());
                        *node = Node::Inner(Arc::new(Inner::new(left, right, sep)));
                    }
                    true
                }
            }
        }
        Node::Stub(_) => unreachable!("a chunk is loaded before a write reaches it"),
        Node::Inner(_) => {
            let n = node.inner_mut();
            let added = if n.key.is_above(key, prefix(key)) {
                insert(&mut n.left, key, value, capacity)
            } else {
                insert(&mut n.right, key, value, capacity)
            };
            node.rebalance();
            added
        }
    }
}

fn get<'a>(mut node: &'a Node, key: &[u8]) -> Option<&'a [u8]> {
    let p = prefix(key);
    loop {
        match node {
            Node::Leaf(c) => return c.search(key).ok().map(|i| c.value(i)),
            Node::Stub(_) => unreachable!("a paged head is not read"),
            Node::Inner(n) => node = if n.key.is_above(key, p) { &n.left } else { &n.right },
        }
    }
}

/// The chunk whose key range holds `key`, and `key`'s position there: `Ok`
/// if present, `Err` with the insertion point if not.
pub(crate) fn descend(top: &Node, key: &[u8]) -> (u64, Result<usize, usize>) {
    match search(top, key) {
        (index, Node::Leaf(c)) => (index, c.search(key)),
        _ => unreachable!("a chunk is loaded before a write reaches it"),
    }
}

/// The chunk the search for `key` reaches (loaded or not), and its index.
pub(crate) fn search<'a>(top: &'a Node, key: &[u8]) -> (u64, &'a Node) {
    let (mut node, mut index, p) = (top, 0u64, prefix(key));
    while let Node::Inner(n) = node {
        if n.key.is_above(key, p) {
            node = &n.left;
        } else {
            index += n.left.chunks();
            node = &n.right;
        }
    }
    (index, node)
}

fn locate(top: &Node, key: &[u8]) -> Option<(u64, usize)> {
    match descend(top, key) {
        (index, Ok(pos)) => Some((index, pos)),
        _ => None,
    }
}

/// Makes the key copy that separates chunk `index` equal its first key.
fn fix_separator(top: &mut Node, index: u64) {
    if index > 0 {
        let first = top.chunk_at(index).first_key().to_vec();
        top.set_separator(index, &first);
    }
}

/// Brings the under-filled chunk `index` back to ⌈C/2⌉ entries: borrow one
/// entry from a neighbour that can spare it (the right one if there is one),
/// else merge the pair into its left chunk.
fn refill(top: &mut Node, index: u64, capacity: usize, dropped: &mut Vec<(Table, Ref)>) {
    let right_exists = index + 1 < top.chunks();
    let neighbour = if right_exists { index + 1 } else { index - 1 };
    if top.chunk_at(neighbour).len() > min_fill(capacity) {
        if right_exists {
            let moved = top.with_chunk(neighbour, |c| c.take_entry(0));
            top.with_chunk(index, |c| c.put_entry(c.len(), moved));
            fix_separator(top, neighbour);
        } else {
            let moved = top.with_chunk(neighbour, |c| c.take_entry(c.len() - 1));
            top.with_chunk(index, |c| c.put_entry(0, moved));
        }
        fix_separator(top, index);
    } else {
        let (left, right) = if right_exists { (index, index + 1) } else { (index - 1, index) };
        let moved = top.with_chunk(right, std::mem::take);
        top.with_chunk(left, |c| c.append(moved));
        // An orphaned key copy comes back only for the tree's leftmost chunk,
        // which the right member of a pair never is.
        let orphan = top.remove_leaf(right, dropped);
        debug_assert!(orphan.is_none());
        fix_separator(top, left);
    }
}

/// An iterator over entries in key order, optionally bounded.
pub struct Entries<'a> {
    /// Subtrees still to visit, the next one on top.
    stack: Vec<&'a Node>,
    chunk: Option<(&'a Chunk, usize)>,
    end: Option<&'a [u8]>,
}

impl<'a> Entries<'a> {
    fn new(top: Option<&'a Node>, start: &[u8], end: Option<&'a [u8]>) -> Self {
        let mut it = Entries { stack: Vec::new(), chunk: None, end };
        let mut node = top;
        while let Some(n) = node {
            match n {
                Node::Leaf(c) => {
                    it.chunk = Some((c, c.lower_bound(start)));
                    node = None;
                }
                Node::Stub(_) => unreachable!("a paged head is not read"),
                Node::Inner(i) => {
                    if i.key.is_above(start, prefix(start)) {
                        it.stack.push(&i.right);
                        node = Some(&i.left);
                    } else {
                        node = Some(&i.right);
                    }
                }
            }
        }
        it
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (c, i) = self.chunk.as_mut()?;
            if *i < c.len() {
                let (k, v) = (c.key(*i), c.value(*i));
                if self.end.is_some_and(|end| k >= end) {
                    self.chunk = None;
                    return None;
                }
                *i += 1;
                return Some((k, v));
            }
            self.chunk = None;
            let mut node = self.stack.pop()?;
            loop {
                match node {
                    Node::Leaf(c) => {
                        self.chunk = Some((c, 0));
                        break;
                    }
                    Node::Stub(_) => unreachable!("a paged head is not read"),
                    Node::Inner(n) => {
                        self.stack.push(&n.right);
                        node = &n.left;
                    }
                }
            }
        }
    }
}
