//! Proofs as plain data, their canonical encodings and their stand-alone
//! verifiers (`spec/proof-format.md`). Verifying needs only the trusted root.

use crate::codec::{check_key, check_value, put_bytes, put_varint, Reader};
use crate::error::ProofError;
use crate::hash::{
    chunk_hash, empty_root, entry_hash, inchunk_links, multiproof_len, multiproof_root, Chain, Hash, Link, Links,
};
use crate::limits::{MAX_KEY_LEN, MAX_RANGE_LIMIT};
use crate::path::{ChunkPath, Folded, Unrooted};

/// Format byte of an existence proof.
pub const FORMAT_EXISTENCE: u8 = 0x01;
/// Format byte of an absence proof.
pub const FORMAT_ABSENCE: u8 = 0x02;
/// Format byte of a range proof.
pub const FORMAT_RANGE: u8 = 0x03;
/// Format byte of a chunk proof.
pub const FORMAT_CHUNK_PROOF: u8 = 0x04;

/// Where one entry sits: its chunk's size, its position there, the in-chunk
/// multiproof and the chunk path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryWitness {
    pub chunk_entries: usize,
    pub position: usize,
    pub inchunk: Vec<Hash>,
    pub path: ChunkPath,
}

/// The authenticated position of a proven entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryPosition {
    pub chunk_index: u64,
    pub position: usize,
    /// Total chunks in the tree.
    pub chunk_count: u64,
    /// Total entries in the tree.
    pub entry_count: u64,
}

impl EntryWitness {
    fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.chunk_entries as u64);
        put_varint(out, self.position as u64);
        for h in &self.inchunk {
            out.extend_from_slice(h);
        }
        self.path.encode(out);
    }

    fn decode(r: &mut Reader, capacity: usize) -> Result<Self, ProofError> {
        let m = r.chunk_size(capacity)?;
        let position = r.varint()?;
        if position >= m as u64 {
            return Err(ProofError::PositionInvalid);
        }
        let position = position as usize;
        let inchunk = r.hashes(multiproof_len(m, position, position + 1))?;
        let path = ChunkPath::decode(r, capacity, m)?;
        Ok(EntryWitness { chunk_entries: m, position, inchunk, path })
    }

    fn fold(&self, capacity: usize, entry: Hash) -> Folded {
        let mut chain = Chain(entry);
        self.links(capacity, &mut chain).with_root(chain.0)
    }

    /// The fold as links, from the entry hash up to the root.
    pub(crate) fn links(&self, capacity: usize, out: &mut impl Links) -> Unrooted {
        let m = self.chunk_entries;
        inchunk_links(m, self.position, &self.inchunk, out);
        out.push(Link::Chunk { entries: m });
        self.path.links(capacity, m, out)
    }

    fn fold_entry(&self, root: &Hash, capacity: usize, key: &[u8], value: &[u8]) -> Result<EntryPosition, ProofError> {
        let f = self.fold(capacity, entry_hash(key, value));
        if f.root != *root {
            return Err(ProofError::RootMismatch);
        }
        Ok(EntryPosition::at(&f, self.position))
    }
}

impl EntryPosition {
    pub(crate) fn at(f: &Folded, position: usize) -> Self {
        EntryPosition { chunk_index: f.index, position, chunk_count: f.chunk_count, entry_count: f.entry_count }
    }
    fn is_first(&self) -> bool {
        self.chunk_index == 0 && self.position == 0
    }
    fn is_last(&self, chunk_entries: usize) -> bool {
        self.chunk_index + 1 == self.chunk_count && self.position + 1 == chunk_entries
    }
}

/// Proof that `key` holds `value` (the value is not in the proof).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistenceProof {
    pub capacity: usize,
    pub witness: EntryWitness,
}

impl ExistenceProof {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_EXISTENCE];
        put_varint(&mut out, self.capacity as u64);
        self.witness.encode(&mut out);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProofError> {
        let mut r = Reader::new(bytes, FORMAT_EXISTENCE)?;
        let capacity = r.capacity()?;
        let witness = EntryWitness::decode(&mut r, capacity)?;
        r.finish()?;
        Ok(ExistenceProof { capacity, witness })
    }

    /// Checks that `key` → `value` is in the tree with root `root`.
    pub fn verify(&self, root: &Hash, key: &[u8], value: &[u8]) -> Result<EntryPosition, ProofError> {
        check_key(key)?;
        check_value(value)?;
        self.witness.fold_entry(root, self.capacity, key, value)
    }
}

