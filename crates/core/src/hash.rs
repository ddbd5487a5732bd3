//! Node hashes and the in-chunk Merkle tree, as specified in `spec/hashing.md`.
//!
//! Every node kind has its own one-byte domain tag, and every variable-length
//! field is length-prefixed, so no two kinds of preimage can collide.

use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

const TAG_ENTRY: u8 = 0x00;
const TAG_INCHUNK: u8 = 0x01;
const TAG_CHUNK: u8 = 0x02;
const TAG_INNER: u8 = 0x03;
const TAG_ROOT: u8 = 0x04;

/// `H(0x00 ‖ u32be(len k) ‖ k ‖ u32be(len v) ‖ v)`.
pub fn entry_hash(key: &[u8], value: &[u8]) -> Hash {
    let mut h = Sha256::new();
    for part in EntryPreimage::new(key, value).parts() {
        h.update(part);
    }
    h.finalize().into()
}

/// An entry's preimage as the parts it is made of, without copying the entry.
pub(crate) struct EntryPreimage<'a> {
    head: [u8; 5],
    key: &'a [u8],
    value_len: [u8; 4],
    value: &'a [u8],
}

impl<'a> EntryPreimage<'a> {
    pub(crate) fn new(key: &'a [u8], value: &'a [u8]) -> Self {
        let mut head = [TAG_ENTRY, 0, 0, 0, 0];
        head[1..].copy_from_slice(&(key.len() as u32).to_be_bytes());
        EntryPreimage { head, key, value_len: (value.len() as u32).to_be_bytes(), value }
    }

    pub(crate) fn parts(&self) -> [&[u8]; 4] {
        [&self.head, self.key, &self.value_len, self.value]
    }
}

/// `entry_hash` of every entry, in order.
pub fn entry_hashes<'a>(entries: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<Hash> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        let entries: Vec<(&[u8], &[u8])> = entries.collect();
        crate::sha256x4::digests(entries.len(), |i, out| {
            EntryPreimage::new(entries[i].0, entries[i].1).parts().iter().for_each(|part| out.extend_from_slice(part))
        })
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    entries.map(|(k, v)| entry_hash(k, v)).collect()
}

/// `H(0x01 ‖ left ‖ right)`: an inner node of the in-chunk tree.
pub fn inchunk_node(left: &Hash, right: &Hash) -> Hash {
    Sha256::digest(inchunk_preimage(left, right)).into()
}

pub(crate) fn inchunk_preimage(left: &Hash, right: &Hash) -> [u8; 65] {
    let mut buf = [0u8; 65];
    buf[0] = TAG_INCHUNK;
    buf[1..33].copy_from_slice(left);
    buf[33..].copy_from_slice(right);
    buf
}

/// `H(0x02 ‖ u32be(M) ‖ chunk_root)`: a chunk, the leaf of the AVL tree.
pub fn chunk_hash(entries: usize, chunk_root: &Hash) -> Hash {
    Sha256::digest(chunk_preimage(entries, chunk_root)).into()
}

pub(crate) fn chunk_preimage(entries: usize, chunk_root: &Hash) -> [u8; 37] {
    let mut buf = [0u8; 37];
    buf[0] = TAG_CHUNK;
    buf[1..5].copy_from_slice(&(entries as u32).to_be_bytes());
    buf[5..].copy_from_slice(chunk_root);
    buf
}

/// `H(0x03 ‖ u8(height) ‖ u64be(chunks) ‖ u64be(entries) ‖ left ‖ right)`.
pub fn inner_hash(height: u8, chunks: u64, entries: u64, left: &Hash, right: &Hash) -> Hash {
    Sha256::digest(inner_preimage(height, chunks, entries, left, right)).into()
}

pub(crate) fn inner_preimage(height: u8, chunks: u64, entries: u64, left: &Hash, right: &Hash) -> [u8; 82] {
    let mut buf = [0u8; 82];
    buf[0] = TAG_INNER;
    buf[1] = height;
    buf[2..10].copy_from_slice(&chunks.to_be_bytes());
    buf[10..18].copy_from_slice(&entries.to_be_bytes());
    buf[18..50].copy_from_slice(left);
    buf[50..].copy_from_slice(right);
    buf
}

