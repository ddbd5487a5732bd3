//! The chunk envelope: one chunk with its key-height and chunk path, checkable
//! against the trusted root alone (`spec/chunk-format.md`).

use crate::chunk::Chunk;
use crate::codec::{put_bytes, put_varint, Reader};
use crate::error::ProofError;
use crate::hash::{chunk_hash, entry_hashes, inchunk_tree, Hash};
use crate::limits::MAX_HEIGHT;
use crate::path::ChunkPath;

/// Format byte of a chunk envelope.
pub const FORMAT_CHUNK_ENVELOPE: u8 = 0x05;

/// One exported chunk, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkEnvelope {
    pub capacity: usize,
    /// Height of the inner node holding this chunk's smallest key (0 for chunk 0).
    pub key_height: u8,
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub path: ChunkPath,
}

/// Writes an envelope; shared by `ChunkEnvelope::encode` and direct exports.
pub(crate) fn encode_envelope<'a>(
    capacity: usize,
    key_height: u8,
    entries: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>,
    path: &ChunkPath,
) -> Vec<u8> {
    let mut out = vec![FORMAT_CHUNK_ENVELOPE];
    put_varint(&mut out, capacity as u64);
    out.push(key_height);
    put_varint(&mut out, entries.len() as u64);
    for (k, v) in entries {
        put_bytes(&mut out, k);
        put_bytes(&mut out, v);
    }
    path.encode(&mut out);
    out
}

/// An envelope decoded without copying its entries.
struct EnvelopeView<'a> {
    capacity: usize,
    key_height: u8,
    keys: Vec<&'a [u8]>,
    values: Vec<&'a [u8]>,
    path: ChunkPath,
}

fn decode_view(bytes: &[u8]) -> Result<EnvelopeView<'_>, ProofError> {
    let mut r = Reader::new(bytes, FORMAT_CHUNK_ENVELOPE)?;
    let capacity = r.capacity()?;
    let key_height = r.u8()?;
    if key_height > MAX_HEIGHT {
        return Err(ProofError::HeightInvalid);
    }
    let m = r.chunk_size(capacity)?;
    // Each entry takes at least 3 bytes, so the input bounds the reservation.
    let room = m.min(r.remaining() / 3);
    let (mut keys, mut values) = (Vec::with_capacity(room), Vec::with_capacity(room));
    for _ in 0..m {
        let key = r.key()?;
        if keys.last().is_some_and(|prev: &&[u8]| key <= *prev) {
            return Err(ProofError::KeysNotSorted);
        }
        keys.push(key);
        values.push(r.value()?);
    }
    let path = ChunkPath::decode(&mut r, capacity, m)?;
    r.finish()?;
    Ok(EnvelopeView { capacity, key_height, keys, values, path })
}

impl ChunkEnvelope {
    pub fn encode(&self) -> Vec<u8> {
        let entries = self.entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice()));
        encode_envelope(self.capacity, self.key_height, entries, &self.path)
    }

    /// Decodes with every canonical-form check, without verifying hashes.
    pub fn decode(bytes: &[u8]) -> Result<Self, ProofError> {
        let v = decode_view(bytes)?;
        let entries = v.keys.iter().zip(&v.values).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        Ok(ChunkEnvelope { capacity: v.capacity, key_height: v.key_height, entries, path: v.path })
    }
}

/// A chunk that verified against a root; only `verify_chunk` makes one.
#[derive(Debug, Clone)]
pub struct VerifiedChunk {
    pub(crate) root: Hash,
    pub(crate) index: u64,
    pub(crate) chunk_count: u64,
    pub(crate) entry_count: u64,
    pub(crate) capacity: usize,
    pub(crate) key_height: u8,
    pub(crate) chunk: Chunk,
    /// Kept for a sync into a store, which stores it to check the chunk again on resume.
    pub(crate) path: ChunkPath,
}

impl VerifiedChunk {
    /// The root it verified against.
    pub fn root(&self) -> Hash {
        self.root
    }
    /// Its authenticated index.
    pub fn index(&self) -> u64 {
        self.index
    }
    /// Total chunks in the tree.
    pub fn chunk_count(&self) -> u64 {
        self.chunk_count
    }
    /// Total entries in the tree.
    pub fn entry_count(&self) -> u64 {
        self.entry_count
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn key_height(&self) -> u8 {
        self.key_height
    }
    /// Entries in this chunk.
    pub fn len(&self) -> usize {
        self.chunk.len()
    }
    pub fn is_empty(&self) -> bool {
        self.chunk.len() == 0
    }
    /// This chunk's entries, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.chunk.entries()
    }
}

/// Checks chunk envelope `bytes` against nothing but the trusted `root` and
/// the index it was asked for (`spec/chunk-format.md`, "Verification").
pub fn verify_chunk(root: &Hash, expected_index: u64, bytes: &[u8]) -> Result<VerifiedChunk, ProofError> {
    let v = decode_view(bytes)?;
    let m = v.keys.len();
    let leaves = entry_hashes(v.keys.iter().zip(&v.values).map(|(k, val)| (*k, *val)));
    let tree = inchunk_tree(&leaves);
    let hash = chunk_hash(m, &tree[0]);
    let f = v.path.fold(v.capacity, m, hash);
    if f.root != *root {
        return Err(ProofError::RootMismatch);
    }
    if f.index != expected_index {
        return Err(ProofError::ChunkIndexMismatch);
    }
    if f.key_height != v.key_height {
        return Err(ProofError::KeyHeightMismatch);
    }
    Ok(VerifiedChunk {
        root: *root,
        index: f.index,
        chunk_count: f.chunk_count,
        entry_count: f.entry_count,
        capacity: v.capacity,
        key_height: v.key_height,
        chunk: Chunk::from_verified(&v.keys, &v.values, tree, hash),
        path: v.path,
    })
}
