//! Rebuilding a tree from verified chunks received in any order
//! (`spec/chunk-format.md`, "Rebuild": the paper's §IV-D active-nodes
//! algorithm, written as a stack).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::envelope::{verify_chunk, VerifiedChunk};
use crate::error::{ProofError, RebuildError};
use crate::hash::{root_hash, Hash};
use crate::node::{Inner, KeyCopy, Node};
use crate::tree::Tree;

/// Collects verified chunks for one trusted root and finishes into the
/// identical tree.
///
/// ```
/// use bpavl_core::{Rebuilder, Tree};
/// let mut source = Tree::new(2).unwrap();
/// for i in 0u8..10 { source.insert(&[i + 1], &[i]).unwrap(); }
/// let root = source.commit().root;
/// let mut rebuilder = Rebuilder::new(root);
/// for i in (0..source.chunk_count()).rev() {
///     rebuilder.add(i, &source.head().export_chunk_bytes(i).unwrap()).unwrap();
/// }
/// let rebuilt = rebuilder.finish(1).unwrap();
/// assert_eq!(rebuilt.head().root(), root);
/// ```
#[derive(Debug)]
pub struct Rebuilder {
    root: Hash,
    /// Set by the first chunk; authenticated by the root.
    layout: Option<Layout>,
    /// By index. A map, not a table sized by the (authenticated but possibly
    /// huge) chunk count: memory follows what has actually arrived.
    chunks: BTreeMap<u64, VerifiedChunk>,
}

#[derive(Debug, Clone, Copy)]
struct Layout {
    chunks: u64,
    capacity: usize,
}

impl Rebuilder {
    /// A rebuilder for the tree whose root is `root`.
    pub fn new(root: Hash) -> Rebuilder {
        Rebuilder { root, layout: None, chunks: BTreeMap::new() }
    }

    pub fn root(&self) -> Hash {
        self.root
    }

    /// The tree's chunk count, once the first chunk has told it (authenticated).
    pub fn chunk_count(&self) -> Option<u64> {
        self.layout.map(|l| l.chunks)
    }

    /// Chunks accepted so far.
    pub fn received(&self) -> u64 {
        self.chunks.len() as u64
    }

    /// Verifies envelope `bytes` as chunk `index` and keeps it. Returns
    /// false if that chunk was already held.
    pub fn add(&mut self, index: u64, bytes: &[u8]) -> Result<bool, RebuildError> {
        let chunk = verify_chunk(&self.root, index, bytes)?;
        self.add_verified(chunk)
    }

    /// Keeps a chunk that `verify_chunk` already checked against this root.
    pub fn add_verified(&mut self, chunk: VerifiedChunk) -> Result<bool, RebuildError> {
        if chunk.root != self.root {
            return Err(RebuildError::Chunk(ProofError::RootMismatch));
        }
        self.layout.get_or_insert(Layout { chunks: chunk.chunk_count, capacity: chunk.capacity });
        match self.chunks.entry(chunk.index) {
            std::collections::btree_map::Entry::Occupied(_) => Ok(false),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(chunk);
                Ok(true)
            }
        }
    }

    /// Indices not yet received, in order, computed lazily (none are known
    /// until the first chunk tells the total).
    pub fn missing(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.chunk_count().unwrap_or(0)).filter(|i| !self.chunks.contains_key(i))
    }

    /// How many chunks are still missing, if the total is known.
    pub fn missing_count(&self) -> Option<u64> {
        self.chunk_count().map(|t| t - self.received())
    }

    /// Whether every chunk is in.
    pub fn is_complete(&self) -> bool {
        self.missing_count() == Some(0)
    }

    /// Reconstructs the tree as committed version `version`. Fails without a
    /// tree if chunks are missing or the result does not reproduce the root.
    pub fn finish(self, version: u64) -> Result<Tree, RebuildError> {
        if !self.is_complete() {
            return Err(RebuildError::Incomplete);
        }
        let layout = self.layout.expect("complete");
        let mut chunks = self.chunks.into_values();
        let first = chunks.next().expect("at least one chunk");
        let mut current = Node::Leaf(Arc::new(first.chunk));
        let mut stack: Vec<Inner> = Vec::new();
        for c in chunks {
            let key = KeyCopy::new(c.chunk.first_key());
            while stack.last().is_some_and(|t| t.height < c.key_height) {
                current = close(stack.pop().expect("non-empty"), current)?;
            }
            let left = std::mem::replace(&mut current, Node::Leaf(Arc::new(c.chunk)));
            stack.push(Inner {
                left,
                right: current.clone(),
                height: c.key_height,
                key,
                chunks: 0,
                entries: 0,
                hash: None,
                stored: None,
                persisted: false,
            });
        }
        while let Some(t) = stack.pop() {
            current = close(t, current)?;
        }
        let top_hash = current.rehash();
        let root = root_hash(layout.capacity, current.chunks(), current.entries(), &top_hash);
        if root != self.root {
            return Err(RebuildError::RootMismatch);
        }
        Ok(Tree::from_committed(Some(current), layout.capacity, version, root))
    }
}

/// Gives the pending inner node `t` its right subtree and checks that its
/// recorded key-height is what its children make it, AVL-balanced.
fn close(mut t: Inner, right: Node) -> Result<Node, RebuildError> {
    let declared = t.height;
    t.right = right;
    t.refresh();
    let (l, r) = (t.left.height() as i32, t.right.height() as i32);
    if t.height != declared || (l - r).abs() > 1 {
        return Err(RebuildError::RootMismatch);
    }
    Ok(Node::Inner(Arc::new(t)))
}
