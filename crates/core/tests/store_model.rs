//! The store's layout against a model (`docs/store.md`): random inserts,
//! removes, commits, prunes, rollbacks and reopens, with the commit's write
//! sets applied to an in-memory store that works as `@bpavl/store` does
//! (tables of sorted byte keys). After every step, every retained version
//! loads from the store to exactly its model and root, and the store holds
//! exactly the records that the retained versions reach: pruning and
//! rollback leave no garbage and lose nothing. Flipped or removed records
//! fail with `STORE_CORRUPT`, never with a wrong tree.

use std::collections::{BTreeMap, BTreeSet};

use bpavl_core::record::{stale_key, Child, ChunkRecord, NodeRecord, Ref, Table, VersionRecord};
use bpavl_core::{Loader, StoreError, Tree, WriteSet};
use proptest::prelude::*;

mod model_keys;
use model_keys::{key, value};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Records = BTreeMap<Vec<u8>, Vec<u8>>;

const RECORD_TABLES: [Table; 3] = [Table::Nodes, Table::Chunks, Table::Entries];

/// The tables of one store, as a backend holds them.
#[derive(Default, Clone)]
struct Store {
    versions: Records,
    records: BTreeMap<u8, Records>,
    stale: Records,
}

fn be(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

impl Store {
    fn table(&mut self, t: Table) -> &mut Records {
        self.records.entry(t as u8).or_default()
    }

    fn get(&self, t: Table, r: &Ref) -> Option<&[u8]> {
        self.records.get(&(t as u8))?.get(r.key().as_slice()).map(Vec::as_slice)
    }

    /// One commit: new records, stale marks, and the version record.
    fn write(&mut self, w: &WriteSet) {
        for (t, r, bytes) in &w.puts {
            self.table(*t).insert(r.key().to_vec(), bytes.clone());
        }
        for (t, r) in &w.stale {
            self.stale.insert(stale_key(w.version, *t, r).to_vec(), Vec::new());
        }
        self.versions.insert(be(w.version), w.version_record.clone());
    }

    fn version_numbers(&self) -> Vec<u64> {
        self.versions.keys().map(|k| u64::from_be_bytes(k[..8].try_into().unwrap())).collect()
    }

    /// Keeps versions `≥ keep_from`: deletes what is stale at or before it.
    fn prune(&mut self, keep_from: u64) {
        let due: Vec<Vec<u8>> = self.stale.range(..be(keep_from + 1)).map(|(k, _)| k.clone()).collect();
        for k in due {
            let table = [Table::Nodes, Table::Chunks, Table::Entries][k[8] as usize - 1];
            self.table(table).remove(&k[9..]);
            self.stale.remove(&k);
        }
        self.versions.retain(|k, _| k.as_slice() >= be(keep_from).as_slice());
    }

    /// Makes `to` the head: later versions, their records and their stale marks go.
    fn rollback(&mut self, to: u64) {
        let after = be(to + 1);
        self.versions.retain(|k, _| k < &after);
        self.stale.retain(|k, _| k[..8] < after[..]);
        for t in RECORD_TABLES {
            self.table(t).retain(|k, _| k[..8] < after[..]);
        }
    }

    fn load(&self, version: u64, capacity: usize) -> Result<Tree, StoreError> {
        let record = self.versions.get(&be(version)).ok_or(StoreError::VersionUnknown)?;
        let mut loader = Loader::new(version, record, capacity)?;
        for _ in 0..200 {
            let wanted = loader.wanted();
            if wanted.is_empty() {
                return loader.finish();
            }
            for (t, r) in wanted {
                loader.supply(t, &r, self.get(t, &r))?;
            }
        }
        panic!("a load takes one round per level plus three");
    }

    /// Every record that a retained version reaches (a delta's base included).
    fn reachable(&self, capacity: usize) -> BTreeSet<(u8, Vec<u8>)> {
        let mut out = BTreeSet::new();
        // Chunks already expanded: a base is also in `out` without its slots expanded.
        let mut chunks_seen = BTreeSet::new();
        let mut todo: Vec<Child> = Vec::new();
        for bytes in self.versions.values() {
            todo.extend(VersionRecord::decode(bytes, capacity).unwrap().top);
        }
        while let Some(child) = todo.pop() {
            match child {
                Child::Node(r) => {
                    if out.insert((Table::Nodes as u8, r.key().to_vec())) {
                        let n = NodeRecord::decode(self.get(Table::Nodes, &r).unwrap(), &r.hash).unwrap();
                        todo.extend([n.left, n.right]);
                    }
                }
                Child::Chunk(r) => {
                    if !chunks_seen.insert(r.key()) {
                        continue;
                    }
                    out.insert((Table::Chunks as u8, r.key().to_vec()));
                    let slots = match ChunkRecord::decode(self.get(Table::Chunks, &r).unwrap(), capacity).unwrap() {
                        ChunkRecord::Full(slots) => slots,
                        ChunkRecord::Delta { base, edits } => {
                            out.insert((Table::Chunks as u8, base.key().to_vec()));
                            let ChunkRecord::Full(b) =
                                ChunkRecord::decode(self.get(Table::Chunks, &base).unwrap(), capacity).unwrap()
                            else {
                                panic!("a delta's base is full")
                            };
                            bpavl_core::record::apply_edits(&b, &edits, capacity).unwrap()
                        }
                    };
                    out.extend(slots.iter().map(|s| (Table::Entries as u8, s.entry.key().to_vec())));
                }
            }
        }
        out
    }

    fn present(&self) -> BTreeSet<(u8, Vec<u8>)> {
        self.records.iter().flat_map(|(t, recs)| recs.keys().map(move |k| (*t, k.clone()))).collect()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, u8),
    Remove(u16),
    Commit,
    Prune(u8),
    Rollback(u8),
    Reopen,
}

fn op(domain: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..domain, any::<u8>()).prop_map(|(k, s)| Op::Insert(k, s)),
        6 => (0..domain).prop_map(Op::Remove),
        4 => Just(Op::Commit),
        1 => (1..5u8).prop_map(Op::Prune),
        1 => (0..4u8).prop_map(Op::Rollback),
        1 => Just(Op::Reopen),
    ]
}

