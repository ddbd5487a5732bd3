//! Proof generation and chunk export from a committed snapshot.

use crate::chunk::Chunk;
use crate::codec::check_key;
use crate::envelope::{encode_envelope, ChunkEnvelope};
use crate::error::TreeError;
use crate::node::Node;
use crate::path::{ChunkPath, PathStep};
use crate::proof::{
    check_range_query, segment_len, AbsenceProof, ChunkProof, EntryWitness, ExistenceProof, Neighbour, RangeProof,
    Segment,
};
use crate::tree::{descend, tree_error, Snapshot};

/// An entry's global position: its chunk's index and its position there.
pub(crate) type GlobalPosition = (u64, usize);

impl Snapshot {
    fn top(&self) -> Result<&Node, TreeError> {
        self.top.as_ref().ok_or(TreeError::ChunkOutOfRange)
    }

    /// Chunk `index` and its path to the root, with its key-height.
    fn chunk_with_path(&self, index: u64) -> Result<(&Chunk, ChunkPath, u8), TreeError> {
        let mut node = self.top()?;
        if index >= node.chunks() {
            return Err(TreeError::ChunkOutOfRange);
        }
        let (mut rel, mut steps, mut key_height) = (index, Vec::new(), 0u8);
        loop {
            match node {
                Node::Leaf(c) => {
                    steps.reverse();
                    return Ok((c, ChunkPath { steps }, key_height));
                }
                Node::Stub(_) => unreachable!("proofs come from loaded snapshots"),
                Node::Inner(n) => {
                    let lc = n.left.chunks();
                    let (sibling, sibling_is_left) = if rel < lc { (&n.right, false) } else { (&n.left, true) };
                    if sibling_is_left {
                        rel -= lc;
                        key_height = n.height; // the lowest right turn wins: keep overwriting
                    }
                    steps.push(PathStep {
                        sibling_is_left,
                        parent_height: n.height,
                        sibling_chunks: sibling.chunks(),
                        sibling_entries: sibling.entries(),
                        sibling_hash: sibling.hash(),
                    });
                    node = if sibling_is_left { &n.right } else { &n.left };
                }
            }
        }
    }

    fn witness(&self, index: u64, position: usize) -> (&Chunk, EntryWitness) {
        let (c, path, _) = self.chunk_with_path(index).expect("index in range");
        let inchunk = c.multiproof(position, position + 1);
        (c, EntryWitness { chunk_entries: c.len(), position, inchunk, path })
    }

    fn neighbour(&self, index: u64, position: usize) -> Neighbour {
        let (c, witness) = self.witness(index, position);
        Neighbour { key: c.key(position).to_vec(), value: c.value(position).to_vec(), witness }
    }

    /// The global position of the first entry with key ≥ `key`, or `None` if
    /// every key is smaller.
    fn lower_bound(&self, key: &[u8]) -> Option<(u64, usize)> {
        let top = self.top.as_ref()?;
        let (index, pos) = descend(top, key);
        let pos = pos.unwrap_or_else(|p| p);
        if pos < top.chunk_at(index).len() {
            Some((index, pos))
        } else if index + 1 < top.chunks() {
            Some((index + 1, 0))
        } else {
            None
        }
    }

    /// The entry before the given global position (`None` at the tree's start).
    fn before(&self, (index, pos): (u64, usize)) -> Option<(u64, usize)> {
        if pos > 0 {
            Some((index, pos - 1))
        } else if index > 0 {
            Some((index - 1, self.top.as_ref()?.chunk_at(index - 1).len() - 1))
        } else {
            None
        }
    }

    /// The last entry of the tree.
    fn last(&self) -> Option<(u64, usize)> {
        let top = self.top.as_ref()?;
        Some((top.chunks() - 1, top.chunk_at(top.chunks() - 1).len() - 1))
    }

