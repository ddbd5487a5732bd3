//! Multiproofs (`spec/proof-format.md`, `0x0D`): many keys' values or
//! absences proven at once, with every hash that their single proofs share
//! sent and hashed once. The proof is the AVL tree pruned to the revealed
//! chunks; a verifier hashes it bottom-up, a level at a time, so that in
//! WebAssembly with SIMD the independent hashes of a level run four side by
//! side (`sha256x4`).

use crate::codec::{check_key, put_bytes, put_varint, Reader};
use crate::error::{ProofError, TreeError};
use crate::hash::{
    chunk_preimage, empty_root, inchunk_preimage, inner_preimage, left_size, root_preimage, sparse_outside,
    EntryPreimage, Hash,
};
use crate::limits::{min_fill, MAX_CHUNKS, MAX_ENTRIES, MAX_HEIGHT, MAX_RANGE_LIMIT};
use crate::node::Node;
use crate::proof::{AbsenceProof, EntryWitness, ExistenceProof};
use crate::tree::{descend, tree_error, Snapshot};

/// Format byte of a multiproof.
pub const FORMAT_MULTIPROOF: u8 = 0x0D;
/// Most keys one multiproof answers.
pub const MAX_MULTIPROOF_KEYS: usize = MAX_RANGE_LIMIT;

const TAG_OPAQUE: u8 = 0;
const TAG_OPEN: u8 = 1;
const TAG_REVEALED: u8 = 2;
const TAG_EMPTY: u8 = 3;

/// A node of the pruned AVL tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiNode {
    /// A subtree with nothing revealed: its totals and hash.
    Opaque { chunks: u64, entries: u64, hash: Hash },
    /// An inner node above a revealed chunk.
    Open { height: u8, left: Box<MultiNode>, right: Box<MultiNode> },
    /// A chunk with revealed entries.
    Revealed(RevealedChunk),
}

/// A chunk's revealed entries and the in-chunk hashes of the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevealedChunk {
    pub chunk_entries: usize,
    /// `(position, key, value)`, positions strictly increasing.
    pub entries: Vec<(usize, Vec<u8>, Vec<u8>)>,
    /// `sparse(M, positions)` hashes, in walk order.
    pub inchunk: Vec<Hash>,
}

/// Proof of many keys' values or absences (`None`: the empty tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multiproof {
    pub capacity: usize,
    pub top: Option<MultiNode>,
}

/// What a verified multiproof yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiproofResult {
    /// Per asked key, in order: its value, or `None` when absent.
    pub values: Vec<Option<Vec<u8>>>,
    /// Total chunks in the tree.
    pub chunk_count: u64,
    /// Total entries in the tree.
    pub entry_count: u64,
}

/// `sparse(M, positions)`: how many in-chunk hashes a revealed chunk carries.
pub fn sparse_len(m: usize, positions: &[usize]) -> usize {
    let mut n = 0;
    sparse_outside(m, positions, &mut |_, _, _| n += 1);
    n
}

impl Multiproof {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_MULTIPROOF];
        put_varint(&mut out, self.capacity as u64);
        match &self.top {
            None => out.push(TAG_EMPTY),
            Some(top) => top.encode(&mut out),
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ProofError> {
        let (capacity, top) = decode_with(bytes, &mut Owned)?;
        Ok(Multiproof { capacity, top: top.map(|d| d.node) })
    }

    /// Checks the proof against `root` for `keys` (`spec/proof-format.md`).
    pub fn verify(&self, root: &Hash, keys: &[&[u8]]) -> Result<MultiproofResult, ProofError> {
        verify_multiproof(root, keys, &self.encode())
    }

    /// The multiproof that reveals `entries` (each with its single witness),
    /// the same as `Snapshot::prove_multi` builds from the tree; they need
    /// not be sorted and may repeat.
    fn from_witnesses(capacity: usize, mut entries: Vec<Witnessed>) -> Self {
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        entries.dedup_by(|a, b| a.key == b.key);
        let top = (!entries.is_empty()).then(|| build(&entries, 0));
        Multiproof { capacity, top }
    }

    /// The multiproof for the keys of `answers`, from each key's single proof:
    /// `(key, value, existence proof)` for a present key, `(key, None, absence
    /// proof)` for an absent one (a store proves keys one at a time). The
    /// proofs are the prover's own and are not verified here.
    pub fn from_proofs(answers: &[SingleAnswer]) -> Result<Self, ProofError> {
        let (capacity, per_key) = witnesses_of(answers)?;
        Ok(Multiproof::from_witnesses(capacity, per_key.concat()))
    }

    /// `from_proofs` of the longest prefix of `answers` within `max_bytes`,
    /// encoded, and its length, as `fitting` picks it (a `MULTIPROOF`
    /// answer). Each single proof is decoded once.
    pub fn from_proofs_within(answers: &[SingleAnswer], max_bytes: usize) -> Result<(usize, Vec<u8>), ProofError> {
        let (capacity, per_key) = witnesses_of(answers)?;
        // The single proofs are in memory already: no bound spares building.
        fitting(answers.len(), max_bytes, &[], |k| {
            Ok(Multiproof::from_witnesses(capacity, per_key[..k].concat()).encode())
        })
    }
}

