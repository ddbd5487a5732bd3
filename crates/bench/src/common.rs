//! Tree building, proving, checking and syncing, shared by the subcommands.
//! Every helper checks its result and panics with a clear message if bpavl
//! gets something wrong: a benchmark never reports unchecked work.

use std::ops::Range;

use bpavl_core::{verify_absence, verify_chunk, verify_existence, Commit, ExistenceProof, Hash, Rebuilder, Tree};

use crate::par::par_map;
use crate::workload::Workload;

/// An empty tree of capacity `capacity`.
pub fn new_tree(capacity: usize) -> Tree {
    Tree::new(capacity).unwrap_or_else(|e| panic!("Tree::new({capacity}) failed: {e}"))
}

/// Inserts workload entries `range` into `tree`, in ascending order; each must be new.
pub fn insert_range(tree: &mut Tree, w: &Workload, range: Range<usize>) {
    for i in range {
        let new = tree.insert(w.key(i), w.value(i)).unwrap_or_else(|e| panic!("insert of entry {i} failed: {e}"));
        assert!(new, "insert of entry {i} reported an existing key");
    }
}

/// Inserts the whole workload into a new tree of capacity `capacity` and
/// commits. Returns the tree and the commit.
pub fn build(w: &Workload, capacity: usize) -> (Tree, Commit) {
    let mut tree = new_tree(capacity);
    insert_range(&mut tree, w, 0..w.len());
    let commit = tree.commit();
    (tree, commit)
}

/// Checks that `tree` holds the workload (entry count only; values are checked by lookups).
pub fn check_len(tree: &Tree, w: &Workload) {
    assert_eq!(tree.len(), w.len() as u64, "tree holds {} entries, the workload {}", tree.len(), w.len());
}

/// Looks up entry `i` and checks its value.
#[inline]
pub fn check_get(tree: &Tree, w: &Workload, i: usize) {
    match tree.get(w.key(i)) {
        Some(v) if v == w.value(i) => {}
        Some(_) => panic!("get of entry {i} returned a wrong value"),
        None => panic!("get of entry {i} returned nothing"),
    }
}

/// The timed form of `check_get`: every workload value starts with `BE64(i)`,
/// so length and prefix identify the entry without streaming both 512-byte
/// copies through the cache. `peers` runs the full check on the same keys first.
pub fn check_get_identity(tree: &Tree, w: &Workload, i: usize) {
    match tree.get(w.key(i)) {
        Some(v) if v.len() == w.value(i).len() && v[..8] == (i as u64).to_be_bytes() => {}
        Some(_) => panic!("get of entry {i} returned a wrong value"),
        None => panic!("get of entry {i} returned nothing"),
    }
}

/// The existence proof of entry `i`.
pub fn prove(tree: &Tree, w: &Workload, i: usize) -> ExistenceProof {
    tree.head().prove_existence(w.key(i)).unwrap_or_else(|e| panic!("existence proof of entry {i} failed: {e}"))
}

/// Number of hashes in an existence proof (in-chunk plus chunk path).
pub fn proof_hashes(p: &ExistenceProof) -> usize {
    p.witness.inchunk.len() + p.witness.path.steps.len()
}

/// Decodes and verifies the encoded existence proof of entry `i`.
#[inline]
pub fn check_existence(root: &Hash, w: &Workload, i: usize, proof: &[u8]) {
    if let Err(e) = verify_existence(root, w.key(i), w.value(i), proof) {
        panic!("existence proof of entry {i} does not verify: {e}");
    }
}

/// The encoded absence proof of `key`.
pub fn prove_absent(tree: &Tree, key: &[u8]) -> Vec<u8> {
    match tree.head().prove_absence(key) {
        Ok(p) => p.encode(),
        Err(e) => panic!("absence proof of {} failed: {e}", hex::encode(key)),
    }
}

