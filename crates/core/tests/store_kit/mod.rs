//! An in-memory store that works as `@bpavl/store` does (tables of sorted
//! byte keys), for the tests that apply write sets and load versions back.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use bpavl_core::record::{
    encode_full, held_groups, stale_key, values_ref, values_refs, Child, ChunkRecord, Entry, NodeRecord, Ref, Slot,
    Table, VersionRecord,
};
use bpavl_core::{Loader, StoreError, Tree, WriteSet};
use bpavl_testkit::rng::SplitMix64;

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;
pub type Records = BTreeMap<Vec<u8>, Vec<u8>>;

const RECORD_TABLES: [Table; 4] = [Table::Nodes, Table::Chunks, Table::Entries, Table::Values];

/// The tables of one store, as a backend holds them.
#[derive(Default, Clone)]
pub struct Store {
    pub versions: Records,
    pub records: BTreeMap<u8, Records>,
    pub stale: Records,
}

pub fn be(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// Keys 0 … n − 1 (`model_keys`, values of byte 1) written to a new tree
/// of `capacity` and committed to a new store: the store, the tree and the
/// version.
pub fn committed(capacity: usize, n: u16) -> (Store, Tree, u64) {
    let (mut store, mut tree) = (Store::default(), Tree::new(capacity).unwrap());
    for k in 0..n {
        tree.insert(&crate::model_keys::key(k), &crate::model_keys::value(k, 1)).unwrap();
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    (store, tree, commit.version)
}

/// Bulk-loads `entries` (ascending keys) into `store` as version 1, every
/// chunk record holding its values; returns the root.
pub fn bulk_load<'a>(
    store: &mut Store,
    capacity: usize,
    entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> [u8; 32] {
    let mut load = bpavl_core::BulkLoad::new(capacity, 1).unwrap();
    for (k, v) in entries {
        load.push(k, v).unwrap();
    }
    let mut puts = load.take_puts();
    let (root, mut writes) = load.finish();
    puts.append(&mut writes.puts);
    writes.puts = puts;
    store.write(&writes);
    root
}

impl Store {
    /// A copy in which the first full chunk record whose slots `pick` takes
    /// (it names a slot) names another entry hash at that slot; with that
    /// record's slots as they were.
    pub fn with_entry_hash_flipped(
        &self,
        capacity: usize,
        pick: impl Fn(&[Slot]) -> Option<usize>,
    ) -> (Store, Vec<Slot>) {
        let mut bad = self.clone();
        for (key, bytes) in self.records.get(&(Table::Chunks as u8)).into_iter().flatten() {
            let Ok(ChunkRecord::Full { slots, groups }) = ChunkRecord::decode(bytes, capacity) else { continue };
            let Some(at) = pick(&slots) else { continue };
            let mut flipped = slots.clone();
            flipped[at].entry = flip_hash(flipped[at].entry);
            bad.table(Table::Chunks).insert(key.clone(), encode_full(&flipped, &groups));
            return (bad, slots);
        }
        panic!("no full chunk record that `pick` takes");
    }

    pub fn table(&mut self, t: Table) -> &mut Records {
        self.records.entry(t as u8).or_default()
    }

    pub fn get(&self, t: Table, r: &Ref) -> Option<&[u8]> {
        self.records.get(&(t as u8))?.get(r.key().as_slice()).map(Vec::as_slice)
    }

    /// One commit, or a piece of one (no version record): the records it
    /// discards first, as the backends order deletes before puts; then new
    /// records, stale marks, and the version record.
    pub fn write(&mut self, w: &WriteSet) {
        for (t, r) in &w.discarded {
            assert_eq!(r.birth, w.version, "only records born at the version are discarded");
            // A full chunk record's values records are discarded with it, those of every group.
            let removed = self.table(*t).remove(r.key().as_slice()).is_some();
            assert!(removed || *t == Table::Values, "a discarded record was written");
        }
        for (t, r, bytes) in &w.puts {
            self.table(*t).insert(r.key().to_vec(), bytes.clone());
        }
        for (t, r) in &w.stale {
            self.stale.insert(stale_key(w.version, *t, r).to_vec(), Vec::new());
        }
        if !w.version_record.is_empty() {
            self.versions.insert(be(w.version), w.version_record.clone());
        }
    }

    /// Deletes what a batch that never committed wrote ahead: records and
    /// stale marks born after `head` (as the store's open does).
    pub fn remove_unborn(&mut self, head: u64) {
        let after = be(head + 1);
        self.stale.retain(|k, _| k[..8] < after[..]);
        for t in RECORD_TABLES {
            self.table(t).retain(|k, _| k[..8] < after[..]);
        }
    }

    pub fn version_numbers(&self) -> Vec<u64> {
        self.versions.keys().map(|k| u64::from_be_bytes(k[..8].try_into().unwrap())).collect()
    }

    /// Keeps versions `≥ keep_from`: deletes what is stale at or before it.
    pub fn prune(&mut self, keep_from: u64) {
        let due: Vec<Vec<u8>> = self.stale.range(..be(keep_from + 1)).map(|(k, _)| k.clone()).collect();
        for k in due {
            let table = [Table::Nodes, Table::Chunks, Table::Entries][k[8] as usize - 1];
            self.table(table).remove(&k[9..]);
            if table == Table::Chunks {
                let r = Ref::from_key(&k[9..]).unwrap();
                for v in values_refs(&r, 4096) {
                    self.table(Table::Values).remove(v.key().as_slice());
                }
            }
            self.stale.remove(&k);
        }
        self.versions.retain(|k, _| k.as_slice() >= be(keep_from).as_slice());
    }

    /// Makes `to` the head: later versions, their records and their stale marks go.
    pub fn rollback(&mut self, to: u64) {
        let after = be(to + 1);
        self.versions.retain(|k, _| k < &after);
        self.remove_unborn(to);
    }

    pub fn load(&self, version: u64, capacity: usize) -> Result<Tree, StoreError> {
        self.load_as(version, capacity, false)
    }

    /// The version whole, or (`paged`) its inner nodes only.
    pub fn load_as(&self, version: u64, capacity: usize, paged: bool) -> Result<Tree, StoreError> {
        let record = self.versions.get(&be(version)).ok_or(StoreError::VersionUnknown)?;
        let mut loader =
            if paged { Loader::head(version, record, capacity)? } else { Loader::new(version, record, capacity)? };
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
    pub fn reachable(&self, capacity: usize) -> BTreeSet<(u8, Vec<u8>)> {
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
                    // A full record reaches the values records of its groups that hold values.
                    let mut values_of = |full: &Ref, slots: &[Slot]| {
                        out.extend(
                            held_groups(slots).map(|g| (Table::Values as u8, values_ref(full, g).key().to_vec())),
                        );
                    };
                    let slots = match ChunkRecord::decode(self.get(Table::Chunks, &r).unwrap(), capacity).unwrap() {
                        ChunkRecord::Full { slots, .. } => {
                            values_of(&r, &slots);
                            slots
                        }
                        ChunkRecord::Delta(d) => {
                            let ChunkRecord::Full { slots: b, .. } =
                                ChunkRecord::decode(self.get(Table::Chunks, &d.base).unwrap(), capacity).unwrap()
                            else {
                                panic!("a delta's base is full")
                            };
                            values_of(&d.base, &b);
                            out.insert((Table::Chunks as u8, d.base.key().to_vec()));
                            bpavl_core::record::apply_edits(&b, &d.edits, capacity).unwrap()
                        }
                    };
                    let records = slots.iter().filter_map(|s| s.entry.record());
                    out.extend(records.map(|r| (Table::Entries as u8, r.key().to_vec())));
                }
            }
        }
        out
    }

    pub fn present(&self) -> BTreeSet<(u8, Vec<u8>)> {
        self.records.iter().flat_map(|(t, recs)| recs.keys().map(move |k| (*t, k.clone()))).collect()
    }
}