/// The capacity of `answers`' proofs, and per answer the entries it reveals
/// with their witnesses.
fn witnesses_of(answers: &[SingleAnswer]) -> Result<(usize, Vec<Vec<Witnessed>>), ProofError> {
    let mut capacity = None;
    let mut per_key = Vec::with_capacity(answers.len());
    for &(key, value, proof) in answers {
        per_key.push(match value {
            Some(value) => {
                let p = ExistenceProof::decode(proof)?;
                capacity = Some(p.capacity);
                vec![Witnessed { key: key.to_vec(), value: value.to_vec(), witness: p.witness }]
            }
            None => {
                let p = AbsenceProof::decode(proof)?;
                capacity = Some(p.capacity);
                [p.left, p.right]
                    .into_iter()
                    .flatten()
                    .map(|n| Witnessed { key: n.key, value: n.value, witness: n.witness })
                    .collect()
            }
        });
    }
    Ok((capacity.ok_or(ProofError::QueryInvalid)?, per_key))
}

/// One key's single proof: `(key, Some(value), existence proof)` or
/// `(key, None, absence proof)`.
pub type SingleAnswer<'a> = (&'a [u8], Option<&'a [u8]>, &'a [u8]);

/// Decodes `proof` and checks it against `root` for `keys`.
pub fn verify_multiproof(root: &Hash, keys: &[&[u8]], proof: &[u8]) -> Result<MultiproofResult, ProofError> {
    let v = verify_multiproof_views(root, keys, proof)?;
    let values = v.values.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
    Ok(MultiproofResult { values, chunk_count: v.chunk_count, entry_count: v.entry_count })
}

/// `verify_multiproof` with each value a slice of `proof`: nothing copied.
#[derive(Debug)]
pub struct MultiproofViews<'a> {
    pub values: Vec<Option<&'a [u8]>>,
    pub chunk_count: u64,
    pub entry_count: u64,
}

/// `verify_multiproof`, its values borrowed from `proof`. The proof is
/// decoded straight into the hashes to compute; no tree is built.
pub fn verify_multiproof_views<'a>(
    root: &Hash,
    keys: &[&[u8]],
    proof: &'a [u8],
) -> Result<MultiproofViews<'a>, ProofError> {
    check_multiproof_query(keys)?;
    let mut plan = Plan::default();
    let (capacity, top) = decode_with(proof, &mut plan)?;
    // 1. The empty tree.
    let Some(top) = top else {
        if *root != empty_root(capacity) {
            return Err(ProofError::RootMismatch);
        }
        return Ok(MultiproofViews { values: vec![None; keys.len()], chunk_count: 0, entry_count: 0 });
    };
    // 2. The root.
    let (chunks, entries) = (top.chunks, top.entries);
    let root_ref = plan.push(Op::Root { capacity, chunks, entries, top: top.node });
    if plan.run()[root_ref.op()] != *root {
        return Err(ProofError::RootMismatch);
    }
    // 3 and 4.
    let values = answer(keys, &plan.placed, chunks)?;
    Ok(MultiproofViews { values, chunk_count: chunks, entry_count: entries })
}

/// Checks a multiproof query as `spec/proof-format.md` orders it.
pub fn check_multiproof_query(keys: &[&[u8]]) -> Result<(), ProofError> {
    if keys.is_empty() || keys.len() > MAX_MULTIPROOF_KEYS {
        return Err(ProofError::QueryInvalid);
    }
    for (i, key) in keys.iter().enumerate() {
        check_key(key)?;
        if i > 0 && keys[i - 1] >= *key {
            return Err(ProofError::KeysNotSorted);
        }
    }
    Ok(())
}

impl MultiNode {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            MultiNode::Opaque { chunks, entries, hash } => {
                out.push(TAG_OPAQUE);
                put_varint(out, *chunks);
                put_varint(out, *entries);
                out.extend_from_slice(hash);
            }
            MultiNode::Open { height, left, right } => {
                out.push(TAG_OPEN);
                out.push(*height);
                left.encode(out);
                right.encode(out);
            }
            MultiNode::Revealed(c) => {
                out.push(TAG_REVEALED);
                put_varint(out, c.chunk_entries as u64);
                put_varint(out, c.entries.len() as u64);
                for (pos, key, value) in &c.entries {
                    put_varint(out, *pos as u64);
                    put_bytes(out, key);
                    put_bytes(out, value);
                }
                for h in &c.inchunk {
                    out.extend_from_slice(h);
                }
            }
        }
    }
}