/// `H(0x04 ‖ u32be(C) ‖ u64be(chunks) ‖ u64be(entries) ‖ top)`: the tree root.
pub fn root_hash(capacity: usize, chunks: u64, entries: u64, top: &Hash) -> Hash {
    Sha256::digest(root_preimage(capacity, chunks, entries, top)).into()
}

pub(crate) fn root_preimage(capacity: usize, chunks: u64, entries: u64, top: &Hash) -> [u8; 53] {
    let mut buf = [0u8; 53];
    buf[0] = TAG_ROOT;
    buf[1..5].copy_from_slice(&(capacity as u32).to_be_bytes());
    buf[5..13].copy_from_slice(&chunks.to_be_bytes());
    buf[13..21].copy_from_slice(&entries.to_be_bytes());
    buf[21..].copy_from_slice(top);
    buf
}

/// The root of the empty tree of capacity `capacity`.
pub fn empty_root(capacity: usize) -> Hash {
    root_hash(capacity, 0, 0, &[0u8; 32])
}

/// One step of folding a proof upwards: a node on the path, all of it known
/// but the hash of the node below it. A proof's fold is a chain of links, so
/// it can be hashed at once (`Chain`) or queued beside other proofs' chains
/// (`sha256x4`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// An in-chunk node whose other child is `sibling`.
    InChunk { sibling: Hash, sibling_is_left: bool },
    /// The chunk over the in-chunk root of a chunk of `entries` entries.
    Chunk { entries: usize },
    /// An inner node whose other child is `sibling`.
    Inner { height: u8, chunks: u64, entries: u64, sibling: Hash, sibling_is_left: bool },
    /// The tree root over the top node.
    Root { capacity: usize, chunks: u64, entries: u64 },
}

impl Link {
    /// This node's hash, given the hash of the node below.
    pub(crate) fn hash(&self, below: &Hash) -> Hash {
        match self {
            Link::InChunk { sibling, sibling_is_left: true } => inchunk_node(sibling, below),
            Link::InChunk { sibling, sibling_is_left: false } => inchunk_node(below, sibling),
            Link::Chunk { entries } => chunk_hash(*entries, below),
            Link::Inner { height, chunks, entries, sibling, sibling_is_left: true } => {
                inner_hash(*height, *chunks, *entries, sibling, below)
            }
            Link::Inner { height, chunks, entries, sibling, sibling_is_left: false } => {
                inner_hash(*height, *chunks, *entries, below, sibling)
            }
            Link::Root { capacity, chunks, entries } => root_hash(*capacity, *chunks, *entries, below),
        }
    }

    /// Appends this node's preimage, given the hash of the node below.
    #[cfg(any(test, all(target_arch = "wasm32", target_feature = "simd128")))]
    pub(crate) fn preimage(&self, below: &Hash, out: &mut Vec<u8>) {
        match self {
            Link::InChunk { sibling, sibling_is_left: true } => {
                out.extend_from_slice(&inchunk_preimage(sibling, below))
            }
            Link::InChunk { sibling, sibling_is_left: false } => {
                out.extend_from_slice(&inchunk_preimage(below, sibling))
            }
            Link::Chunk { entries } => out.extend_from_slice(&chunk_preimage(*entries, below)),
            Link::Inner { height, chunks, entries, sibling, sibling_is_left: true } => {
                out.extend_from_slice(&inner_preimage(*height, *chunks, *entries, sibling, below))
            }
            Link::Inner { height, chunks, entries, sibling, sibling_is_left: false } => {
                out.extend_from_slice(&inner_preimage(*height, *chunks, *entries, below, sibling))
            }
            Link::Root { capacity, chunks, entries } => {
                out.extend_from_slice(&root_preimage(*capacity, *chunks, *entries, below))
            }
        }
    }
}

