//! Syncing into a store (`StoreSync`, `spec/store-format.md`, "Sync
//! progress"): chunks added in any order, with interruptions at any point,
//! finish as a stored version that loads as the source tree; a stored chunk
//! that does not check out is refused, never used.

use std::collections::BTreeMap;

use bpavl_core::record::{ChunkRecord, Entry, Ref, Table};
use bpavl_core::{verify_chunk, Loader, RebuildError, StoreError, StoreSync, Tree, WriteSet};
use bpavl_testkit::rng::SplitMix64;

mod model_keys;
use model_keys::{key, value};

/// A store's record tables and the progress records of one sync, by chunk index.
#[derive(Default)]
struct Store {
    records: BTreeMap<(u8, [u8; 40]), Vec<u8>>,
    progress: BTreeMap<u64, Vec<u8>>,
    version_record: Option<Vec<u8>>,
}

impl Store {
    fn put(&mut self, puts: &[(Table, Ref, Vec<u8>)]) {
        for (t, r, bytes) in puts {
            self.records.insert((*t as u8, r.key()), bytes.clone());
        }
    }

    fn get(&self, t: Table, r: &Ref) -> Option<&[u8]> {
        self.records.get(&(t as u8, r.key())).map(Vec::as_slice)
    }

    fn finish(&mut self, w: &WriteSet) {
        assert!(w.stale.is_empty(), "a synced version replaces nothing");
        self.put(&w.puts);
        self.version_record = Some(w.version_record.clone());
        self.progress.clear();
    }

    fn load(&self, version: u64, capacity: usize) -> Tree {
        let loader = Loader::new(version, self.version_record.as_ref().unwrap(), capacity).unwrap();
        loader.load_from(|t, r| self.get(t, r)).unwrap()
    }
}

fn source(capacity: usize, n: u16, seed: u64) -> Tree {
    let mut rng = SplitMix64::new(seed);
    let mut t = Tree::new(capacity).unwrap();
    for _ in 0..n {
        let k = rng.below(4 * n as u64) as u16;
        t.insert(&key(k), &value(k, rng.below(200) as u8)).unwrap();
    }
    t.commit();
    t
}

fn shuffled(n: u64, rng: &mut SplitMix64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..n).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    order
}

/// Adds chunk `i` of `src` to `sync` and writes what it adds to `store`.
fn add(sync: &mut StoreSync, store: &mut Store, src: &Tree, i: u64) {
    let root = src.head().root();
    let chunk = verify_chunk(&root, i, &src.head().export_chunk_bytes(i).unwrap()).unwrap();
    if let Some(w) = sync.add(chunk).unwrap() {
        store.put(&w.puts);
        store.progress.insert(i, w.progress);
    }
}

/// A new run of the sync: every stored chunk restored (or refused).
fn resume(store: &Store, root: [u8; 32], version: u64) -> (StoreSync, Vec<u64>) {
    let mut sync = StoreSync::new(root, version);
    let mut refused = Vec::new();
    for (&i, p) in &store.progress {
        let record = sync.chunk_ref(p).ok().flatten().and_then(|r| store.get(Table::Chunks, &r));
        if let Err(e) = sync.restore(i, p, record, None) {
            assert_eq!(e, StoreError::Corrupt);
            refused.push(i);
        }
    }
    (sync, refused)
}

fn assert_same(loaded: &Tree, src: &Tree) {
    assert_eq!(loaded.head().root(), src.head().root());
    assert_eq!(loaded.len(), src.len());
    let a: Vec<_> = loaded.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    let b: Vec<_> = src.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    assert_eq!(a, b);
}