/// What the decoder hands over as it reads a proof in pre-order; each
/// callback comes after the checks of its node (`spec/proof-format.md`),
/// and chunks come left to right.
trait Build<'a> {
    type Node;
    fn opaque(&mut self, chunks: u64, entries: u64, hash: Hash) -> Self::Node;
    fn open(&mut self, height: u8, left: Self::Node, right: Self::Node, chunks: u64, entries: u64) -> Self::Node;
    /// `entries` as `(position, key, value)`; `hashes` the in-chunk hashes, 32 bytes each.
    fn revealed(&mut self, m: usize, entries: Vec<(usize, &'a [u8], &'a [u8])>, hashes: &'a [u8]) -> Self::Node;
}

/// A decoded node with its totals.
struct Decoded<N> {
    node: N,
    chunks: u64,
    entries: u64,
    opaque: bool,
}

/// The top node, `None` for the empty tree.
type Top<N> = Option<Decoded<N>>;

/// Decodes a multiproof through `build`: the capacity and the top node
/// (`None`: the empty tree). Every decoding check is here, once.
fn decode_with<'a, B: Build<'a>>(bytes: &'a [u8], build: &mut B) -> Result<(usize, Top<B::Node>), ProofError> {
    let mut r = Reader::new(bytes, FORMAT_MULTIPROOF)?;
    let capacity = r.capacity()?;
    let mut d = Decoder { r, capacity, prev_key: None };
    let top = d.node(None, build)?;
    d.r.finish()?;
    Ok((capacity, top))
}

struct Decoder<'a> {
    r: Reader<'a>,
    capacity: usize,
    prev_key: Option<&'a [u8]>,
}

impl<'a> Decoder<'a> {
    /// A node; `parent` is the parent's height (`None` at the top). `None`
    /// for the empty tree.
    fn node<B: Build<'a>>(&mut self, parent: Option<u8>, b: &mut B) -> Result<Option<Decoded<B::Node>>, ProofError> {
        let d = match (self.r.u8()?, parent) {
            (TAG_EMPTY, None) => return Ok(None),
            (TAG_OPAQUE, Some(_)) => {
                let chunks = self.r.varint()?;
                if chunks == 0 {
                    return Err(ProofError::CountInvalid);
                }
                let entries = self.r.varint()?;
                let lo = chunks.checked_mul(min_fill(self.capacity) as u64);
                let hi = chunks.checked_mul(self.capacity as u64);
                let fits = matches!((lo, hi), (Some(lo), Some(hi)) if lo <= entries && entries <= hi);
                if chunks > MAX_CHUNKS || !fits {
                    return Err(ProofError::CountInvalid);
                }
                let node = b.opaque(chunks, entries, self.r.hash()?);
                Decoded { node, chunks, entries, opaque: true }
            }
            (TAG_OPEN, _) => {
                let height = self.r.u8()?;
                let fits = parent.is_none_or(|p| height < p && p <= height.saturating_add(2));
                if height == 0 || height > MAX_HEIGHT || !fits {
                    return Err(ProofError::HeightInvalid);
                }
                let left = self.node(Some(height), b)?.expect("a child is never the empty tree");
                let right = self.node(Some(height), b)?.expect("a child is never the empty tree");
                if left.opaque && right.opaque {
                    return Err(ProofError::MultiproofInvalid);
                }
                let (chunks, entries) = (left.chunks + right.chunks, left.entries + right.entries);
                let node = b.open(height, left.node, right.node, chunks, entries);
                Decoded { node, chunks, entries, opaque: false }
            }
            (TAG_REVEALED, _) => self.revealed(parent, b)?,
            _ => return Err(ProofError::FlagsInvalid),
        };
        if d.chunks > MAX_CHUNKS || d.entries > MAX_ENTRIES {
            return Err(ProofError::CountInvalid);
        }
        Ok(Some(d))
    }

    fn revealed<B: Build<'a>>(&mut self, parent: Option<u8>, b: &mut B) -> Result<Decoded<B::Node>, ProofError> {
        let m = self.r.chunk_size(self.capacity)?;
        if let Some(parent) = parent {
            if m < min_fill(self.capacity) {
                return Err(ProofError::ChunkFill);
            }
            if parent > 2 {
                return Err(ProofError::HeightInvalid);
            }
        }
        let count = self.r.varint()?;
        if count == 0 || count > m as u64 {
            return Err(ProofError::PositionInvalid);
        }
        // Grown as entries are read, never from the count: a decoder allocates
        // no more than a constant factor of its input (`spec/encoding.md`).
        let mut entries: Vec<(usize, &'a [u8], &'a [u8])> = Vec::new();
        let mut positions = Vec::new();
        for _ in 0..count {
            let pos = self.r.varint()?;
            if pos >= m as u64 || entries.last().is_some_and(|e| pos <= e.0 as u64) {
                return Err(ProofError::PositionInvalid);
            }
            let key = self.r.key()?;
            if self.prev_key.is_some_and(|p| key <= p) {
                return Err(ProofError::KeysNotSorted);
            }
            self.prev_key = Some(key);
            entries.push((pos as usize, key, self.r.value()?));
            positions.push(pos as usize);
        }
        let hashes = self.r.take(sparse_len(m, &positions).checked_mul(32).ok_or(ProofError::Truncated)?)?;
        let node = b.revealed(m, entries, hashes);
        Ok(Decoded { node, chunks: 1, entries: m as u64, opaque: false })
    }
}