/// Where a fold puts its links.
pub(crate) trait Links {
    fn push(&mut self, link: Link);
}

/// Hashes each link as it comes: the running hash is the fold so far.
pub(crate) struct Chain(pub(crate) Hash);

impl Links for Chain {
    fn push(&mut self, link: Link) {
        self.0 = link.hash(&self.0);
    }
}

/// Collects the links, to be hashed later beside other chains.
#[cfg(any(test, all(target_arch = "wasm32", target_feature = "simd128")))]
impl Links for Vec<Link> {
    fn push(&mut self, link: Link) {
        Vec::push(self, link);
    }
}

/// The largest power of two strictly less than `n` (`n ≥ 2`): the size of the
/// left subtree of an in-chunk node over `n` leaves.
pub(crate) fn left_size(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// `inchunk_node` over each adjacent pair `(level[2i], level[2i+1])`.
fn hash_pairs(level: &[Hash]) -> Vec<Hash> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::sha256x4::digests(level.len() / 2, |i, out| {
        out.extend_from_slice(&inchunk_preimage(&level[2 * i], &level[2 * i + 1]))
    });
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    level.chunks_exact(2).map(|pair| inchunk_node(&pair[0], &pair[1])).collect()
}

/// The whole in-chunk tree over one or more entry hashes, as a flat array of
/// `2M − 1` hashes in pre-order: a node over `n` leaves at index `p` has its
/// left child at `p + 1` and its right child at `p + 2k` (`k` = left size).
/// `tree[0]` is the chunk root, `mth(leaves)`.
///
/// It is computed level by level, so each level's hashes are independent (and
/// batched where that is faster): level `l + 1` pairs up level `l` and carries
/// an odd last node up unchanged. Node `i` of level `l` is then the MTH of
/// leaves `[i·2^l, min((i+1)·2^l, M))`, which is exactly the set an RFC 6962
/// subtree over `[a, a + n)` covers, at `l = ⌈log2 n⌉` and `i = a >> l`.
pub fn inchunk_tree(leaves: &[Hash]) -> Vec<Hash> {
    preorder(&inchunk_levels(leaves))
}

/// The pre-order in-chunk tree ([`inchunk_tree`]) of its levels ([`inchunk_levels`]).
pub(crate) fn preorder(levels: &[Vec<Hash>]) -> Vec<Hash> {
    fn fill(levels: &[Vec<Hash>], a: usize, n: usize, out: &mut [Hash]) {
        let level = subtree_level(n);
        out[0] = levels[level][a >> level];
        if n > 1 {
            let k = left_size(n);
            let (left, right) = out[1..].split_at_mut(2 * k - 1);
            fill(levels, a, k, left);
            fill(levels, a + k, n - k, right);
        }
    }
    let m = levels[0].len();
    let mut out = vec![[0u8; 32]; 2 * m - 1];
    fill(levels, 0, m, &mut out);
    out
}

/// The in-chunk tree over one or more entry hashes level by level, the
/// leaves first and the chunk root last: node `i` of level `l` is the MTH of
/// leaves `[i·2^l, min((i+1)·2^l, M))` (see [`inchunk_tree`]).
pub(crate) fn inchunk_levels(leaves: &[Hash]) -> Vec<Vec<Hash>> {
    assert!(!leaves.is_empty(), "a chunk holds at least one entry");
    let mut levels = vec![leaves.to_vec()];
    while let Some(level) = levels.last().filter(|l| l.len() > 1) {
        let mut up = hash_pairs(level);
        if level.len() % 2 == 1 {
            up.push(level[level.len() - 1]);
        }
        levels.push(up);
    }
    levels
}

/// The level of the in-chunk tree whose nodes a stored chunk keeps (its
/// **groups**: node `j` is the MTH of leaves `[16j, min(16j + 16, M))`), so
/// that a reader checks the chunk hash from about M/16 of them and hashes the
/// leaves of a group only when it uses that group (`spec/store-format.md`).
pub const GROUP_LEVEL: usize = 4;
pub const GROUP_LEAVES: usize = 1 << GROUP_LEVEL;