/// Decodes `proof` and checks that `key` → `value` is in the tree with root `root`.
pub fn verify_existence(root: &Hash, key: &[u8], value: &[u8], proof: &[u8]) -> Result<EntryPosition, ProofError> {
    check_key(key)?;
    check_value(value)?;
    ExistenceProof::decode(proof)?.verify(root, key, value)
}

/// A neighbour of an absent key, with its witness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub witness: EntryWitness,
}

impl Neighbour {
    fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, &self.key);
        put_bytes(out, &self.value);
        self.witness.encode(out);
    }

    fn decode(r: &mut Reader, capacity: usize) -> Result<Self, ProofError> {
        let key = r.key()?.to_vec();
        let value = r.value()?.to_vec();
        Ok(Neighbour { key, value, witness: EntryWitness::decode(r, capacity)? })
    }

    fn fold(&self, root: &Hash, capacity: usize) -> Result<EntryPosition, ProofError> {
        self.witness.fold_entry(root, capacity, &self.key, &self.value)
    }
}

/// Proof that a key is absent: its neighbours in the tree, where they exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsenceProof {
    pub capacity: usize,
    /// The largest entry below the key.
    pub left: Option<Neighbour>,
    /// The smallest entry above the key.
    pub right: Option<Neighbour>,
}

impl AbsenceProof {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_ABSENCE];
        put_varint(&mut out, self.capacity as u64);
        out.push(self.left.is_some() as u8 | (self.right.is_some() as u8) << 1);
        for n in [&self.left, &self.right].into_iter().flatten() {
            n.encode(&mut out);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProofError> {
        let mut r = Reader::new(bytes, FORMAT_ABSENCE)?;
        let capacity = r.capacity()?;
        let flags = r.u8()?;
        if flags & !0b11 != 0 {
            return Err(ProofError::FlagsInvalid);
        }
        let left = if flags & 1 != 0 { Some(Neighbour::decode(&mut r, capacity)?) } else { None };
        let right = if flags & 2 != 0 { Some(Neighbour::decode(&mut r, capacity)?) } else { None };
        r.finish()?;
        Ok(AbsenceProof { capacity, left, right })
    }

    /// Checks that `key` is not in the tree with root `root`; returns the
    /// proven neighbours.
    pub fn verify(&self, root: &Hash, key: &[u8]) -> Result<AbsenceResult, ProofError> {
        check_key(key)?;
        let (left, right) = (&self.left, &self.right);
        if left.is_none() && right.is_none() {
            return if *root == empty_root(self.capacity) {
                Ok(AbsenceResult { left: None, right: None })
            } else {
                Err(ProofError::RootMismatch)
            };
        }
        let lp = left.as_ref().map(|n| n.fold(root, self.capacity)).transpose()?;
        let rp = right.as_ref().map(|n| n.fold(root, self.capacity)).transpose()?;
        let ok = match (left.as_ref().zip(lp), right.as_ref().zip(rp)) {
            (Some((l, lp)), Some((r, rp))) => {
                l.key.as_slice() < key && key < r.key.as_slice() && adjacent(&l.witness, &lp, &rp)
            }
            (Some((l, lp)), None) => l.key.as_slice() < key && lp.is_last(l.witness.chunk_entries),
            (None, Some((r, rp))) => key < r.key.as_slice() && rp.is_first(),
            (None, None) => unreachable!(),
        };
        if !ok {
            return Err(ProofError::AbsenceInvalid);
        }
        let proven = |n: &Option<Neighbour>, p: Option<EntryPosition>| {
            n.as_ref().zip(p).map(|(n, position)| ProvenNeighbour {
                key: n.key.clone(),
                value: n.value.clone(),
                position,
            })
        };
        Ok(AbsenceResult { left: proven(left, lp), right: proven(right, rp) })
    }
}

/// A neighbour of an absent key and where it sits, authenticated by the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvenNeighbour {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub position: EntryPosition,
}

/// What a verified absence proof yields: the neighbours it proves (none
/// beyond the tree's edge; neither for the empty tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsenceResult {
    /// The largest entry below the key.
    pub left: Option<ProvenNeighbour>,
    /// The smallest entry above the key.
    pub right: Option<ProvenNeighbour>,
}

/// Whether the entry at `b` directly follows the one at `a`.
fn adjacent(a_witness: &EntryWitness, a: &EntryPosition, b: &EntryPosition) -> bool {
    if a.chunk_index == b.chunk_index {
        b.position == a.position + 1
    } else {
        b.chunk_index == a.chunk_index + 1 && a.position + 1 == a_witness.chunk_entries && b.position == 0
    }
}

