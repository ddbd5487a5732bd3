//! The AVL inner tree over chunks. Nodes are shared between the working tree
//! and committed snapshots through `Arc`; a write copies only the path it
//! touches (`Arc::make_mut`), so a snapshot never changes.

use std::sync::Arc;

use crate::chunk::Chunk;
use crate::error::StoreError;
use crate::hash::{inner_hash, Hash};
use crate::keys::prefix;
use crate::record::{Ref, Table};

#[derive(Clone, Debug)]
pub(crate) enum Node {
    Leaf(Arc<Chunk>),
    /// A stored chunk not loaded (a paged head, `head.rs`): a write loads
    /// it before it touches it.
    Stub(Stub),
    Inner(Arc<Inner>),
}

/// A chunk of a paged head that stays in the store: its record, and its
/// entry count once known. A node record holds its own counts, not its
/// children's, so of two sibling stubs neither count is known until one
/// of them loads (the other's is then the parent's less the loaded one's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stub {
    pub record: Ref,
    pub entries: Option<u64>,
}

impl Stub {
    /// Sets an unknown count from its parent's count (`parent`) and its
    /// sibling's (`sibling`). Counts that do not fit are `STORE_CORRUPT`.
    pub fn resolve(&mut self, parent: u64, sibling: u64) -> Result<(), StoreError> {
        if self.entries.is_none() {
            self.entries = Some(parent.checked_sub(sibling).filter(|&e| e > 0).ok_or(StoreError::Corrupt)?);
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Inner {
    pub left: Node,
    pub right: Node,
    /// `1 + max(child heights)`; a chunk has height 0.
    pub height: u8,
    /// Copy of the smallest key of the right subtree.
    pub key: KeyCopy,
    pub chunks: u64,
    pub entries: u64,
    /// `None` while the subtree has uncommitted changes.
    pub hash: Option<Hash>,
    /// This node's record in a store, once written (`spec/store-format.md`).
    pub stored: Option<Ref>,
    /// Whether the store holds this subtree as it is now.
    pub persisted: bool,
}

impl Node {
    pub fn leaf(chunk: Chunk) -> Node {
        Node::Leaf(Arc::new(chunk))
    }

    pub fn height(&self) -> u8 {
        match self {
            Node::Leaf(_) | Node::Stub(_) => 0,
            Node::Inner(n) => n.height,
        }
    }

    pub fn chunks(&self) -> u64 {
        match self {
            Node::Leaf(_) | Node::Stub(_) => 1,
            Node::Inner(n) => n.chunks,
        }
    }

    pub fn entries(&self) -> u64 {
        match self {
            Node::Leaf(c) => c.len() as u64,
            Node::Stub(s) => s.entries.expect("a stub's count is known before a write needs it"),
            Node::Inner(n) => n.entries,
        }
    }

    /// The entry count, if known (a stub's may not be).
    pub fn known_entries(&self) -> Option<u64> {
        match self {
            Node::Stub(s) => s.entries,
            _ => Some(self.entries()),
        }
    }

    /// Whether the store holds this node as it is now (a stub always is).
    pub fn is_persisted(&self) -> bool {
        match self {
            Node::Leaf(c) => c.persisted,
            Node::Inner(n) => n.persisted,
            Node::Stub(_) => true,
        }
    }

    /// Whether this is a chunk, loaded or not.
    pub fn is_chunk(&self) -> bool {
        !matches!(self, Node::Inner(_))
    }

    /// The committed hash. Panics on a node with uncommitted changes.
    pub fn hash(&self) -> Hash {
        match self {
            Node::Leaf(c) => c.hash(),
            Node::Stub(s) => s.record.hash,
            Node::Inner(n) => n.hash.expect("node hashed at commit"),
        }
    }

    /// Collects every chunk below with uncommitted changes, so that they can
    /// be hashed together (in parallel) before the inner nodes above them.
    pub fn dirty_chunks<'a>(&'a mut self, out: &mut Vec<&'a mut Chunk>) {
        match self {
            Node::Leaf(c) => {
                if c.hash_cached().is_none() {
                    out.push(Arc::make_mut(c));
                }
            }
            Node::Stub(_) => {}
            Node::Inner(n) => {
                if n.hash.is_none() {
                    let n = Arc::make_mut(n);
                    n.left.dirty_chunks(out);
                    n.right.dirty_chunks(out);
                }
            }
        }
    }

    /// Hashes every changed node below and returns this node's hash.
    pub fn rehash(&mut self) -> Hash {
        match self {
            Node::Leaf(c) => match c.hash_cached() {
                Some(h) => h,
                None => Arc::make_mut(c).rehash(),
            },
            Node::Stub(s) => s.record.hash,
            Node::Inner(n) => match n.hash {
                Some(h) => h,
                None => {
                    let n = Arc::make_mut(n);
                    let (l, r) = (n.left.rehash(), n.right.rehash());
                    let h = inner_hash(n.height, n.chunks, n.entries, &l, &r);
                    n.hash = Some(h);
                    h
                }
            },
        }
    }

    fn balance(&self) -> i32 {
        match self {
            Node::Inner(n) => n.left.height() as i32 - n.right.height() as i32,
            _ => 0,
        }
    }

    /// Writable access to an inner node (copied first if a snapshot shares it).
    pub fn inner_mut(&mut self) -> &mut Inner {
        match self {
            Node::Inner(n) => Arc::make_mut(n),
            _ => unreachable!("inner node expected"),
        }
    }

    /// Restores the AVL balance of this subtree after one child's height
    /// changed by at most one, and refreshes its metadata.
    pub fn rebalance(&mut self) {
        let Node::Inner(_) = self else { return };
        let n = self.inner_mut();
        n.refresh();
        match self.balance() {
            2 => {
                let n = self.inner_mut();
                if n.left.balance() < 0 {
                    n.left.inner_mut().rotate_left();
                }
                n.rotate_right();
            }
            -2 => {
                let n = self.inner_mut();
                if n.right.balance() > 0 {
                    n.right.inner_mut().rotate_right();
                }
                n.rotate_left();
            }
            _ => {}
        }
    }

    /// The chunk at `index` (counted from this subtree's leftmost chunk).
    pub fn chunk_at(&self, mut index: u64) -> &Chunk {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(c) => return c,
                Node::Stub(_) => unreachable!("a chunk is loaded before it is read"),
                Node::Inner(n) => {
                    let lc = n.left.chunks();
                    node = if index < lc {
                        &n.left
                    } else {
                        index -= lc;
                        &n.right
                    };
                }
            }
        }
    }