#[test]
fn chunks_in_any_order_with_interruptions_finish_as_the_source_tree() {
    for (capacity, n) in [(2, 1), (2, 40), (3, 90), (4, 300), (8, 700), (256, 3000), (256, 40)] {
        for seed in 0..4u64 {
            let src = source(capacity, n, seed);
            let root = src.head().root();
            let mut rng = SplitMix64::new(seed + 100);
            let mut store = Store::default();
            let mut sync = StoreSync::new(root, 1);
            let order = shuffled(src.chunk_count(), &mut rng);
            for (done, &i) in order.iter().enumerate() {
                assert_eq!(sync.finish().err(), Some(RebuildError::Incomplete));
                // A crash now and then: the next run starts from the store alone.
                if rng.below(5) == 0 {
                    let (restored, refused) = resume(&store, root, 1);
                    assert!(refused.is_empty());
                    assert_eq!(restored.received(), done as u64);
                    sync = restored;
                }
                add(&mut sync, &mut store, &src, i);
                // A duplicate (a hedge) adds nothing.
                if rng.below(4) == 0 {
                    let chunk = verify_chunk(&root, i, &src.head().export_chunk_bytes(i).unwrap()).unwrap();
                    assert!(sync.add(chunk).unwrap().is_none());
                }
            }
            let w = sync.finish().unwrap();
            store.finish(&w);
            let mut loaded = store.load(1, capacity);
            assert_same(&loaded, &src);
            // The synced version is a stored version like any other: it takes writes.
            loaded.insert(&key(9999), &value(9999, 1)).unwrap();
            let (commit, next) = loaded.commit_to_store();
            assert_eq!(next.version, 2);
            assert_ne!(commit.root, root);
        }
    }
}

#[test]
fn a_stored_chunk_that_does_not_check_out_is_refused() {
    let src = source(4, 200, 7);
    let root = src.head().root();
    let mut store = Store::default();
    let mut sync = StoreSync::new(root, 1);
    for i in 0..src.chunk_count() {
        add(&mut sync, &mut store, &src, i);
    }
    let victim = 3u64;
    let progress = store.progress[&victim].clone();
    let chunk_ref = sync.chunk_ref(&progress).unwrap().unwrap();
    let record = store.get(Table::Chunks, &chunk_ref).unwrap().to_vec();
    let slots = match ChunkRecord::decode(&record, 4).unwrap() {
        ChunkRecord::Full { slots, .. } => slots,
        ChunkRecord::Delta(_) => unreachable!("a sync writes whole chunks"),
    };

    // Every flipped byte of the progress record is refused: the path is folded to the root again.
    for at in 0..progress.len() {
        let mut p = progress.clone();
        p[at] ^= 0x01;
        let mut s = StoreSync::new(root, 1);
        let record = s.chunk_ref(&p).ok().flatten().and_then(|r| store.get(Table::Chunks, &r));
        assert_eq!(s.restore(victim, &p, record, None), Err(StoreError::Corrupt), "progress byte {at}");
    }
    // A flipped chunk record is refused unless the flip is in a slot's key, which
    // routes searches and is checked against the entry record when that is read.
    for at in 0..record.len() {
        let mut r = record.clone();
        r[at] ^= 0x01;
        let got = StoreSync::new(root, 1).restore(victim, &progress, Some(&r), None);
        if got.is_ok() {
            let ChunkRecord::Full { slots: flipped, .. } = ChunkRecord::decode(&r, 4).unwrap() else { unreachable!() };
            assert!(flipped.iter().zip(&slots).all(|(a, b)| a.entry == b.entry), "chunk byte {at}");
        }
    }
    // A missing record, another chunk's index, another root. (The record
    // holds its values and names no other record, so it reads the same
    // whatever version wrote it.)
    let mut s = StoreSync::new(root, 1);
    assert_eq!(s.restore(victim, &progress, None, None), Err(StoreError::Corrupt));
    assert_eq!(s.restore(victim + 1, &progress, Some(&record), None), Err(StoreError::Corrupt));
    assert_eq!(StoreSync::new([9; 32], 1).restore(victim, &progress, Some(&record), None), Err(StoreError::Corrupt));
    assert!(slots.iter().all(|s| matches!(s.entry, Entry::Held(_))), "a sync into an empty store holds every value");

    // Refused chunks are fetched again, and the sync still finishes as the source.
    store.records.remove(&(Table::Chunks as u8, chunk_ref.key()));
    let (mut sync, refused) = resume(&store, root, 1);
    assert_eq!(refused, vec![victim]);
    add(&mut sync, &mut store, &src, victim);
    store.finish(&sync.finish().unwrap());
    assert_same(&store.load(1, 4), &src);
}

#[test]
fn a_chunk_of_another_root_is_refused() {
    let a = source(4, 100, 1);
    let b = source(4, 100, 2);
    let chunk = verify_chunk(&b.head().root(), 0, &b.head().export_chunk_bytes(0).unwrap()).unwrap();
    let mut sync = StoreSync::new(a.head().root(), 1);
    assert_eq!(sync.add(chunk).err().map(|e| e.code()), Some("ROOT_MISMATCH"));
}