/// Decodes `proof` and checks that `key` is not in the tree with root `root`;
/// returns the proven neighbours.
pub fn verify_absence(root: &Hash, key: &[u8], proof: &[u8]) -> Result<AbsenceResult, ProofError> {
    check_key(key)?;
    AbsenceProof::decode(proof)?.verify(root, key)
}

/// One chunk's part of a range proof's window: entries `[lo, lo + len)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub chunk_entries: usize,
    pub lo: usize,
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub inchunk: Vec<Hash>,
    pub path: ChunkPath,
}

/// Proof of every entry with `start ≤ key < end`, up to a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeProof {
    pub capacity: usize,
    pub segments: Vec<Segment>,
}

/// What a verified range proof yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeResult {
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// True if no entry of the range was left out.
    pub complete: bool,
    /// When incomplete: the first key not returned, where the next query starts.
    pub resume_key: Option<Vec<u8>>,
}

/// How far a range proof's segment runs in a chunk, from its first key (the
/// window of `spec/proof-format.md`): keys below `start` (the left
/// neighbour) and results while fewer than `limit` are taken, and the first
/// other key at or above `start` (the successor) is taken and ends the
/// proof. Returns the keys taken, the results counted so far, and whether
/// the proof ends in this segment.
pub(crate) fn segment_len<'a>(
    keys: impl Iterator<Item = &'a [u8]>,
    start: &[u8],
    end: Option<&[u8]>,
    limit: usize,
    mut results: usize,
) -> (usize, usize, bool) {
    let mut taken = 0;
    for k in keys {
        taken += 1;
        if k >= start && end.is_none_or(|e| k < e) && results < limit {
            results += 1;
        } else if k >= start {
            return (taken, results, true);
        }
    }
    (taken, results, false)
}

