//! Model-based property test: random operation sequences against a `BTreeMap`,
//! with full invariant, proof and rebuild checks after every commit.

use std::collections::BTreeMap;
use std::ops::Bound;

use bpavl_core::{verify_absence, verify_chunk, verify_existence, verify_range, Rebuilder, Tree};
use bpavl_testkit::rng::SplitMix64;
use proptest::prelude::*;

mod model_keys;
use model_keys::{key, value};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, u8),
    Remove(u16),
    Get(u16),
    Range(u16, u16),
    Commit,
}

fn op(domain: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..domain, any::<u8>()).prop_map(|(k, s)| Op::Insert(k, s)),
        4 => (0..domain).prop_map(Op::Remove),
        1 => (0..domain).prop_map(Op::Get),
        1 => (0..domain, 0..domain).prop_map(|(a, b)| Op::Range(a, b)),
        1 => Just(Op::Commit),
    ]
}

fn apply(tree: &mut Tree, model: &mut Model, op: &Op) {
    match *op {
        Op::Insert(k, s) => {
            let (k, v) = (key(k), value(k, s));
            let new = tree.insert(&k, &v).unwrap();
            assert_eq!(new, model.insert(k, v).is_none());
        }
        Op::Remove(k) => assert_eq!(tree.remove(&key(k)), model.remove(&key(k)).is_some()),
        Op::Get(k) => assert_eq!(tree.get(&key(k)), model.get(&key(k)).map(Vec::as_slice)),
        Op::Range(a, b) => {
            let (a, b) = (key(a.min(b)), key(a.max(b)));
            let got: Vec<_> = tree.range(&a, Some(&b)).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            let want: Vec<_> = model.range(a..b).map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(got, want);
        }
        Op::Commit => {}
    }
}

/// Everything that must hold of a committed tree.
fn check_committed(tree: &mut Tree, model: &Model, domain: u16, seed: u64) {
    let commit = tree.commit();
    let root = commit.root;
    tree.check_invariants().unwrap();
    assert_eq!(tree.len(), model.len() as u64);
    assert!(tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).eq(model.clone()));

    for (k, v) in model {
        let proof = tree.head().prove_existence(k).unwrap().encode();
        verify_existence(&root, k, v, &proof).unwrap();
    }
    for k in 0..domain {
        let k = key(k);
        if !model.contains_key(&k) {
            let proof = tree.head().prove_absence(&k).unwrap().encode();
            verify_absence(&root, &k, &proof).unwrap();
        }
    }
    check_ranges(tree, model, domain);

    // Export every chunk, verify it, rebuild from a shuffled order.
    let n = tree.chunk_count();
    let mut order: Vec<u64> = (0..n).collect();
    SplitMix64::new(seed).shuffle(&mut order);
    let mut rebuilder = Rebuilder::new(root);
    for &i in &order {
        let bytes = tree.head().export_chunk_bytes(i).unwrap();
        let chunk = verify_chunk(&root, i, &bytes).unwrap();
        assert!(rebuilder.add_verified(chunk).unwrap());
    }
    if n == 0 {
        return; // the empty tree has no chunks to rebuild from
    }
    let rebuilt = rebuilder.finish(commit.version).unwrap();
    assert_eq!(rebuilt.head().root(), root);
    rebuilt.check_invariants().unwrap();
    assert_eq!(rebuilt.height(), tree.height());
    for i in 0..n {
        assert_eq!(
            rebuilt.head().export_chunk_bytes(i).unwrap(),
            tree.head().export_chunk_bytes(i).unwrap(),
            "chunk {i}"
        );
    }
}

fn check_ranges(tree: &Tree, model: &Model, domain: u16) {
    let root = tree.head().root();
    let bounds = [0, 1, domain / 3, domain / 2, domain - 1, domain];
    for &a in &bounds {
        for &b in &bounds {
            for limit in [1usize, 3, 1000] {
                let start = if a == 0 { Vec::new() } else { key(a) };
                let end = (b > a).then(|| key(b));
                if end.as_ref().is_some_and(|e| *e <= start) {
                    continue;
                }
                let proof = tree.head().prove_range(&start, end.as_deref(), limit).unwrap().encode();
                let got = verify_range(&root, &start, end.as_deref(), limit, &proof).unwrap();
                let upper = end.clone().map_or(Bound::Unbounded, Bound::Excluded);
                let all: Vec<_> =
                    model.range((Bound::Included(start.clone()), upper)).map(|(k, v)| (k.clone(), v.clone())).collect();
                let want: Vec<_> = all.iter().take(limit).cloned().collect();
                assert_eq!(got.entries, want);
                assert_eq!(got.complete, all.len() <= limit);
                assert_eq!(got.resume_key, all.get(limit).map(|(k, _)| k.clone()));
            }
        }
    }
}