/// `entry` naming another entry hash (its first byte flipped).
pub fn flip_hash(entry: Entry) -> Entry {
    let flip = |mut h: [u8; 32]| {
        h[0] ^= 1;
        h
    };
    match entry {
        Entry::Record(r) => Entry::Record(Ref { hash: flip(r.hash), ..r }),
        Entry::Held(h) => Entry::Held(flip(h)),
    }
}

/// A tree's entries.
pub fn entries(tree: &Tree) -> Model {
    tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

/// The store holds exactly the records its retained versions reach.
pub fn assert_no_garbage(store: &Store, capacity: usize) {
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

/// A store holding a random state of `n` writes of `model_keys` (over a few
/// commits, or one bulk load whose chunk records hold their values), the
/// tree it holds, and the next state, `changes` random writes later.
pub fn random_states(
    rng: &mut SplitMix64,
    capacity: usize,
    n: usize,
    changes: usize,
    bulk: bool,
) -> (Store, Tree, Tree) {
    let mut store = Store::default();
    let mut tree = Tree::new(capacity).unwrap();
    let domain = (n as u64 * 2).max(4);
    for i in 0..n {
        let k = rng.below(domain) as u16;
        if rng.below(5) == 0 {
            tree.remove(&crate::model_keys::key(k));
        } else {
            tree.insert(&crate::model_keys::key(k), &crate::model_keys::value(k, rng.below(256) as u8)).unwrap();
        }
        if !bulk && (i % (n / 3 + 1) == 0 || i + 1 == n) {
            let (_, ws) = tree.commit_to_store();
            store.write(&ws);
        }
    }
    if bulk {
        bulk_load(&mut store, capacity, tree.iter());
        tree = store.load(1, capacity).unwrap();
    }
    let mut target = tree.clone();
    for _ in 0..changes {
        let k = rng.below(domain) as u16;
        match rng.below(3) {
            0 => {
                target.remove(&crate::model_keys::key(k));
            }
            _ => {
                target.insert(&crate::model_keys::key(k), &crate::model_keys::value(k, rng.below(256) as u8)).unwrap();
            }
        }
    }
    target.commit();
    (store, tree, target)
}
