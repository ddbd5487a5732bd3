//! Random trees shared by the fuzz and tamper tests.

use std::collections::BTreeSet;

use bpavl_core::Tree;
use bpavl_testkit::rng::SplitMix64;
use rand::Rng;

pub fn random_key(rng: &mut SplitMix64) -> Vec<u8> {
    // First byte ≥ 1 ([0x00] is below every key), ≤ 12 bytes ([0xff; 13] is above).
    let mut k: Vec<u8> = (0..rng.gen_range(1..=12)).map(|_| rng.gen()).collect();
    k[0] = k[0].max(1);
    k
}

/// Empty one time in ten, else 1 … `max_len` random bytes.
pub fn random_value(rng: &mut SplitMix64, max_len: usize) -> Vec<u8> {
    let len = if rng.gen_bool(0.1) { 0 } else { rng.gen_range(1..=max_len) };
    (0..len).map(|_| rng.gen()).collect()
}

/// A committed tree with `n` inserts (values of ≤ `max_value_len` bytes) of
/// which a fraction `remove` are then removed; and its keys, sorted.
pub fn build_tree(
    rng: &mut SplitMix64,
    capacity: usize,
    n: usize,
    remove: f64,
    max_value_len: usize,
) -> (Tree, Vec<Vec<u8>>) {
    let mut tree = Tree::new(capacity).unwrap();
    let mut keys = BTreeSet::new();
    while keys.len() < n {
        let k = random_key(rng);
        tree.insert(&k, &random_value(rng, max_value_len)).unwrap();
        keys.insert(k);
    }
    if remove > 0.0 {
        tree.commit();
        for k in keys.clone() {
            if rng.gen_bool(remove) {
                assert!(tree.remove(&k));
                keys.remove(&k);
            }
        }
    }
    tree.commit();
    (tree, keys.into_iter().collect())
}