/// Builds the owned tree of `Multiproof::decode`.
struct Owned;

impl<'a> Build<'a> for Owned {
    type Node = MultiNode;
    fn opaque(&mut self, chunks: u64, entries: u64, hash: Hash) -> MultiNode {
        MultiNode::Opaque { chunks, entries, hash }
    }
    fn open(&mut self, height: u8, left: MultiNode, right: MultiNode, _: u64, _: u64) -> MultiNode {
        MultiNode::Open { height, left: Box::new(left), right: Box::new(right) }
    }
    fn revealed(&mut self, m: usize, entries: Vec<(usize, &'a [u8], &'a [u8])>, hashes: &'a [u8]) -> MultiNode {
        MultiNode::Revealed(RevealedChunk {
            chunk_entries: m,
            entries: entries.into_iter().map(|(p, k, v)| (p, k.to_vec(), v.to_vec())).collect(),
            inchunk: hashes.chunks_exact(32).map(|h| h.try_into().expect("32 bytes")).collect(),
        })
    }
}

/// A revealed entry and where it sits.
struct Placed<'a> {
    key: &'a [u8],
    value: &'a [u8],
    index: u64,
    position: usize,
    chunk_entries: usize,
}

/// Step 3 and 4 of the verification: each key's value or its absence, and
/// that every revealed entry was needed.
fn answer<'a>(keys: &[&[u8]], revealed: &[Placed<'a>], chunk_count: u64) -> Result<Vec<Option<&'a [u8]>>, ProofError> {
    let adjacent = |a: &Placed, b: &Placed| {
        if a.index == b.index {
            b.position == a.position + 1
        } else {
            b.index == a.index + 1 && a.position + 1 == a.chunk_entries && b.position == 0
        }
    };
    let mut used = vec![false; revealed.len()];
    let mut values = Vec::with_capacity(keys.len());
    let mut i = 0;
    for key in keys {
        while i < revealed.len() && revealed[i].key < *key {
            i += 1;
        }
        if i < revealed.len() && revealed[i].key == *key {
            used[i] = true;
            values.push(Some(revealed[i].value));
            continue;
        }
        let left = i.checked_sub(1).map(|l| &revealed[l]);
        let right = revealed.get(i);
        let ok = match (left, right) {
            (Some(l), Some(r)) => adjacent(l, r),
            (Some(l), None) => l.index + 1 == chunk_count && l.position + 1 == l.chunk_entries,
            (None, Some(r)) => r.index == 0 && r.position == 0,
            (None, None) => false,
        };
        if !ok {
            return Err(ProofError::AbsenceInvalid);
        }
        if left.is_some() {
            used[i - 1] = true;
        }
        if right.is_some() {
            used[i] = true;
        }
        values.push(None);
    }
    if used.contains(&false) {
        return Err(ProofError::MultiproofInvalid);
    }
    Ok(values)
}

/// An operand of a hash: known from the proof, or the result of an op.
#[derive(Clone, Copy)]
enum Ref {
    Known(Hash),
    Op(usize),
}

impl Ref {
    fn op(self) -> usize {
        match self {
            Ref::Op(i) => i,
            Ref::Known(_) => unreachable!("a computed hash"),
        }
    }
}

/// One hash the verifier computes (`spec/hashing.md`).
enum Op<'a> {
    Entry { key: &'a [u8], value: &'a [u8] },
    InChunk { left: Ref, right: Ref },
    Chunk { entries: usize, root: Ref },
    Inner { height: u8, chunks: u64, entries: u64, left: Ref, right: Ref },
    Root { capacity: usize, chunks: u64, entries: u64, top: Ref },
}