/// Checks a range query as `spec/proof-format.md` orders it.
pub fn check_range_query(start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<(), ProofError> {
    if start.len() > MAX_KEY_LEN {
        return Err(ProofError::KeyTooLong);
    }
    if let Some(end) = end {
        check_key(end)?;
    }
    if limit == 0 || limit > MAX_RANGE_LIMIT || end.is_some_and(|end| end <= start) {
        return Err(ProofError::QueryInvalid);
    }
    Ok(())
}

impl RangeProof {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_RANGE];
        put_varint(&mut out, self.capacity as u64);
        put_varint(&mut out, self.segments.len() as u64);
        for s in &self.segments {
            put_varint(&mut out, s.chunk_entries as u64);
            put_varint(&mut out, s.lo as u64);
            put_varint(&mut out, (s.lo + s.entries.len()) as u64);
            for (k, v) in &s.entries {
                put_bytes(&mut out, k);
                put_bytes(&mut out, v);
            }
            for h in &s.inchunk {
                out.extend_from_slice(h);
            }
            s.path.encode(&mut out);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProofError> {
        let mut r = Reader::new(bytes, FORMAT_RANGE)?;
        let capacity = r.capacity()?;
        let count = r.varint()?;
        let mut segments = Vec::new();
        let mut prev_key: Option<&[u8]> = None;
        for _ in 0..count {
            let m = r.chunk_size(capacity)?;
            let lo = r.varint()?;
            if lo >= m as u64 {
                return Err(ProofError::PositionInvalid);
            }
            let hi = r.varint()?;
            if hi <= lo || hi > m as u64 {
                return Err(ProofError::PositionInvalid);
            }
            let (lo, hi) = (lo as usize, hi as usize);
            let mut entries = Vec::new();
            for _ in lo..hi {
                let key = r.key()?;
                if prev_key.is_some_and(|p| key <= p) {
                    return Err(ProofError::KeysNotSorted);
                }
                prev_key = Some(key);
                entries.push((key.to_vec(), r.value()?.to_vec()));
            }
            let inchunk = r.hashes(multiproof_len(m, lo, hi))?;
            let path = ChunkPath::decode(&mut r, capacity, m)?;
            segments.push(Segment { chunk_entries: m, lo, entries, inchunk, path });
        }
        r.finish()?;
        Ok(RangeProof { capacity, segments })
    }

    /// Checks the proof against `root` for the query `[start, end)` with `limit`.
    pub fn verify(
        &self,
        root: &Hash,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<RangeResult, ProofError> {
        check_range_query(start, end, limit)?;
        let Some(last) = self.segments.last() else {
            return if *root == empty_root(self.capacity) {
                Ok(RangeResult { entries: Vec::new(), complete: true, resume_key: None })
            } else {
                Err(ProofError::RootMismatch)
            };
        };
        let mut folds = Vec::with_capacity(self.segments.len());
        for s in &self.segments {
            let hashes: Vec<Hash> = s.entries.iter().map(|(k, v)| entry_hash(k, v)).collect();
            let inchunk_root = multiproof_root(s.chunk_entries, s.lo, &hashes, &s.inchunk);
            let f = s.path.fold(self.capacity, s.chunk_entries, chunk_hash(s.chunk_entries, &inchunk_root));
            if f.root != *root {
                return Err(ProofError::RootMismatch);
            }
            folds.push(f);
        }
        let contiguous = self.segments.windows(2).zip(folds.windows(2)).all(|(s, f)| {
            f[1].index == f[0].index + 1 && s[0].lo + s[0].entries.len() == s[0].chunk_entries && s[1].lo == 0
        });
        if !contiguous {
            return Err(ProofError::RangeInvalid);
        }
        let starts_tree = folds[0].index == 0 && self.segments[0].lo == 0;
        let last_fold = folds.last().expect("non-empty");
        let ends_tree =
            last_fold.index + 1 == last_fold.chunk_count && last.lo + last.entries.len() == last.chunk_entries;
        let window: Vec<&(Vec<u8>, Vec<u8>)> = self.segments.iter().flat_map(|s| &s.entries).collect();
        check_window(&window, start, end, limit, starts_tree, ends_tree)
    }
}

/// Checks that a contiguous, authenticated window is exactly what a prover
/// builds for the query, and extracts the results.
fn check_window(
    window: &[&(Vec<u8>, Vec<u8>)],
    start: &[u8],
    end: Option<&[u8]>,
    limit: usize,
    starts_tree: bool,
    ends_tree: bool,
) -> Result<RangeResult, ProofError> {
    let below_end = |k: &[u8]| end.is_none_or(|e| k < e);
    let mut i = 0;
    if window[0].0.as_slice() < start {
        i = 1; // the left neighbour
    } else if !starts_tree {
        return Err(ProofError::RangeInvalid);
    }
    let mut entries = Vec::new();
    while i < window.len() && below_end(&window[i].0) && entries.len() < limit {
        if window[i].0.as_slice() < start {
            return Err(ProofError::RangeInvalid);
        }
        entries.push(window[i].clone());
        i += 1;
    }
    match &window[i..] {
        [] if ends_tree => Ok(RangeResult { entries, complete: true, resume_key: None }),
        [(succ, _)] if !below_end(succ) => Ok(RangeResult { entries, complete: true, resume_key: None }),
        [(succ, _)] => Ok(RangeResult { entries, complete: false, resume_key: Some(succ.clone()) }),
        _ => Err(ProofError::RangeInvalid),
    }
}

/// Decodes `proof` and checks it against `root` for the query `[start, end)`.
pub fn verify_range(
    root: &Hash,
    start: &[u8],
    end: Option<&[u8]>,
    limit: usize,
    proof: &[u8],
) -> Result<RangeResult, ProofError> {
    check_range_query(start, end, limit)?;
    RangeProof::decode(proof)?.verify(root, start, end, limit)
}

/// Proof that a chunk with `chunk_entries` entries and in-chunk root
/// `chunk_root` sits at some index of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkProof {
    pub capacity: usize,
    pub chunk_entries: usize,
    pub chunk_root: Hash,
    pub path: ChunkPath,
}

impl ChunkProof {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_CHUNK_PROOF];
        put_varint(&mut out, self.capacity as u64);
        put_varint(&mut out, self.chunk_entries as u64);
        out.extend_from_slice(&self.chunk_root);
        self.path.encode(&mut out);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProofError> {
        let mut r = Reader::new(bytes, FORMAT_CHUNK_PROOF)?;
        let capacity = r.capacity()?;
        let chunk_entries = r.chunk_size(capacity)?;
        let chunk_root = r.hash()?;
        let path = ChunkPath::decode(&mut r, capacity, chunk_entries)?;
        r.finish()?;
        Ok(ChunkProof { capacity, chunk_entries, chunk_root, path })
    }

    /// Checks the proof against `root`; returns the chunk's authenticated
    /// index, the totals and its key-height.
    pub fn verify(&self, root: &Hash) -> Result<Folded, ProofError> {
        let f = self.path.fold(self.capacity, self.chunk_entries, chunk_hash(self.chunk_entries, &self.chunk_root));
        if f.root != *root {
            return Err(ProofError::RootMismatch);
        }
        Ok(f)
    }
}

/// Decodes `proof` and checks it against `root`.
pub fn verify_chunk_proof(root: &Hash, proof: &[u8]) -> Result<Folded, ProofError> {
    ChunkProof::decode(proof)?.verify(root)
}