fn entries(tree: &Tree) -> Model {
    tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

/// Every retained version loads to its model and root; the store holds
/// exactly what they reach.
fn check(store: &Store, versions: &BTreeMap<u64, (Model, [u8; 32])>, capacity: usize) {
    assert_eq!(store.version_numbers(), versions.keys().copied().collect::<Vec<_>>());
    for (&v, (model, root)) in versions {
        let tree = store.load(v, capacity).unwrap();
        assert_eq!((tree.head().version(), tree.head().root()), (v, *root));
        assert_eq!(&entries(&tree), model);
    }
    let (present, reachable) = (store.present(), store.reachable(capacity));
    let short = |set: BTreeSet<&(u8, Vec<u8>)>| -> Vec<(u8, u64)> {
        set.into_iter().map(|(t, k)| (*t, u64::from_be_bytes(k[..8].try_into().unwrap()))).collect()
    };
    assert!(
        present == reachable,
        "garbage (table, birth): {:?}; lost: {:?}",
        short(present.difference(&reachable).collect()),
        short(reachable.difference(&present).collect())
    );
}

fn run(capacity: usize, ops: &[Op]) {
    let mut store = Store::default();
    let mut tree = Tree::new(capacity).unwrap();
    let mut model = Model::new();
    let mut versions: BTreeMap<u64, (Model, [u8; 32])> = BTreeMap::new();
    for op in ops {
        match *op {
            Op::Insert(k, s) => {
                tree.insert(&key(k), &value(k, s)).unwrap();
                model.insert(key(k), value(k, s));
            }
            Op::Remove(k) => assert_eq!(tree.remove(&key(k)), model.remove(&key(k)).is_some()),
            Op::Commit => {
                let (commit, writes) = tree.commit_to_store();
                store.write(&writes);
                versions.insert(commit.version, (model.clone(), commit.root));
            }
            Op::Prune(keep) => {
                let Some(&head) = versions.keys().last() else { continue };
                let keep_from = head.saturating_sub(keep as u64 - 1).max(1);
                store.prune(keep_from);
                versions.retain(|&v, _| v >= keep_from);
            }
            Op::Rollback(back) => {
                let (Some(&oldest), Some(&head)) = (versions.keys().next(), versions.keys().last()) else { continue };
                let to = head.saturating_sub(back as u64).max(oldest);
                store.rollback(to);
                versions.retain(|&v, _| v <= to);
                tree = store.load(to, capacity).unwrap();
                model = versions[&to].0.clone();
            }
            Op::Reopen => {
                let Some(&head) = versions.keys().last() else { continue };
                tree = store.load(head, capacity).unwrap();
                model = versions[&head].0.clone();
            }
        }
        if !matches!(op, Op::Insert(..) | Op::Remove(_)) {
            check(&store, &versions, capacity);
        }
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    versions.insert(commit.version, (model, commit.root));
    check(&store, &versions, capacity);
    corruption(&store, &versions, capacity);
}

/// A flipped byte in any record, or a removed record, makes every version
/// that reaches it fail to load with `STORE_CORRUPT`; no version loads to a
/// wrong tree.
fn corruption(store: &Store, versions: &BTreeMap<u64, (Model, [u8; 32])>, capacity: usize) {
    let records: Vec<(u8, Vec<u8>, usize)> =
        store.records.iter().flat_map(|(t, recs)| recs.iter().map(move |(k, v)| (*t, k.clone(), v.len()))).collect();
    // Bounded: a few records of each store, each tried at a few positions.
    for (i, (table, key, len)) in records.iter().enumerate().step_by(records.len().div_ceil(6).max(1)) {
        for at in [0, len / 2, len - 1, (i * 7) % len] {
            let mut bad = store.clone();
            bad.records.get_mut(table).unwrap().get_mut(key).unwrap()[at] ^= 0x10;
            for (&v, (model, root)) in versions {
                match bad.load(v, capacity) {
                    Err(e) => assert_eq!(e, StoreError::Corrupt),
                    Ok(tree) => assert_eq!((&entries(&tree), tree.head().root()), (model, *root)),
                }
            }
        }
        let mut gone = store.clone();
        gone.records.get_mut(table).unwrap().remove(key);
        let reached = versions.keys().filter(|&&v| {
            let mut one = store.clone();
            one.versions.retain(|k, _| k == &be(v));
            one.reachable(capacity).contains(&(*table, key.clone()))
        });
        for &v in reached {
            assert_eq!(gone.load(v, capacity).err(), Some(StoreError::Corrupt));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn small_capacities(capacity in 2usize..=4, ops in prop::collection::vec(op(48), 1..120)) {
        run(capacity, &ops);
    }

    #[test]
    fn capacity_eight(ops in prop::collection::vec(op(200), 1..300)) {
        run(8, &ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn capacity_256(ops in prop::collection::vec(op(2000), 200..900)) {
        run(256, &ops);
    }
}

#[test]
fn an_unknown_version_is_reported_as_such() {
    let store = Store::default();
    assert_eq!(store.load(3, 4).err(), Some(StoreError::VersionUnknown));
}

#[test]
fn a_hundred_updates_in_a_thousand_chunks_write_small_deltas() {
    // 64,000 entries in chunks of up to 64; then 100 random updates.
    let mut tree = Tree::new(64).unwrap();
    for i in 0..64_000u32 {
        tree.insert(&i.to_be_bytes(), &[1; 16]).unwrap();
    }
    let (_, full) = tree.commit_to_store();
    let (mut x, mut updated) = (1u64, BTreeSet::new());
    for _ in 0..100 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let k = (x >> 33) as u32 % 64_000;
        tree.insert(&k.to_be_bytes(), &[2; 16]).unwrap();
        updated.insert(k);
    }
    let (_, update) = tree.commit_to_store();
    let bytes = |w: &WriteSet, t: Table| w.puts.iter().filter(|p| p.0 == t).map(|p| p.2.len()).sum::<usize>();
    let full_chunks = bytes(&full, Table::Chunks);
    let delta_chunks = bytes(&update, Table::Chunks);
    assert!(
        delta_chunks * 20 < full_chunks / 10,
        "{delta_chunks} bytes of chunk deltas vs {full_chunks} for all chunks"
    );
    assert_eq!(update.puts.iter().filter(|p| p.0 == Table::Entries).count(), updated.len());
    assert_eq!(update.stale.iter().filter(|s| s.0 == Table::Entries).count(), updated.len());
}