impl Op<'_> {
    fn preimage(&self, done: &[Hash], out: &mut Vec<u8>) {
        let get = |r: &Ref| match r {
            Ref::Known(h) => *h,
            Ref::Op(i) => done[*i],
        };
        match self {
            Op::Entry { key, value } => {
                EntryPreimage::new(key, value).parts().iter().for_each(|part| out.extend_from_slice(part))
            }
            Op::InChunk { left, right } => out.extend_from_slice(&inchunk_preimage(&get(left), &get(right))),
            Op::Chunk { entries, root } => out.extend_from_slice(&chunk_preimage(*entries, &get(root))),
            Op::Inner { height, chunks, entries, left, right } => {
                out.extend_from_slice(&inner_preimage(*height, *chunks, *entries, &get(left), &get(right)))
            }
            Op::Root { capacity, chunks, entries, top } => {
                out.extend_from_slice(&root_preimage(*capacity, *chunks, *entries, &get(top)))
            }
        }
    }
}

/// The hashes of a proof as a graph of ops, each after the ops it needs.
#[derive(Default)]
struct Plan<'a> {
    ops: Vec<Op<'a>>,
    /// Per op, 1 + the level of the deepest op it needs (0 for none).
    levels: Vec<u32>,
    /// Chunks left of the next one decoded.
    index: u64,
    /// The revealed entries, in key order.
    placed: Vec<Placed<'a>>,
}

impl<'a> Build<'a> for Plan<'a> {
    type Node = Ref;
    fn opaque(&mut self, chunks: u64, _: u64, hash: Hash) -> Ref {
        self.index += chunks;
        Ref::Known(hash)
    }
    fn open(&mut self, height: u8, left: Ref, right: Ref, chunks: u64, entries: u64) -> Ref {
        self.push(Op::Inner { height, chunks, entries, left, right })
    }
    fn revealed(&mut self, m: usize, entries: Vec<(usize, &'a [u8], &'a [u8])>, hashes: &'a [u8]) -> Ref {
        let mut leaves = Vec::with_capacity(entries.len());
        for (position, key, value) in entries {
            self.placed.push(Placed { key, value, index: self.index, position, chunk_entries: m });
            leaves.push((position, self.push(Op::Entry { key, value })));
        }
        self.index += 1;
        let root = self.inchunk(0, m, &leaves, &mut hashes.chunks_exact(32));
        self.push(Op::Chunk { entries: m, root })
    }
}

impl<'a> Plan<'a> {
    fn push(&mut self, op: Op<'a>) -> Ref {
        let level = |r: &Ref| match r {
            Ref::Op(i) => self.levels[*i] + 1,
            Ref::Known(_) => 0,
        };
        let level = match &op {
            Op::Entry { .. } => 0,
            Op::InChunk { left, right } | Op::Inner { left, right, .. } => level(left).max(level(right)),
            Op::Chunk { root: r, .. } | Op::Root { top: r, .. } => level(r),
        };
        self.ops.push(op);
        self.levels.push(level);
        Ref::Op(self.ops.len() - 1)
    }

    /// The in-chunk walk over leaves `[a, a + n)`, with `leaves` the revealed
    /// ones among them.
    fn inchunk(
        &mut self,
        a: usize,
        n: usize,
        leaves: &[(usize, Ref)],
        hashes: &mut std::slice::ChunksExact<u8>,
    ) -> Ref {
        if leaves.is_empty() {
            return Ref::Known(hashes.next().expect("sparse_len hashes").try_into().expect("32 bytes"));
        }
        if n == 1 {
            return leaves[0].1;
        }
        let k = left_size(n);
        let split = leaves.partition_point(|&(p, _)| p < a + k);
        let left = self.inchunk(a, k, &leaves[..split], hashes);
        let right = self.inchunk(a + k, n - k, &leaves[split..], hashes);
        self.push(Op::InChunk { left, right })
    }

    /// Every op's hash. Natively one at a time, in order; in WebAssembly with
    /// SIMD a level at a time, the ops of a level being independent.
    fn run(&self) -> Vec<Hash> {
        let mut done = vec![[0u8; 32]; self.ops.len()];
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            let top = self.levels.iter().copied().max().unwrap_or(0);
            let mut by_level: Vec<Vec<usize>> = vec![Vec::new(); top as usize + 1];
            for (i, &l) in self.levels.iter().enumerate() {
                by_level[l as usize].push(i);
            }
            for level in by_level {
                let hashes = crate::sha256x4::digests(level.len(), |j, out| self.ops[level[j]].preimage(&done, out));
                for (i, h) in level.into_iter().zip(hashes) {
                    done[i] = h;
                }
            }
        }
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        {
            use sha2::{Digest, Sha256};
            let mut buf = Vec::with_capacity(128);
            for (i, op) in self.ops.iter().enumerate() {
                buf.clear();
                op.preimage(&done, &mut buf);
                done[i] = Sha256::digest(&buf).into();
            }
        }
        done
    }
}