    /// Runs `f` on the chunk at `index`, refreshing counts and marking hashes
    /// stale along the path. The shape of the tree does not change.
    pub fn with_chunk<R>(&mut self, index: u64, f: impl FnOnce(&mut Chunk) -> R) -> R {
        match self {
            Node::Leaf(c) => f(Arc::make_mut(c)),
            Node::Stub(_) => unreachable!("a chunk is loaded before it is written"),
            Node::Inner(_) => {
                let n = self.inner_mut();
                let lc = n.left.chunks();
                let r = if index < lc { n.left.with_chunk(index, f) } else { n.right.with_chunk(index - lc, f) };
                n.refresh();
                r
            }
        }
    }

    /// Sets the key copy that separates chunk `index` from its left
    /// neighbour (the lowest ancestor from whose right subtree it is the
    /// leftmost chunk). Returns false if chunk `index` is this subtree's
    /// leftmost chunk, so the separator lies above.
    pub fn set_separator(&mut self, index: u64, key: &[u8]) -> bool {
        let Node::Inner(_) = self else { return false };
        let n = self.inner_mut();
        let lc = n.left.chunks();
        if index < lc {
            n.left.set_separator(index, key)
        } else {
            if !n.right.set_separator(index - lc, key) {
                n.key = KeyCopy::new(key);
                n.persisted = false;
            }
            true
        }
    }