fn run(capacity: usize, domain: u16, ops: &[Op], seed: u64) {
    let mut tree = Tree::new(capacity).unwrap();
    let mut model = Model::new();
    for op in ops {
        apply(&mut tree, &mut model, op);
        if let Op::Commit = op {
            check_committed(&mut tree, &model, domain, seed);
        }
    }
    check_committed(&mut tree, &model, domain, seed);

    // A rebuilt tree behaves like its source under later writes.
    if tree.chunk_count() > 0 {
        let root = tree.head().root();
        let mut rebuilder = Rebuilder::new(root);
        for i in 0..tree.chunk_count() {
            rebuilder.add(i, &tree.head().export_chunk_bytes(i).unwrap()).unwrap();
        }
        let mut rebuilt = rebuilder.finish(tree.head().version()).unwrap();
        for op in ops.iter().rev().take(40) {
            let mut scratch = model.clone();
            apply(&mut tree, &mut scratch, op);
            apply(&mut rebuilt, &mut model, op);
        }
        assert_eq!(tree.commit().root, rebuilt.commit().root);
        rebuilt.check_invariants().unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn tiny_capacities_match_model(capacity in 2usize..=4, ops in prop::collection::vec(op(64), 1..400), seed: u64) {
        run(capacity, 64, &ops, seed);
    }

    #[test]
    fn larger_capacities_match_model(capacity in prop::sample::select(vec![5usize, 8, 16, 33]), ops in prop::collection::vec(op(300), 1..800), seed: u64) {
        run(capacity, 300, &ops, seed);
    }
}

#[test]
fn insert_all_then_remove_all_leaves_a_valid_empty_tree() {
    for capacity in [2, 3, 4, 7, 256] {
        let mut tree = Tree::new(capacity).unwrap();
        for i in 0u16..2000 {
            tree.insert(&key(i.wrapping_mul(7919)), b"v").unwrap();
        }
        tree.commit();
        tree.check_invariants().unwrap();
        for i in 0u16..2000 {
            assert!(tree.remove(&key(i.wrapping_mul(7919))));
            if i % 97 == 0 {
                tree.commit();
                tree.check_invariants().unwrap();
            }
        }
        let commit = tree.commit();
        assert!(tree.is_empty());
        assert_eq!(commit.root, bpavl_core::hash::empty_root(capacity));
        tree.check_invariants().unwrap();
    }
}

#[test]
fn refused_writes_leave_the_tree_unchanged() {
    let mut tree = Tree::new(4).unwrap();
    tree.insert(b"a", b"1").unwrap();
    let before = tree.commit().root;
    assert_eq!(tree.insert(b"", b"x").unwrap_err().code(), "KEY_EMPTY");
    assert_eq!(tree.insert(&[1; 1025], b"x").unwrap_err().code(), "KEY_TOO_LONG");
    assert_eq!(tree.insert(b"b", &vec![0; 65537]).unwrap_err().code(), "VALUE_TOO_LONG");
    assert_eq!(Tree::new(1).unwrap_err().code(), "CAPACITY_INVALID");
    assert_eq!(Tree::new(4097).unwrap_err().code(), "CAPACITY_INVALID");
    assert_eq!(tree.commit().root, before);
    assert_eq!(tree.head().prove_existence(b"").unwrap_err().code(), "KEY_EMPTY");
    assert_eq!(tree.head().prove_existence(&[1; 1025]).unwrap_err().code(), "KEY_TOO_LONG");
    assert_eq!(tree.head().prove_existence(b"zz").unwrap_err().code(), "KEY_NOT_FOUND");
    assert_eq!(tree.head().prove_absence(b"a").unwrap_err().code(), "KEY_EXISTS");
    assert_eq!(tree.head().prove_range(&[1; 1025], None, 5).unwrap_err().code(), "KEY_TOO_LONG");
    assert_eq!(tree.head().prove_range(b"a", Some(b""), 5).unwrap_err().code(), "KEY_EMPTY");
    assert_eq!(tree.head().prove_range(b"b", Some(b"a"), 5).unwrap_err().code(), "QUERY_INVALID");
    assert_eq!(tree.head().prove_range(b"a", None, 0).unwrap_err().code(), "QUERY_INVALID");
    assert_eq!(tree.head().export_chunk(1).unwrap_err().code(), "CHUNK_OUT_OF_RANGE");
}