/// An entry to reveal, with its single witness.
#[derive(Debug, Clone)]
struct Witnessed {
    key: Vec<u8>,
    value: Vec<u8>,
    witness: EntryWitness,
}

impl Witnessed {
    /// The path step `depth` levels below the top, if the path is that long.
    fn step(&self, depth: usize) -> Option<&crate::path::PathStep> {
        let steps = &self.witness.path.steps;
        steps.len().checked_sub(depth + 1).map(|i| &steps[i])
    }
}

/// The pruned subtree over `entries` (sorted, distinct), whose paths agree
/// on their top `depth` steps.
fn build(entries: &[Witnessed], depth: usize) -> MultiNode {
    let Some(step) = entries[0].step(depth) else {
        return MultiNode::Revealed(reveal(entries));
    };
    // An entry whose sibling here is on the left is in the right subtree.
    let split = entries.partition_point(|e| !e.step(depth).expect("same depth").sibling_is_left);
    let (left, right) = entries.split_at(split);
    let side = |group: &[Witnessed], other: &[Witnessed]| {
        if group.is_empty() {
            let s = other[0].step(depth).expect("same depth");
            MultiNode::Opaque { chunks: s.sibling_chunks, entries: s.sibling_entries, hash: s.sibling_hash }
        } else {
            build(group, depth + 1)
        }
    };
    MultiNode::Open {
        height: step.parent_height,
        left: Box::new(side(left, right)),
        right: Box::new(side(right, left)),
    }
}

/// The revealed chunk of `entries`, all of one chunk: their in-chunk
/// hashes merged from each one's single-leaf multiproof.
fn reveal(entries: &[Witnessed]) -> RevealedChunk {
    let m = entries[0].witness.chunk_entries;
    let mut known: Vec<((usize, usize), Hash)> = Vec::new();
    for e in entries {
        let mut hashes = e.witness.inchunk.iter();
        sparse_outside(m, &[e.witness.position], &mut |_, a, n| {
            known.push(((a, n), *hashes.next().expect("one hash per subtree")))
        });
    }
    let positions: Vec<usize> = entries.iter().map(|e| e.witness.position).collect();
    let mut inchunk = Vec::new();
    sparse_outside(m, &positions, &mut |_, a, n| {
        inchunk.push(known.iter().find(|(at, _)| *at == (a, n)).expect("a sibling of a revealed leaf").1)
    });
    let entries = entries.iter().map(|e| (e.witness.position, e.key.clone(), e.value.clone())).collect();
    RevealedChunk { chunk_entries: m, entries, inchunk }
}

impl Snapshot {
    /// The multiproof for `keys` (in any order, repeats allowed): each
    /// present key's entry, and each absent key's neighbours. Built top-down
    /// from the tree: the entries' global positions, then the AVL nodes
    /// above them opened and every other subtree left opaque.
    pub fn prove_multi(&self, keys: &[&[u8]]) -> Result<Multiproof, TreeError> {
        let per_key = self.revealed_per_key(keys)?;
        Ok(self.pruned(&per_key))
    }

    /// The encoded multiproof of the longest prefix `keys[..k]` within
    /// `max_bytes`, and k, as `fitting` picks it (a `MULTIPROOF` answer).
    /// Each key is looked up once, and no prefix whose entries alone exceed
    /// the limit is built, so the work holds about `max_bytes`, not the
    /// whole asked answer.
    pub fn prove_multi_within(&self, keys: &[&[u8]], max_bytes: usize) -> Result<(usize, Vec<u8>), TreeError> {
        let per_key = self.revealed_per_key(keys)?;
        let bounds = self.entry_bytes(&per_key);
        fitting(keys.len(), max_bytes, &bounds, |k| Ok(self.pruned(&per_key[..k]).encode()))
    }

    fn revealed_per_key(&self, keys: &[&[u8]]) -> Result<Vec<Vec<(u64, usize)>>, TreeError> {
        keys.iter().map(|key| self.revealed_for(key)).collect()
    }

    /// The multiproof revealing the positions of `per_key`.
    fn pruned(&self, per_key: &[Vec<(u64, usize)>]) -> Multiproof {
        let mut at: Vec<(u64, usize)> = per_key.concat();
        at.sort_unstable();
        at.dedup();
        let top = self.top.as_ref().map(|top| prune(top, &at, 0));
        Multiproof { capacity: self.capacity, top }
    }

