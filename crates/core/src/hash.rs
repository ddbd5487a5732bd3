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
    h.update([TAG_ENTRY]);
    h.update((key.len() as u32).to_be_bytes());
    h.update(key);
    h.update((value.len() as u32).to_be_bytes());
    h.update(value);
    h.finalize().into()
}

/// `H(0x01 ‖ left ‖ right)`: an inner node of the in-chunk tree.
pub fn inchunk_node(left: &Hash, right: &Hash) -> Hash {
    let mut buf = [0u8; 65];
    buf[0] = TAG_INCHUNK;
    buf[1..33].copy_from_slice(left);
    buf[33..].copy_from_slice(right);
    Sha256::digest(buf).into()
}

/// `H(0x02 ‖ u32be(M) ‖ chunk_root)`: a chunk, the leaf of the AVL tree.
pub fn chunk_hash(entries: usize, chunk_root: &Hash) -> Hash {
    let mut buf = [0u8; 37];
    buf[0] = TAG_CHUNK;
    buf[1..5].copy_from_slice(&(entries as u32).to_be_bytes());
    buf[5..].copy_from_slice(chunk_root);
    Sha256::digest(buf).into()
}

/// `H(0x03 ‖ u8(height) ‖ u64be(chunks) ‖ u64be(entries) ‖ left ‖ right)`.
pub fn inner_hash(height: u8, chunks: u64, entries: u64, left: &Hash, right: &Hash) -> Hash {
    let mut buf = [0u8; 82];
    buf[0] = TAG_INNER;
    buf[1] = height;
    buf[2..10].copy_from_slice(&chunks.to_be_bytes());
    buf[10..18].copy_from_slice(&entries.to_be_bytes());
    buf[18..50].copy_from_slice(left);
    buf[50..].copy_from_slice(right);
    Sha256::digest(buf).into()
}

/// `H(0x04 ‖ u32be(C) ‖ u64be(chunks) ‖ u64be(entries) ‖ top)`: the tree root.
pub fn root_hash(capacity: usize, chunks: u64, entries: u64, top: &Hash) -> Hash {
    let mut buf = [0u8; 53];
    buf[0] = TAG_ROOT;
    buf[1..5].copy_from_slice(&(capacity as u32).to_be_bytes());
    buf[5..13].copy_from_slice(&chunks.to_be_bytes());
    buf[13..21].copy_from_slice(&entries.to_be_bytes());
    buf[21..].copy_from_slice(top);
    Sha256::digest(buf).into()
}

/// The root of the empty tree of capacity `capacity`.
pub fn empty_root(capacity: usize) -> Hash {
    root_hash(capacity, 0, 0, &[0u8; 32])
}

/// The largest power of two strictly less than `n` (`n ≥ 2`): the size of the
/// left subtree of an in-chunk node over `n` leaves.
pub(crate) fn left_size(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// The whole in-chunk tree over one or more entry hashes, as a flat array of
/// `2M − 1` hashes in pre-order: a node over `n` leaves at index `p` has its
/// left child at `p + 1` and its right child at `p + 2k` (`k` = left size).
/// `tree[0]` is the chunk root, `mth(leaves)`.
pub fn inchunk_tree(leaves: &[Hash]) -> Vec<Hash> {
    fn fill(leaves: &[Hash], out: &mut [Hash]) {
        if leaves.len() == 1 {
            out[0] = leaves[0];
            return;
        }
        let k = left_size(leaves.len());
        let (node, rest) = out.split_first_mut().expect("2n - 1 slots");
        let (left, right) = rest.split_at_mut(2 * k - 1);
        fill(&leaves[..k], left);
        fill(&leaves[k..], right);
        *node = inchunk_node(&left[0], &right[0]);
    }
    assert!(!leaves.is_empty(), "a chunk holds at least one entry");
    let mut out = vec![[0u8; 32]; 2 * leaves.len() - 1];
    fill(leaves, &mut out);
    out
}

/// The in-chunk multiproof for leaves `[lo, hi)` of a chunk of `m` entries,
/// read from its cached tree: the hashes of the maximal subtrees outside the
/// range, in left-to-right depth-first order.
pub fn multiproof(tree: &[Hash], m: usize, lo: usize, hi: usize) -> Vec<Hash> {
    fn walk(tree: &[Hash], p: usize, a: usize, n: usize, lo: usize, hi: usize, out: &mut Vec<Hash>) {
        if a + n <= lo || a >= hi {
            out.push(tree[p]);
        } else if n > 1 {
            let k = left_size(n);
            walk(tree, p + 1, a, k, lo, hi, out);
            walk(tree, p + 2 * k, a + k, n - k, lo, hi, out);
        }
    }
    let mut out = Vec::new();
    walk(tree, 0, 0, m, lo, hi, &mut out);
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn spec_worked_example_has_three_hashes() {
        // spec/hashing.md: M = 5, lo = 2, hi = 3 emits H(d0,d1), d3, d4.
        let d: Vec<Hash> = (0..5).map(|i| entry_hash(&[i + 1], b"")).collect();
        let proof = multiproof(&inchunk_tree(&d), 5, 2, 3);
        assert_eq!(proof, vec![inchunk_node(&d[0], &d[1]), d[3], d[4]]);
    }
}