/// How many groups a chunk of `m` entries has.
pub fn group_count(m: usize) -> usize {
    m.div_ceil(GROUP_LEAVES)
}

/// The group nodes of an in-chunk tree given level by level
/// ([`inchunk_levels`]); a chunk of at most 16 entries has one, its root.
pub(crate) fn group_level(levels: &[Vec<Hash>]) -> &[Hash] {
    &levels[GROUP_LEVEL.min(levels.len() - 1)]
}

/// The group nodes of a pre-order in-chunk tree over `m` leaves ([`inchunk_tree`]).
pub(crate) fn group_roots(tree: &[Hash], m: usize) -> Vec<Hash> {
    fn walk(tree: &[Hash], p: usize, n: usize, out: &mut Vec<Hash>) {
        // Every split above a group is at a multiple of 16 (a left size of 16 or more).
        if n <= GROUP_LEAVES {
            out.push(tree[p]);
        } else {
            let k = left_size(n);
            walk(tree, p + 1, k, out);
            walk(tree, p + 2 * k, n - k, out);
        }
    }
    let mut out = Vec::with_capacity(group_count(m));
    walk(tree, 0, m, &mut out);
    out
}

/// The pre-order in-chunk tree over `m` leaves ([`inchunk_tree`]) with
/// only its group nodes and the nodes above them, from `upper`, the levels
/// over the groups (`inchunk_levels(groups)`): the nodes inside each group
/// stay zero until [`fill_group`] checks the group's leaves.
pub(crate) fn preorder_above_groups(upper: &[Vec<Hash>], m: usize) -> Vec<Hash> {
    fn fill(upper: &[Vec<Hash>], a: usize, n: usize, out: &mut [Hash]) {
        if n <= GROUP_LEAVES {
            out[0] = upper[0][a / GROUP_LEAVES];
            return;
        }
        let level = subtree_level(n);
        out[0] = upper[level - GROUP_LEVEL][a >> level];
        let k = left_size(n);
        let (left, right) = out[1..].split_at_mut(2 * k - 1);
        fill(upper, a, k, left);
        fill(upper, a + k, n - k, right);
    }
    let mut out = vec![[0u8; 32]; 2 * m - 1];
    fill(upper, 0, m, &mut out);
    out
}

/// Checks `leaves`, those of group `j` (leaves `[16j, min(16j + 16, m))`),
/// against the group's node in the pre-order in-chunk tree `tree` over `m`
/// leaves, and on success puts the group's own nodes in (the subtree of a
/// node is a contiguous run of the pre-order). `false`: they do not hash to
/// it, and `tree` is unchanged.
pub(crate) fn fill_group(tree: &mut [Hash], m: usize, j: usize, leaves: &[Hash]) -> bool {
    let (mut p, mut a, mut n) = (0, 0, m);
    while n > GROUP_LEAVES {
        let k = left_size(n);
        if j * GROUP_LEAVES < a + k {
            (p, n) = (p + 1, k);
        } else {
            (p, a, n) = (p + 2 * k, a + k, n - k);
        }
    }
    debug_assert_eq!((a, n), (j * GROUP_LEAVES, leaves.len()), "every split above a group is at a multiple of 16");
    let group = inchunk_tree(leaves);
    if group[0] != tree[p] {
        return false;
    }
    tree[p..p + 2 * n - 1].copy_from_slice(&group);
    true
}

/// The level of the in-chunk tree that holds the subtree over `n` leaves:
/// `⌈log2 n⌉`.
pub(crate) fn subtree_level(n: usize) -> usize {
    (usize::BITS - (n - 1).leading_zeros()) as usize
}