    /// Per prefix of `per_key`, the key and value bytes of the entries it
    /// reveals, each once: a lower bound on its multiproof's encoded size.
    fn entry_bytes(&self, per_key: &[Vec<(u64, usize)>]) -> Vec<usize> {
        let mut seen = std::collections::BTreeSet::new();
        let mut total = 0;
        let mut out = Vec::with_capacity(per_key.len());
        for at in per_key {
            for &(index, position) in at {
                if seen.insert((index, position)) {
                    let c = self.top.as_ref().expect("a revealed entry").chunk_at(index);
                    total += c.key(position).len() + c.value(position).len();
                }
            }
            out.push(total);
        }
        out
    }

    /// The global positions a multiproof reveals for `key`: its entry, or
    /// its neighbours (none in the empty tree).
    fn revealed_for(&self, key: &[u8]) -> Result<Vec<(u64, usize)>, TreeError> {
        check_key(key).map_err(tree_error)?;
        let Some(top) = self.top.as_ref() else { return Ok(Vec::new()) };
        Ok(match descend(top, key) {
            (index, Ok(position)) => vec![(index, position)],
            _ => {
                let (left, right) = self.neighbours(key);
                left.into_iter().chain(right).collect()
            }
        })
    }
}

/// The pruned tree of `node` (its first chunk is chunk `base`), revealing
/// the entries at `at` (sorted, all inside it, at least one).
fn prune(node: &Node, at: &[(u64, usize)], base: u64) -> MultiNode {
    match node {
        Node::Leaf(c) => {
            let positions: Vec<usize> = at.iter().map(|&(_, p)| p).collect();
            let entries = positions.iter().map(|&p| (p, c.key(p).to_vec(), c.value(p).to_vec())).collect();
            MultiNode::Revealed(RevealedChunk {
                chunk_entries: c.len(),
                entries,
                inchunk: c.sparse_multiproof(&positions),
            })
        }
        Node::Stub(_) => unreachable!("proofs come from loaded snapshots"),
        Node::Inner(n) => {
            let split = base + n.left.chunks();
            let (left, right) = at.split_at(at.partition_point(|&(i, _)| i < split));
            let side = |child: &Node, at: &[(u64, usize)], base: u64| {
                if at.is_empty() {
                    MultiNode::Opaque { chunks: child.chunks(), entries: child.entries(), hash: child.hash() }
                } else {
                    prune(child, at, base)
                }
            };
            MultiNode::Open {
                height: n.height,
                left: Box::new(side(&n.left, left, base)),
                right: Box::new(side(&n.right, right, split)),
            }
        }
    }
}