/// Decodes and verifies an encoded absence proof.
#[inline]
pub fn check_absence(root: &Hash, key: &[u8], proof: &[u8]) {
    if let Err(e) = verify_absence(root, key, proof) {
        panic!("absence proof of {} does not verify: {e}", hex::encode(key));
    }
}

/// The encoded envelope of chunk `index` of the committed tree.
pub fn export(tree: &Tree, index: u64) -> Vec<u8> {
    tree.head().export_chunk_bytes(index).unwrap_or_else(|e| panic!("export of chunk {index} failed: {e}"))
}

/// Every chunk envelope of the committed tree, encoded, in index order,
/// exported on every core.
pub fn export_all(tree: &Tree) -> Vec<Vec<u8>> {
    par_map(tree.head().chunk_count() as usize, |i| export(tree, i as u64))
}

/// Verifies every envelope against the commit's root, rebuilds the tree from
/// them and checks that the rebuilt tree has the same root.
pub fn import_all(commit: &Commit, envelopes: &[Vec<u8>]) -> Tree {
    let root = &commit.root;
    let mut rb = Rebuilder::new(*root);
    // Chunks verify independently, so every core takes a share.
    let verified = par_map(envelopes.len(), |i| {
        verify_chunk(root, i as u64, &envelopes[i]).unwrap_or_else(|e| panic!("chunk {i} does not verify: {e}"))
    });
    for (i, chunk) in verified.into_iter().enumerate() {
        let new = rb.add_verified(chunk).unwrap_or_else(|e| panic!("rebuilder refused chunk {i}: {e}"));
        assert!(new, "rebuilder already had chunk {i}");
    }
    let tree = rb.finish(commit.version).unwrap_or_else(|e| panic!("rebuild failed: {e}"));
    let rebuilt = tree.head().root();
    assert!(rebuilt == *root, "rebuilt root {} differs from {}", hex::encode(rebuilt), hex::encode(root));
    tree
}

/// `count` indices spread evenly over `0 … n−1` (all of them if `n ≤ count`).
pub fn sample_indices(n: usize, count: usize) -> Vec<usize> {
    if n <= count {
        return (0..n).collect();
    }
    (0..count).map(|k| k * n / count).collect()
}

/// Min, median and max of a non-empty list.
pub fn min_median_max(values: &mut [usize]) -> (usize, usize, usize) {
    assert!(!values.is_empty(), "min/median/max of nothing");
    values.sort_unstable();
    (values[0], values[values.len() / 2], values[values.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_indices_are_even_and_distinct() {
        assert_eq!(sample_indices(3, 10), vec![0, 1, 2]);
        assert_eq!(sample_indices(100, 4), vec![0, 25, 50, 75]);
        let s = sample_indices(1_000_000, 10_000);
        assert_eq!(s.len(), 10_000);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn helpers_check_a_small_tree_end_to_end() {
        let w = Workload::generate(500);
        let (tree, commit) = build(&w, 16);
        check_len(&tree, &w);
        assert!(tree.chunk_count() > 1);
        for i in w.lookup_indices() {
            check_get(&tree, &w, i);
        }
        for i in w.proved_indices() {
            let proof = prove(&tree, &w, i);
            assert!(proof_hashes(&proof) > 0);
            check_existence(&commit.root, &w, i, &proof.encode());
        }
        for key in &w.absent_keys()[..10] {
            check_absence(&commit.root, key, &prove_absent(&tree, key));
        }
        let rebuilt = import_all(&commit, &export_all(&tree));
        check_len(&rebuilt, &w);
    }

    #[test]
    #[should_panic(expected = "does not verify")]
    fn a_wrong_value_is_caught() {
        let w = Workload::generate(20);
        let (tree, commit) = build(&w, 4);
        check_existence(&commit.root, &w, 3, &prove(&tree, &w, 4).encode());
    }

    #[test]
    fn min_median_max_sorts() {
        assert_eq!(min_median_max(&mut [5, 1, 3]), (1, 3, 5));
        assert_eq!(min_median_max(&mut [7]), (7, 7, 7));
    }
}