    /// Removes the leaf at `index` (never the leftmost of the whole tree) and
    /// rebalances. Returns a key copy orphaned by the removal, which the
    /// caller above sets where the path last turned right. The records of
    /// the removed leaf and of its parent, if stored, go to `dropped`.
    pub fn remove_leaf(&mut self, index: u64, dropped: &mut Vec<(Table, Ref)>) -> Option<KeyCopy> {
        let n = self.inner_mut();
        let lc = n.left.chunks();
        let orphan = if index < lc {
            if n.left.is_chunk() {
                // The leaf is the leftmost of this subtree: its separator lies
                // above, and this node's key (the right subtree's smallest) takes
                // its place there.
                n.drop_records(true, dropped);
                let (right, key) = (n.right.clone(), n.key.clone());
                *self = right;
                return Some(key);
            }
            n.left.remove_leaf(index, dropped)
        } else {
            if n.right.is_chunk() {
                n.drop_records(false, dropped);
                let left = n.left.clone();
                *self = left;
                return None;
            }
            if let Some(key) = n.right.remove_leaf(index - lc, dropped) {
                n.key = key;
            }
            None
        };
        self.rebalance();
        orphan
    }
}

/// An inner node's copy of its right subtree's smallest key, with the key's
/// prefix cached so that most search steps compare one integer.
#[derive(Clone, Debug)]
pub(crate) struct KeyCopy {
    prefix: u64,
    bytes: Box<[u8]>,
}

impl KeyCopy {
    pub fn new(key: &[u8]) -> KeyCopy {
        KeyCopy { prefix: prefix(key), bytes: key.into() }
    }

    /// Whether a search for `key`, whose `prefix(key)` is `key_prefix`,
    /// goes left of this copy (`key < copy`).
    pub fn is_above(&self, key: &[u8], key_prefix: u64) -> bool {
        key_prefix < self.prefix || (key_prefix == self.prefix && key < &*self.bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl Inner {
    pub fn new(left: Node, right: Node, key: KeyCopy) -> Inner {
        let mut n =
            Inner { left, right, height: 0, key, chunks: 0, entries: 0, hash: None, stored: None, persisted: false };
        n.refresh();
        n
    }

    /// Moves this node's record and its left (or right) leaf's records to
    /// `dropped`: both leave the tree.
    fn drop_records(&mut self, left_leaf: bool, dropped: &mut Vec<(Table, Ref)>) {
        dropped.extend(self.stored.take().map(|r| (Table::Nodes, r)));
        if let Node::Leaf(c) = if left_leaf { &mut self.left } else { &mut self.right } {
            dropped.append(&mut Arc::make_mut(c).take_stored());
        }
    }

    /// Recomputes height and counts from the children and marks the hash stale.
    pub fn refresh(&mut self) {
        self.height = 1 + self.left.height().max(self.right.height());
        self.chunks = self.left.chunks() + self.right.chunks();
        self.entries = self.left.entries() + self.right.entries();
        self.hash = None;
        self.persisted = false;
    }

    /// `P(L(a, b), c)` → `L(a, P(b, c))`, in place. Key copies travel with
    /// their nodes: each still separates the same two subtrees.
    fn rotate_right(&mut self) {
        {
            let Inner { left, right, key, .. } = self;
            let x = left.inner_mut();
            std::mem::swap(&mut x.left, &mut x.right); // x = (b, a)
            std::mem::swap(&mut x.right, right); //        x = (b, c), self.right = a
            std::mem::swap(&mut x.key, key);
            x.refresh();
        }
        std::mem::swap(&mut self.left, &mut self.right); // self = (a, x)
        self.refresh();
    }

    /// `P(a, R(b, c))` → `R(P(a, b), c)`, in place.
    fn rotate_left(&mut self) {
        {
            let Inner { left, right, key, .. } = self;
            let x = right.inner_mut();
            std::mem::swap(&mut x.left, &mut x.right); // x = (c, b)
            std::mem::swap(&mut x.left, left); //          x = (a, b), self.left = c
            std::mem::swap(&mut x.key, key);
            x.refresh();
        }
        std::mem::swap(&mut self.left, &mut self.right); // self = (x, c)
        self.refresh();
    }
}