/// The multiproof of the longest prefix `keys[..k]` (k ≥ 1) whose encoding
/// is at most `max_bytes`, with k: all of `keys` when that fits, else the
/// largest k that fits (one key always counts as fitting). `prove` builds
/// the multiproof of a prefix; `lower_bounds[k − 1]`, where given, is at
/// most the size of prefix k's, so a prefix that cannot fit is never built.
fn fitting<E>(
    keys: usize,
    max_bytes: usize,
    lower_bounds: &[usize],
    mut prove: impl FnMut(usize) -> Result<Vec<u8>, E>,
) -> Result<(usize, Vec<u8>), E> {
    let top = (1..=keys).rev().find(|&k| lower_bounds.get(k - 1).is_none_or(|&b| b <= max_bytes)).unwrap_or(1);
    let first = prove(top)?;
    if first.len() <= max_bytes || top <= 1 {
        return Ok((top, first));
    }
    // The size grows with k: binary search for the largest k that fits.
    let (mut lo, mut hi) = (1, top);
    let mut best = (1, prove(1)?);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let bytes = prove(mid)?;
        if bytes.len() <= max_bytes {
            (lo, best) = (mid, (mid, bytes));
        } else {
            hi = mid;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tree;

    fn tree(n: u32, capacity: usize) -> Tree {
        let mut t = Tree::new(capacity).unwrap();
        for i in 0..n {
            t.insert(format!("k{:05}", i * 2).as_bytes(), &vec![i as u8; (i % 50) as usize]).unwrap();
        }
        t.commit();
        t
    }

    fn keys(list: &[String]) -> Vec<&[u8]> {
        list.iter().map(|k| k.as_bytes()).collect()
    }

    #[test]
    fn proves_values_and_absences_like_single_proofs() {
        for (n, c) in [(0, 4), (1, 4), (3, 2), (500, 4), (2000, 16)] {
            let t = tree(n, c);
            let root = t.head().root();
            let mut asked: Vec<String> = (0..2 * n + 3).step_by(7).map(|i| format!("k{i:05}")).collect();
            asked.extend(["a".to_string(), "z".to_string()]);
            asked.sort();
            let ks = keys(&asked);
            let proof = t.head().prove_multi(&ks).unwrap();
            let bytes = proof.encode();
            assert_eq!(Multiproof::decode(&bytes).unwrap(), proof);
            let got = verify_multiproof(&root, &ks, &bytes).unwrap();
            let want: Vec<_> = ks.iter().map(|k| t.get(k).map(<[u8]>::to_vec)).collect();
            assert_eq!(got.values, want, "n={n} c={c}");
            // The same from the single proofs.
            #[allow(clippy::type_complexity)]
            let singles: Vec<(Vec<u8>, Option<Vec<u8>>, Vec<u8>)> = ks
                .iter()
                .map(|k| match t.get(k) {
                    Some(v) => (k.to_vec(), Some(v.to_vec()), t.head().prove_existence(k).unwrap().encode()),
                    None => (k.to_vec(), None, t.head().prove_absence(k).unwrap().encode()),
                })
                .collect();
            let answers: Vec<_> = singles.iter().map(|(k, v, p)| (k.as_slice(), v.as_deref(), p.as_slice())).collect();
            if n > 0 {
                assert_eq!(Multiproof::from_proofs(&answers).unwrap(), proof);
            }
            // Fewer bytes than the single proofs once paths are shared.
            let single_bytes: usize = singles.iter().map(|s| s.2.len() + s.1.as_ref().map_or(0, Vec::len)).sum();
            if n >= 500 {
                assert!(bytes.len() < single_bytes, "{} vs {single_bytes}", bytes.len());
            }
        }
    }

    #[test]
    fn rejects_tampering_and_other_queries() {
        let t = tree(500, 4);
        let root = t.head().root();
        let asked: Vec<String> = ["k00010", "k00011", "k00500", "k00999"].map(String::from).to_vec();
        let ks = keys(&asked);
        let bytes = t.head().prove_multi(&ks).unwrap().encode();
        verify_multiproof(&root, &ks, &bytes).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(verify_multiproof(&root, &ks, &bad).is_err(), "byte {i}");
        }
        let fewer = &ks[..3];
        assert_eq!(verify_multiproof(&root, fewer, &bytes).unwrap_err(), ProofError::MultiproofInvalid);
        let other: Vec<&[u8]> = vec![b"k00010", b"k00013", b"k00500", b"k00999"];
        assert_eq!(verify_multiproof(&root, &other, &bytes).unwrap_err(), ProofError::AbsenceInvalid);
        let unsorted: Vec<&[u8]> = vec![b"k00011", b"k00010"];
        assert_eq!(verify_multiproof(&root, &unsorted, &bytes).unwrap_err(), ProofError::KeysNotSorted);
        assert_eq!(verify_multiproof(&root, &[], &bytes).unwrap_err(), ProofError::QueryInvalid);
    }

    #[test]
    fn fitting_takes_the_longest_prefix_that_fits() {
        let sizes = [10, 25, 40, 70, 90];
        let prove = |k: usize| Ok::<_, ()>(vec![0; sizes[k - 1]]);
        assert_eq!(fitting(5, 100, &[], prove).unwrap().0, 5);
        assert_eq!(fitting(5, 69, &[], prove).unwrap().0, 3);
        assert_eq!(fitting(5, 5, &[], prove).unwrap().0, 1);
        // With lower bounds, no prefix that cannot fit is built.
        let built = std::cell::RefCell::new(Vec::new());
        let counting = |k: usize| {
            built.borrow_mut().push(k);
            prove(k)
        };
        assert_eq!(fitting(5, 69, &[5, 20, 30, 60, 80], counting).unwrap().0, 3);
        assert!(built.borrow().iter().all(|&k| k <= 4), "{:?}", built.borrow());
    }

    #[test]
    fn entry_bytes_bound_each_prefix_from_below() {
        let t = tree(500, 4);
        let asked: Vec<String> = ["a", "k00010", "k00011", "k00500", "k00999"].map(String::from).to_vec();
        let ks = keys(&asked);
        let bounds = t.head().entry_bytes(&t.head().revealed_per_key(&ks).unwrap());
        for k in 1..=ks.len() {
            let size = t.head().prove_multi(&ks[..k]).unwrap().encode().len();
            assert!(bounds[k - 1] <= size, "prefix {k}: {} > {size}", bounds[k - 1]);
            assert!(k == 1 || bounds[k - 1] >= bounds[k - 2]);
            // Within exactly this prefix's size, the prefix is what fits.
            assert_eq!(
                t.head().prove_multi_within(&ks, size).unwrap(),
                (k, t.head().prove_multi(&ks[..k]).unwrap().encode())
            );
        }
    }
}