/// Sets leaf `i` of the pre-order in-chunk tree `tree` over `m` leaves
/// (`inchunk_tree`) to `leaf` and rehashes its path to the root: ⌈log2 m⌉
/// hashes where rebuilding the tree would take m − 1.
pub(crate) fn update_inchunk_leaf(tree: &mut [Hash], m: usize, i: usize, leaf: Hash) {
    let (mut p, mut a, mut n) = (0, 0, m);
    let mut path = Vec::with_capacity(16);
    while n > 1 {
        path.push((p, n));
        let k = left_size(n);
        if i < a + k {
            (p, n) = (p + 1, k);
        } else {
            (p, a, n) = (p + 2 * k, a + k, n - k);
        }
    }
    tree[p] = leaf;
    for &(q, n) in path.iter().rev() {
        tree[q] = inchunk_node(&tree[q + 1], &tree[q + 2 * left_size(n)]);
    }
}

/// The in-chunk multiproof for leaves `[lo, hi)` of a chunk of `m` entries,
/// read from its cached tree: the hashes of the maximal subtrees outside the
/// range, in left-to-right depth-first order.
pub fn multiproof(tree: &[Hash], m: usize, lo: usize, hi: usize) -> Vec<Hash> {
    multiproof_by(m, lo, hi, |p, _, _| tree[p])
}

/// [`multiproof`], each maximal subtree outside the range hashed by
/// `subtree(p, a, n)`: the node at `p` of the pre-order tree, over leaves
/// `[a, a + n)`.
pub(crate) fn multiproof_by(
    m: usize,
    lo: usize,
    hi: usize,
    mut subtree: impl FnMut(usize, usize, usize) -> Hash,
) -> Vec<Hash> {
    fn walk(
        p: usize,
        a: usize,
        n: usize,
        lo: usize,
        hi: usize,
        subtree: &mut impl FnMut(usize, usize, usize) -> Hash,
        out: &mut Vec<Hash>,
    ) {
        if a + n <= lo || a >= hi {
            out.push(subtree(p, a, n));
        } else if n > 1 {
            let k = left_size(n);
            walk(p + 1, a, k, lo, hi, subtree, out);
            walk(p + 2 * k, a + k, n - k, lo, hi, subtree, out);
        }
    }
    let mut out = Vec::new();
    walk(0, 0, m, lo, hi, &mut subtree, &mut out);
    out
}

/// The in-chunk walk of a multiproof (`proof-format.md`, `0x0D`) revealing
/// `positions` (increasing) of a chunk of `m` entries: calls
/// `outside(p, a, n)` for each maximal subtree over leaves `[a, a + n)` that
/// holds none of them, in walk order; `p` is the subtree's index in the
/// pre-order tree of `inchunk_tree`. The number of calls is `sparse(M, P)`.
pub(crate) fn sparse_outside(m: usize, positions: &[usize], outside: &mut impl FnMut(usize, usize, usize)) {
    fn walk(p: usize, a: usize, n: usize, positions: &[usize], outside: &mut impl FnMut(usize, usize, usize)) {
        if positions.is_empty() {
            outside(p, a, n);
        } else if n > 1 {
            let k = left_size(n);
            let split = positions.partition_point(|&q| q < a + k);
            walk(p + 1, a, k, &positions[..split], outside);
            walk(p + 2 * k, a + k, n - k, &positions[split..], outside);
        }
    }
    walk(0, 0, m, positions, outside)
}

/// The in-chunk hashes of a multiproof revealing `positions`, read from the
/// chunk's cached pre-order tree (`inchunk_tree`).
pub fn sparse_multiproof(tree: &[Hash], m: usize, positions: &[usize]) -> Vec<Hash> {
    let mut out = Vec::new();
    sparse_outside(m, positions, &mut |p, _, _| out.push(tree[p]));
    out
}

/// How many hashes the multiproof for `[lo, hi)` in a chunk of `m` has.
pub fn multiproof_len(m: usize, lo: usize, hi: usize) -> usize {
    fn walk(a: usize, n: usize, lo: usize, hi: usize) -> usize {
        if a + n <= lo || a >= hi {
            1
        } else if n == 1 {
            0
        } else {
            let k = left_size(n);
            walk(a, k, lo, hi) + walk(a + k, n - k, lo, hi)
        }
    }
    walk(0, m, lo, hi)
}

