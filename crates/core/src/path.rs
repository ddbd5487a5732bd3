//! The chunk path: a chunk's AVL ancestors, bottom-up (`spec/hashing.md`,
//! "Chunk path"). Folding it authenticates the chunk's index, the tree's
//! totals and the chunk's key-height against the root.

use crate::codec::{put_varint, Reader};
use crate::error::ProofError;
use crate::hash::{Chain, Hash, Link, Links};
use crate::limits::{min_fill, MAX_CHUNKS, MAX_ENTRIES, MAX_HEIGHT};

/// One ancestor of a chunk: its height and the sibling subtree beside the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathStep {
    /// The sibling is the parent's left child (the path goes up from the right).
    pub sibling_is_left: bool,
    /// The parent's height.
    pub parent_height: u8,
    /// Chunks in the sibling subtree.
    pub sibling_chunks: u64,
    /// Entries in the sibling subtree.
    pub sibling_entries: u64,
    /// The sibling subtree's hash.
    pub sibling_hash: Hash,
}

/// A chunk's ancestors, bottom-up. Empty for a single-chunk tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkPath {
    pub steps: Vec<PathStep>,
}

/// What folding a chunk path yields; all of it is authenticated by `root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// The root the path leads to.
    pub root: Hash,
    /// The chunk's index.
    pub index: u64,
    /// Total chunks in the tree.
    pub chunk_count: u64,
    /// Total entries in the tree.
    pub entry_count: u64,
    /// Height of the inner node holding this chunk's smallest key (0 for chunk 0).
    pub key_height: u8,
}

impl ChunkPath {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.steps.len() as u64);
        for s in &self.steps {
            out.push(((s.sibling_is_left as u8) << 7) | s.parent_height);
            put_varint(out, s.sibling_chunks);
            put_varint(out, s.sibling_entries);
            out.extend_from_slice(&s.sibling_hash);
        }
    }

    /// Decodes a path for a chunk of `m` entries in a tree of capacity
    /// `capacity`, with every structural check of `spec/encoding.md`.
    pub fn decode(r: &mut Reader, capacity: usize, m: usize) -> Result<Self, ProofError> {
        let len = r.varint()?;
        if len > MAX_HEIGHT as u64 {
            return Err(ProofError::PathTooLong);
        }
        let fill = min_fill(capacity) as u64;
        if len > 0 && (m as u64) < fill {
            return Err(ProofError::ChunkFill);
        }
        let (mut height, mut chunks, mut entries) = (0u8, 1u64, m as u64);
        let mut steps = Vec::with_capacity(len as usize);
        for _ in 0..len {
            let flags = r.u8()?;
            let parent_height = flags & 0x7f;
            if parent_height <= height || parent_height > (height + 2).min(MAX_HEIGHT) {
                return Err(ProofError::HeightInvalid);
            }
            let sibling_chunks = r.varint()?;
            if sibling_chunks == 0 {
                return Err(ProofError::CountInvalid);
            }
            let sibling_entries = r.varint()?;
            let lo = sibling_chunks.checked_mul(fill);
            let hi = sibling_chunks.checked_mul(capacity as u64);
            if !matches!((lo, hi), (Some(lo), Some(hi)) if lo <= sibling_entries && sibling_entries <= hi) {
                return Err(ProofError::CountInvalid);
            }
            chunks += sibling_chunks;
            entries += sibling_entries;
            if chunks > MAX_CHUNKS || entries > MAX_ENTRIES {
                return Err(ProofError::CountInvalid);
            }
            steps.push(PathStep {
                sibling_is_left: flags & 0x80 != 0,
                parent_height,
                sibling_chunks,
                sibling_entries,
                sibling_hash: r.hash()?,
            });
            height = parent_height;
        }
        Ok(ChunkPath { steps })
    }

    /// Folds `chunk_hash` (of a chunk with `m` entries) up to the root.
    pub fn fold(&self, capacity: usize, m: usize, chunk_hash: Hash) -> Folded {
        let mut chain = Chain(chunk_hash);
        self.links(capacity, m, &mut chain).with_root(chain.0)
    }

    /// The fold as links, from the chunk hash up to the root (included).
    pub(crate) fn links(&self, capacity: usize, m: usize, out: &mut impl Links) -> Unrooted {
        let (mut chunks, mut entries) = (1u64, m as u64);
        let (mut index, mut key_height) = (0u64, 0u8);
        for s in &self.steps {
            chunks += s.sibling_chunks;
            entries += s.sibling_entries;
            if s.sibling_is_left {
                index += s.sibling_chunks;
                if key_height == 0 {
                    key_height = s.parent_height;
                }
            }
            out.push(Link::Inner {
                height: s.parent_height,
                chunks,
                entries,
                sibling: s.sibling_hash,
                sibling_is_left: s.sibling_is_left,
            });
        }
        out.push(Link::Root { capacity, chunks, entries });
        Unrooted { index, chunks, entries, key_height }
    }
}

/// What a fold authenticates besides the root, once the root is computed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unrooted {
    index: u64,
    chunks: u64,
    entries: u64,
    key_height: u8,
}

impl Unrooted {
    pub(crate) fn with_root(self, root: Hash) -> Folded {
        let Unrooted { index, chunks, entries, key_height } = self;
        Folded { root, index, chunk_count: chunks, entry_count: entries, key_height }
    }
}
