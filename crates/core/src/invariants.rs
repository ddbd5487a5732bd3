//! A from-scratch check of every structural invariant, for tests and
//! debugging: AVL balance, chunk fill bounds, sorted keys, exact key copies,
//! counts, and (on the committed version) hashes equal to a recomputation.

use crate::chunk::Chunk;
use crate::hash::{chunk_hash, entry_hash, inchunk_tree, inner_hash, root_hash, Hash};
use crate::limits::min_fill;
use crate::node::Node;
use crate::tree::{Snapshot, Tree};

struct Checker<'a> {
    capacity: usize,
    multi_chunk: bool,
    prev_key: Option<&'a [u8]>,
}

/// What a subtree reports upward: height, counts, smallest key, and its hash
/// recomputed from scratch when `with_hashes`.
struct Summary<'a> {
    height: u8,
    chunks: u64,
    entries: u64,
    first_key: &'a [u8],
    hash: Option<Hash>,
}

impl<'a> Checker<'a> {
    fn chunk(&mut self, c: &'a Chunk, with_hashes: bool) -> Result<Summary<'a>, String> {
        let m = c.len();
        if m == 0 || m > self.capacity {
            return Err(format!("chunk holds {m} entries (capacity {})", self.capacity));
        }
        if self.multi_chunk && m < min_fill(self.capacity) {
            return Err(format!("chunk holds {m} < ⌈C/2⌉ entries"));
        }
        for (k, _) in c.entries() {
            if self.prev_key.is_some_and(|p| k <= p) {
                return Err("keys are not strictly increasing".into());
            }
            self.prev_key = Some(k);
        }
        let hash = with_hashes.then(|| {
            let leaves: Vec<Hash> = c.entries().map(|(k, v)| entry_hash(k, v)).collect();
            chunk_hash(m, &inchunk_tree(&leaves)[0])
        });
        if let Some(h) = hash {
            if c.hash() != h {
                return Err("cached chunk hash differs from recomputation".into());
            }
        }
        Ok(Summary { height: 0, chunks: 1, entries: m as u64, first_key: c.first_key(), hash })
    }

    fn node(&mut self, node: &'a Node, with_hashes: bool) -> Result<Summary<'a>, String> {
        let n = match node {
            Node::Leaf(c) => return self.chunk(c, with_hashes),
            Node::Stub(_) => return Err("a stub: invariants are checked on loaded trees".into()),
            Node::Inner(n) => n,
        };
        let l = self.node(&n.left, with_hashes)?;
        let r = self.node(&n.right, with_hashes)?;
        if (l.height as i32 - r.height as i32).abs() > 1 {
            return Err(format!("unbalanced node: heights {} and {}", l.height, r.height));
        }
        let height = 1 + l.height.max(r.height);
        let (chunks, entries) = (l.chunks + r.chunks, l.entries + r.entries);
        if (n.height, n.chunks, n.entries) != (height, chunks, entries) {
            return Err("stale height or counts".into());
        }
        if n.key.as_bytes() != r.first_key {
            return Err("key copy differs from the right subtree's smallest key".into());
        }
        let hash = l.hash.zip(r.hash).map(|(lh, rh)| inner_hash(height, chunks, entries, &lh, &rh));
        if hash.is_some() && n.hash != hash {
            return Err("cached inner hash differs from recomputation".into());
        }
        Ok(Summary { height, chunks, entries, first_key: l.first_key, hash })
    }
}

fn check(top: Option<&Node>, capacity: usize, root: Option<Hash>) -> Result<(), String> {
    let Some(top) = top else { return Ok(()) };
    let mut checker = Checker { capacity, multi_chunk: top.chunks() > 1, prev_key: None };
    let s = checker.node(top, root.is_some())?;
    if let (Some(root), Some(h)) = (root, s.hash) {
        if root_hash(capacity, s.chunks, s.entries, &h) != root {
            return Err("root differs from recomputation".into());
        }
    }
    Ok(())
}

impl Tree {
    /// Checks every invariant of the working state, and of the committed
    /// version including all hashes. Meant for tests and debugging.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        check(self.top(), self.capacity(), None)?;
        self.head().check_invariants()
    }
}

impl Snapshot {
    /// Checks every invariant of this version, recomputing all hashes.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        check(self.top.as_ref(), self.capacity, Some(self.root))
    }
}