    /// Proof that `key` is in this version (`KEY_NOT_FOUND` otherwise).
    pub fn prove_existence(&self, key: &[u8]) -> Result<ExistenceProof, TreeError> {
        check_key(key).map_err(tree_error)?;
        let top = self.top.as_ref().ok_or(TreeError::KeyNotFound)?;
        let (index, pos) = descend(top, key);
        let position = pos.map_err(|_| TreeError::KeyNotFound)?;
        Ok(ExistenceProof { capacity: self.capacity, witness: self.witness(index, position).1 })
    }

    /// The global positions of the neighbours of an absent `key`: the
    /// largest entry below it and the smallest above it, each if any.
    pub(crate) fn neighbours(&self, key: &[u8]) -> (Option<GlobalPosition>, Option<GlobalPosition>) {
        let right = self.lower_bound(key);
        let left = match right {
            Some(at) => self.before(at),
            None => self.last(),
        };
        (left, right)
    }

    /// Proof that `key` is not in this version (`KEY_EXISTS` otherwise).
    pub fn prove_absence(&self, key: &[u8]) -> Result<AbsenceProof, TreeError> {
        check_key(key).map_err(tree_error)?;
        if self.get(key).is_some() {
            return Err(TreeError::KeyExists);
        }
        let (left, right) = self.neighbours(key);
        Ok(AbsenceProof {
            capacity: self.capacity,
            left: left.map(|(i, p)| self.neighbour(i, p)),
            right: right.map(|(i, p)| self.neighbour(i, p)),
        })
    }

    /// Proof of every entry with `start ≤ key < end`, at most `limit` of them.
    pub fn prove_range(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<RangeProof, TreeError> {
        check_range_query(start, end, limit).map_err(tree_error)?;
        let Some(top) = self.top.as_ref() else {
            return Ok(RangeProof { capacity: self.capacity, segments: Vec::new() });
        };
        // The window: left neighbour, results, successor (spec/proof-format.md).
        let first = self.lower_bound(start);
        let mut from = match first {
            Some(at) => self.before(at).unwrap_or(at),
            None => self.last().expect("non-empty"),
        };
        // Walk chunk by chunk, stopping after the successor.
        let mut segments = Vec::new();
        let mut results = 0usize;
        loop {
            let (index, lo) = from;
            let (c, path, _) = self.chunk_with_path(index).expect("in range");
            let (taken, counted, ends) = segment_len((lo..c.len()).map(|i| c.key(i)), start, end, limit, results);
            let hi = lo + taken;
            results = counted;
            let entries = (lo..hi).map(|i| (c.key(i).to_vec(), c.value(i).to_vec())).collect();
            segments.push(Segment { chunk_entries: c.len(), lo, entries, inchunk: c.multiproof(lo, hi), path });
            if ends || index + 1 == top.chunks() {
                break;
            }
            from = (index + 1, 0);
        }
        Ok(RangeProof { capacity: self.capacity, segments })
    }

    /// Proof that chunk `index` sits at `index`.
    pub fn prove_chunk(&self, index: u64) -> Result<ChunkProof, TreeError> {
        let (c, path, _) = self.chunk_with_path(index)?;
        Ok(ChunkProof { capacity: self.capacity, chunk_entries: c.len(), chunk_root: c.root(), path })
    }

    /// The envelope of chunk `index`.
    pub fn export_chunk(&self, index: u64) -> Result<ChunkEnvelope, TreeError> {
        let (c, path, key_height) = self.chunk_with_path(index)?;
        let entries = c.entries().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        Ok(ChunkEnvelope { capacity: self.capacity, key_height, entries, path })
    }

    /// The encoded envelope of chunk `index`, written straight from the chunk.
    pub fn export_chunk_bytes(&self, index: u64) -> Result<Vec<u8>, TreeError> {
        let (c, path, key_height) = self.chunk_with_path(index)?;
        Ok(encode_envelope(self.capacity, key_height, c.entries(), &path))
    }
}