/// Recomputes the in-chunk root from the in-range leaf hashes
/// (`in_range.len() == hi - lo`) and the multiproof hashes, which the caller
/// has checked number exactly `multiproof_len(m, lo, hi)`.
pub fn multiproof_root(m: usize, lo: usize, in_range: &[Hash], proof: &[Hash]) -> Hash {
    fn walk(a: usize, n: usize, lo: usize, in_range: &[Hash], proof: &mut std::slice::Iter<Hash>) -> Hash {
        let hi = lo + in_range.len();
        if a + n <= lo || a >= hi {
            *proof.next().expect("multiproof_len hashes")
        } else if n == 1 {
            in_range[a - lo]
        } else {
            let k = left_size(n);
            let left = walk(a, k, lo, in_range, proof);
            let right = walk(a + k, n - k, lo, in_range, proof);
            inchunk_node(&left, &right)
        }
    }
    walk(0, m, lo, in_range, &mut proof.iter())
}

/// The links from leaf `position` of a chunk of `m` entries up to the
/// in-chunk root, given its multiproof (`multiproof(tree, m, position,
/// position + 1)`, `multiproof_len` hashes): the hashes of `multiproof_root`
/// for one leaf, as a chain.
pub(crate) fn inchunk_links(m: usize, position: usize, proof: &[Hash], out: &mut impl Links) {
    // Top-down, which side each sibling is on (bit d for depth d).
    let (mut lefts, mut depth) = (0u64, 0usize);
    let (mut a, mut n) = (0usize, m);
    while n > 1 {
        let k = left_size(n);
        if position < a + k {
            n = k;
        } else {
            lefts |= 1 << depth;
            (a, n) = (a + k, n - k);
        }
        depth += 1;
    }
    debug_assert_eq!(depth, proof.len());
    // The multiproof lists siblings left to right: those on the left
    // top-down, then those on the right bottom-up.
    let (left_siblings, right_siblings) = proof.split_at(lefts.count_ones() as usize);
    let (mut next_left, mut next_right) = (left_siblings.len(), 0);
    for d in (0..depth).rev() {
        if lefts & (1 << d) != 0 {
            next_left -= 1;
            out.push(Link::InChunk { sibling: left_siblings[next_left], sibling_is_left: true });
        } else {
            out.push(Link::InChunk { sibling: right_siblings[next_right], sibling_is_left: false });
            next_right += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_above_its_groups_becomes_the_whole_tree_group_by_group() {
        for m in [1usize, 2, 15, 16, 17, 31, 32, 33, 47, 100, 255, 256, 257] {
            let leaves: Vec<Hash> = (0..m).map(|i| entry_hash(&(i as u32).to_be_bytes(), b"v")).collect();
            let whole = inchunk_tree(&leaves);
            let groups = group_roots(&whole, m);
            let mut tree = preorder_above_groups(&inchunk_levels(&groups), m);
            assert_eq!(group_roots(&tree, m), groups, "m = {m}");
            assert_eq!(tree[0], whole[0]);
            let mut bad = leaves.clone();
            bad[m - 1][0] ^= 1;
            let of =
                |leaves: &[Hash], j: usize| leaves[j * GROUP_LEAVES..m.min(j * GROUP_LEAVES + GROUP_LEAVES)].to_vec();
            let last = (m - 1) / GROUP_LEAVES;
            assert!(!fill_group(&mut tree.clone(), m, last, &of(&bad, last)), "m = {m}: a flipped leaf fails");
            for j in (0..group_count(m)).rev() {
                assert!(fill_group(&mut tree, m, j, &of(&leaves, j)), "m = {m}, group {j}");
            }
            assert_eq!(tree, whole, "m = {m}");
        }
    }

    #[test]
    fn left_size_is_largest_power_of_two_below() {
        assert_eq!(left_size(2), 1);
        assert_eq!(left_size(3), 2);
        assert_eq!(left_size(4), 2);
        assert_eq!(left_size(5), 4);
        assert_eq!(left_size(8), 4);
        assert_eq!(left_size(9), 8);
    }

    #[test]
    fn multiproof_reproduces_root_for_every_range() {
        for m in 1..=17usize {
            let leaves: Vec<Hash> = (0..m).map(|i| entry_hash(&[i as u8 + 1], b"v")).collect();
            let tree = inchunk_tree(&leaves);
            assert_eq!(tree.len(), 2 * m - 1);
            let root = tree[0];
            for lo in 0..m {
                for hi in lo + 1..=m {
                    let proof = multiproof(&tree, m, lo, hi);
                    assert_eq!(proof.len(), multiproof_len(m, lo, hi));
                    assert_eq!(multiproof_root(m, lo, &leaves[lo..hi], &proof), root);
                }
            }
        }
    }

    /// The MTH of RFC 6962, written as its definition.
    fn mth(leaves: &[Hash]) -> Hash {
        if leaves.len() == 1 {
            return leaves[0];
        }
        let k = left_size(leaves.len());
        inchunk_node(&mth(&leaves[..k]), &mth(&leaves[k..]))
    }

    #[test]
    fn inchunk_tree_is_the_pre_order_of_rfc6962_subtrees() {
        fn check(tree: &[Hash], leaves: &[Hash]) {
            assert_eq!(tree[0], mth(leaves));
            if leaves.len() > 1 {
                let k = left_size(leaves.len());
                check(&tree[1..], &leaves[..k]);
                check(&tree[2 * k..], &leaves[k..]);
            }
        }
        for m in 1..=70usize {
            let leaves: Vec<Hash> = (0..m).map(|i| entry_hash(&(i as u32).to_be_bytes(), b"v")).collect();
            let tree = inchunk_tree(&leaves);
            assert_eq!(tree.len(), 2 * m - 1);
            check(&tree, &leaves);
        }
    }

    #[test]
    fn groups_are_the_mth_of_each_16_leaves_and_give_the_root() {
        for m in 1..=70usize {
            let leaves: Vec<Hash> = (0..m).map(|i| entry_hash(&(i as u32).to_be_bytes(), b"g")).collect();
            let groups: Vec<Hash> = leaves.chunks(GROUP_LEAVES).map(mth).collect();
            assert_eq!(groups.len(), group_count(m));
            assert_eq!(group_roots(&inchunk_tree(&leaves), m), groups, "m = {m}");
            assert_eq!(group_level(&inchunk_levels(&leaves)), groups, "m = {m}");
            // The levels above the groups are the levels of the groups' own tree.
            assert_eq!(inchunk_levels(&groups).last().unwrap()[0], mth(&leaves), "m = {m}");
        }
    }

    #[test]
    fn inchunk_links_fold_like_multiproof_root() {
        for m in 1..=40usize {
            let leaves: Vec<Hash> = (0..m).map(|i| entry_hash(&(i as u32).to_be_bytes(), b"w")).collect();
            let tree = inchunk_tree(&leaves);
            for (pos, leaf) in leaves.iter().enumerate() {
                let proof = multiproof(&tree, m, pos, pos + 1);
                let mut chain = Chain(*leaf);
                inchunk_links(m, pos, &proof, &mut chain);
                assert_eq!(chain.0, tree[0], "m = {m}, position {pos}");
            }
        }
    }

    #[test]
    fn spec_worked_example_has_three_hashes() {
        // spec/hashing.md: M = 5, lo = 2, hi = 3 emits H(d0,d1), d3, d4.
        let d: Vec<Hash> = (0..5).map(|i| entry_hash(&[i + 1], b"")).collect();
        let proof = multiproof(&inchunk_tree(&d), 5, 2, 3);
        assert_eq!(proof, vec![inchunk_node(&d[0], &d[1]), d[3], d[4]]);
    }
}
