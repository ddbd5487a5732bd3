//! The store's layout against a model (`docs/store.md`): random inserts,
//! removes, commits, prunes, rollbacks and reopens, with the commit's write
//! sets applied to an in-memory store that works as `@bpavl/store` does
//! (tables of sorted byte keys). After every step, every retained version
//! loads from the store to exactly its model and root, and the store holds
//! exactly the records that the retained versions reach: pruning and
//! rollback leave no garbage and lose nothing. Flipped or removed records
//! fail with `STORE_CORRUPT`, never with a wrong tree.
//!
//! Each run is done twice: with the head loaded whole, and as a paged head
//! (`Loader::head`) that loads chunks as writes need them and evicts them
//! after each commit down to a small budget.

use std::collections::{BTreeMap, BTreeSet};

use bpavl_core::hash::entry_hash;
use bpavl_core::record::{encode_entry, ChunkRecord, NodeRecord, Ref, Slot, Table};
use bpavl_core::{Commit, StoreError, Tree, WriteSet};
use proptest::prelude::*;

mod model_keys;
mod store_kit;
use model_keys::{key, value};
use store_kit::{assert_no_garbage, be, bulk_load, committed, entries, Model, Store};

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

/// Every retained version loads to its model and root; the store holds
/// exactly what they reach, and what a pending batch wrote ahead (born
/// after the head).
fn check(store: &Store, versions: &BTreeMap<u64, (Model, [u8; 32])>, capacity: usize) {
    assert_eq!(store.version_numbers(), versions.keys().copied().collect::<Vec<_>>());
    for (&v, (model, root)) in versions {
        let tree = store.load(v, capacity).unwrap();
        assert_eq!((tree.head().version(), tree.head().root()), (v, *root));
        assert_eq!(&entries(&tree), model);
    }
    let mut born = store.clone();
    born.remove_unborn(versions.keys().last().copied().unwrap_or(0));
    assert_no_garbage(&born, capacity);
}

/// Reads the entry records that confirm a paged head's writes (a loaded head has none).
fn confirm(tree: &mut Tree, store: &Store) -> Result<(), StoreError> {
    for (t, r) in tree.unconfirmed() {
        tree.supply_record(t, &r, store.get(t, &r))?;
    }
    Ok(())
}

/// Confirms the slot of every other key from the value the model holds
/// (`Tree::confirm_read`, as a read before the write), the others by their
/// entry records (`confirm`). The model's value may be one the batch wrote,
/// which confirms nothing: that slot is the batch's own.
fn confirm_some(tree: &mut Tree, model: &Model, k: u16) {
    if let Some(value) = model.get(&key(k)).filter(|_| k % 2 == 0) {
        tree.confirm_read(&key(k), value);
    }
}

/// Loads the chunks a write of `key` needs into a paged head (a loaded head needs none).
fn load_for(tree: &mut Tree, store: &Store, key: &[u8], removing: bool) {
    for _ in 0..16 {
        let wanted = tree.needed_for(key, removing).unwrap();
        if wanted.is_empty() {
            return;
        }
        for (t, r) in wanted {
            tree.supply_record(t, &r, store.get(t, &r)).unwrap();
        }
    }
    let w = tree.needed_for(key, removing).unwrap();
    let kinds: Vec<_> = w
        .iter()
        .map(|(t, r)| {
            (
                r.birth,
                store.get(*t, r).map(|b| match ChunkRecord::decode(b, tree.capacity()).unwrap() {
                    ChunkRecord::Full { slots, .. } => format!("full {}", slots.len()),
                    ChunkRecord::Delta(d) => format!("delta of {}", d.base.birth),
                }),
            )
        })
        .collect();
    panic!("a write needs a few rounds at most: {kinds:?} removing {removing}");
}

/// Commits `tree` into `store`: its changed chunks written ahead in pieces
/// bounded by `piece_bytes` (`Tree::write_ahead`; `usize::MAX`: none), then the rest.
fn commit_in_pieces(tree: &mut Tree, store: &mut Store, piece_bytes: usize) -> Commit {
    if piece_bytes < usize::MAX {
        loop {
            let piece = tree.write_ahead(piece_bytes);
            if piece.puts.is_empty() {
                break;
            }
            assert!(piece.version_record.is_empty());
            store.write(&piece);
        }
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    commit
}

/// Writes every changed chunk of a pending batch ahead, a chunk a piece,
/// and unloads every chunk: the batch holds nothing between two writes.
fn spill(tree: &mut Tree, store: &mut Store) {
    confirm(tree, store).unwrap();
    loop {
        let piece = tree.write_ahead(1);
        store.write(&piece);
        if piece.puts.is_empty() {
            break;
        }
    }
    tree.evict(0);
    assert_eq!(tree.resident_bytes(), 0);
}

fn run(capacity: usize, ops: &[Op]) {
    for bulk in [false, true] {
        run_as(capacity, ops, None, false, bulk);
        // Evicting every chunk after a commit, and keeping about two.
        run_as(capacity, ops, Some(0), false, bulk);
        run_as(capacity, ops, Some(2 * (capacity * 200)), false, bulk);
        // Writing every changed chunk ahead after each write.
        run_as(capacity, ops, Some(0), true, bulk);
    }
}

/// `paged`: the head is paged, evicted down to this many bytes after each
/// commit; `spilling`: and it holds no chunk between writes ([`spill`]);
/// `bulk`: the first commit is a bulk load, whose chunk records hold their
/// values, which later versions keep, move and copy.
fn run_as(capacity: usize, ops: &[Op], paged: Option<usize>, spilling: bool, bulk: bool) {
    let mut store = Store::default();
    let mut tree = Tree::new(capacity).unwrap();
    let mut model = Model::new();
    let mut versions: BTreeMap<u64, (Model, [u8; 32])> = BTreeMap::new();
    for op in ops {
        match *op {
            Op::Insert(k, s) => {
                load_for(&mut tree, &store, &key(k), false);
                confirm_some(&mut tree, &model, k);
                tree.insert(&key(k), &value(k, s)).unwrap();
                model.insert(key(k), value(k, s));
            }
            Op::Remove(k) => {
                load_for(&mut tree, &store, &key(k), true);
                confirm_some(&mut tree, &model, k);
                assert_eq!(tree.remove(&key(k)), model.remove(&key(k)).is_some());
            }
            _ => {}
        }
        match *op {
            Op::Insert(..) | Op::Remove(_) if spilling => spill(&mut tree, &mut store),
            Op::Insert(..) | Op::Remove(_) => {}
            Op::Commit if bulk && versions.is_empty() => {
                // What the batch wrote ahead goes, as at an open, and the load replaces it.
                store.remove_unborn(0);
                let root = bulk_load(&mut store, capacity, model.iter().map(|(k, v)| (&k[..], &v[..])));
                versions.insert(1, (model.clone(), root));
                tree = store.load_as(1, capacity, paged.is_some()).unwrap();
            }
            Op::Commit => {
                confirm(&mut tree, &store).unwrap();
                // The head that keeps nothing writes its chunks ahead, one a piece.
                let commit = commit_in_pieces(&mut tree, &mut store, if paged == Some(0) { 1 } else { usize::MAX });
                versions.insert(commit.version, (model.clone(), commit.root));
                if let Some(budget) = paged {
                    // Every chunk is stored now, so each can go.
                    tree.evict(budget);
                    assert!(tree.resident_bytes() <= budget);
                }
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
                tree = store.load_as(to, capacity, paged.is_some()).unwrap();
                model = versions[&to].0.clone();
            }
            Op::Reopen => {
                let Some(&head) = versions.keys().last() else { continue };
                // The pending batch is lost, and what it wrote ahead goes.
                store.remove_unborn(head);
                tree = store.load_as(head, capacity, paged.is_some()).unwrap();
                model = versions[&head].0.clone();
            }
        }
        if !matches!(op, Op::Insert(..) | Op::Remove(_)) {
            check(&store, &versions, capacity);
        }
    }
    confirm(&mut tree, &store).unwrap();
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

/// A commit written ahead chunk by chunk writes exactly the records and
/// stale marks of one write set, and leaves no changed chunk loaded.
#[test]
fn a_commit_written_ahead_writes_what_one_write_set_does() {
    let mut tree = Tree::new(16).unwrap();
    for i in 0..4_000u32 {
        tree.insert(&i.wrapping_mul(2_654_435_761).to_be_bytes(), &[1; 24]).unwrap();
    }
    let (mut one, mut ahead) = (tree.clone(), tree);
    let (first, whole) = one.commit_to_store();
    // Puts come in table and key order, so that a B-tree takes them as appends.
    let in_order =
        |w: &WriteSet| w.puts.windows(2).all(|p| (p[0].0 as u8, p[0].1.key()) < (p[1].0 as u8, p[1].1.key()));
    assert!(in_order(&whole));
    let sorted = |mut w: Vec<WriteSet>| {
        let mut puts: Vec<_> =
            w.iter_mut().flat_map(|w| std::mem::take(&mut w.puts)).map(|(t, r, v)| (t as u8, r.key(), v)).collect();
        let mut stale: Vec<_> =
            w.iter_mut().flat_map(|w| std::mem::take(&mut w.stale)).map(|(t, r)| (t as u8, r.key())).collect();
        puts.sort();
        stale.sort();
        (puts, stale, w.last().unwrap().version_record.clone())
    };
    let mut pieces = Vec::new();
    let held = ahead.resident_bytes();
    loop {
        let piece = ahead.write_ahead(4_000);
        if piece.puts.is_empty() {
            break;
        }
        // A piece stops at the first chunk that reaches the bound.
        let chunk_records = piece.puts.iter().filter(|p| p.0 == Table::Chunks).count();
        let bytes: usize = piece.puts.iter().map(|p| p.2.len()).sum();
        assert!(chunk_records == 1 || bytes < 4_000 + 16 * 80, "{bytes} bytes in {chunk_records} chunks");
        assert!(in_order(&piece));
        pieces.push(piece);
    }
    assert!(pieces.len() > 10, "{} pieces", pieces.len());
    assert_eq!(ahead.resident_bytes(), 0);
    // Each piece says what it unloaded: together, all the head held.
    assert_eq!(pieces.iter().map(|p| p.unloaded).sum::<usize>(), held);
    let (commit, last) = ahead.commit_to_store();
    pieces.push(last);
    assert_eq!((commit.version, commit.root), (first.version, first.root));
    assert_eq!(sorted(pieces), sorted(vec![whole]));
}

/// A paged head that keeps no chunk between writes (each write commits, then
/// evicts everything or loads the head again) against a tree held whole: the same roots after
/// every write, whatever the rotations of a merge reach.
fn paged_against_whole(capacity: usize, ops: &[(bool, u16)]) {
    let (mut store, mut whole) = (Store::default(), Tree::new(capacity).unwrap());
    let mut paged = Tree::new(capacity).unwrap();
    for &(removing, k) in ops {
        load_for(&mut paged, &store, &key(k), removing);
        if removing {
            assert_eq!(paged.remove(&key(k)), whole.remove(&key(k)));
        } else {
            paged.insert(&key(k), &value(k, 0)).unwrap();
            whole.insert(&key(k), &value(k, 0)).unwrap();
        }
        confirm(&mut paged, &store).unwrap();
        let (commit, writes) = paged.commit_to_store();
        store.write(&writes);
        assert_eq!(commit.root, whole.commit().root);
        if k % 2 == 0 {
            paged.evict(0);
            assert_eq!(paged.resident_bytes(), 0);
        } else {
            // Loaded afresh, the counts of sibling stubs are unknown.
            paged = store.load_as(commit.version, capacity, true).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_paged_head_writes_what_a_whole_one_does(
        capacity in 2usize..=3,
        ops in prop::collection::vec((prop::bool::weighted(0.45), 0..300u16), 1..1500),
    ) {
        paged_against_whole(capacity, &ops);
    }
}

/// Slot keys and key copies are not hashed. A byte flipped anywhere in a
/// chunk or node record makes a paged head's write that reaches it, or the
/// confirmation before its commit, fail with `STORE_CORRUPT`; or the write
/// landed where the key is (an update stays an update) and commits a
/// version that loads whole to exactly the written contents,
/// or is refused as corrupt itself (a flip the write did not touch is
/// carried, and caught on reading): never a wrong tree.
#[test]
fn a_flipped_record_never_makes_a_paged_write_wrong() {
    let capacity = 4;
    let (mut store, mut tree, mut model) = (Store::default(), Tree::new(capacity).unwrap(), Model::new());
    for k in (0..120u16).step_by(2) {
        tree.insert(&key(k), &value(k, 1)).unwrap();
        model.insert(key(k), value(k, 1));
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    let (mut refused, mut written) = (0, 0);
    let records = |t: Table| store.records[&(t as u8)].clone().into_iter().map(move |(k, v)| (t, k, v));
    for (table, record_key, bytes) in records(Table::Chunks).chain(records(Table::Nodes)) {
        // Writes that reach a chunk: updates of its keys, and a new key after its first;
        // a node's key copy routes writes anywhere below it: every sixth key, present or not.
        let keys: Vec<Vec<u8>> = match ChunkRecord::decode(&bytes, capacity) {
            Ok(ChunkRecord::Full { slots, .. }) => {
                let first = [slots[0].key.as_slice(), b"~"].concat();
                slots.into_iter().map(|s| s.key.to_vec()).chain([first]).collect()
            }
            _ => (0..121u16).step_by(6).map(key).collect(),
        };
        for at in 0..bytes.len() {
            for (k, removing) in keys.iter().flat_map(|k| [(k, false), (k, true)]) {
                let mut bad = store.clone();
                bad.table(table).get_mut(&record_key).unwrap()[at] ^= 0x04;
                let Ok(mut head) = bad.load_as(commit.version, capacity, true) else {
                    refused += 1;
                    continue;
                };
                let outcome: Result<(), StoreError> = (|| {
                    for _ in 0..16 {
                        let wanted = head.needed_for(k, removing)?;
                        if wanted.is_empty() {
                            return Ok(());
                        }
                        for (t, r) in wanted {
                            head.supply_record(t, &r, bad.get(t, &r))?;
                        }
                    }
                    unreachable!("a write needs a few rounds")
                })();
                if let Some(value) = model.get(k).filter(|_| at % 2 == 0) {
                    // A value read before the write confirms only the slot whose entry it is.
                    head.confirm_read(k, value);
                }
                let mut expected = model.clone();
                let outcome = outcome.and_then(|()| {
                    let (answer, right) = match removing {
                        true => (head.remove(k), expected.remove(k).is_some()),
                        false => {
                            (head.insert(k, b"new").unwrap(), expected.insert(k.clone(), b"new".to_vec()).is_none())
                        }
                    };
                    confirm(&mut head, &bad).map(|()| (answer, right))
                });
                let (answer, right) = match outcome {
                    Err(e) => {
                        assert_eq!(e, StoreError::Corrupt);
                        refused += 1;
                        continue;
                    }
                    Ok(answers) => answers,
                };
                // Confirmed, the write landed where the key is (or would be): an update
                // was not taken for an insert, nor a present key for an absent one.
                assert_eq!(answer, right, "byte {at}, key {k:?}, removing {removing}");
                let (next, writes) = head.commit_to_store();
                bad.write(&writes);
                match bad.load(next.version, capacity) {
                    Ok(loaded) => assert_eq!(entries(&loaded), expected, "byte {at}, key {k:?}"),
                    Err(e) => assert_eq!(e, StoreError::Corrupt),
                }
                written += 1;
            }
        }
    }
    // Most flips are caught on the way in; a flip in a slot the write does not touch is carried, and caught on reading.
    assert!(refused > written, "{refused} refused, {written} written");
}

/// A value read before a write confirms its key's slot in place of the
/// entry record, and only the value that slot's entry hash names does.
#[test]
fn a_read_value_confirms_its_slot_without_the_entry_record() {
    let capacity = 8;
    let (mut store, mut tree, mut model) = (Store::default(), Tree::new(capacity).unwrap(), Model::new());
    for k in 0..64u16 {
        tree.insert(&key(k), &value(k, 1)).unwrap();
        model.insert(key(k), value(k, 1));
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    let mut head = store.load_as(commit.version, capacity, true).unwrap();
    for k in [3u16, 20, 41] {
        load_for(&mut head, &store, &key(k), false);
        assert_eq!(head.unconfirmed().len(), 1);
        // Another key's value, or another value, confirms nothing.
        head.confirm_read(&key(k), &value(k + 1, 1));
        head.confirm_read(&key(k), &value(k, 2));
        assert_eq!(head.unconfirmed().len(), 1);
        head.confirm_read(&key(k), &model[&key(k)]);
        assert!(head.unconfirmed().is_empty());
        head.insert(&key(k), &value(k, 3)).unwrap();
        model.insert(key(k), value(k, 3));
        // A removal relies on the slot it removes, confirmed the same way.
        let gone = k + 1;
        load_for(&mut head, &store, &key(gone), true);
        assert!(!head.unconfirmed().is_empty());
        head.confirm_read(&key(gone), &model[&key(gone)]);
        assert!(head.unconfirmed().is_empty());
        assert!(head.remove(&key(gone)));
        model.remove(&key(gone));
    }
    let (next, writes) = head.commit_to_store();
    store.write(&writes);
    assert_eq!(entries(&store.load(next.version, capacity).unwrap()), model);
}

/// A write over a bulk-loaded chunk confirms its slot key from the values
/// record of that slot's group alone, not the 16 of the chunk record (a
/// first commit after a bulk load read them all, at 10M a gigabyte): also
/// through a delta of that record, whose held slots name its groups by key.
#[test]
fn a_write_over_held_values_reads_the_one_values_record_of_its_group() {
    let capacity = 256;
    let mut store = Store::default();
    let model: Model = (0..4000u16).map(|k| (key(k), value(k, 1))).collect();
    bulk_load(&mut store, capacity, model.iter().map(|(k, v)| (&k[..], &v[..])));
    let mut model = model;
    let mut version = 1;
    for (round, k) in [(1u8, 1234u16), (2, 1240), (3, 3999)] {
        let mut head = store.load_as(version, capacity, true).unwrap();
        load_for(&mut head, &store, &key(k), false);
        let wanted = head.unconfirmed();
        assert!(wanted.iter().all(|(t, _)| *t == Table::Values), "{wanted:?}");
        assert_eq!(wanted.len(), 1, "round {round}");
        for (t, r) in wanted {
            head.supply_record(t, &r, store.get(t, &r)).unwrap();
        }
        head.insert(&key(k), &value(k, round + 1)).unwrap();
        model.insert(key(k), value(k, round + 1));
        let (next, writes) = head.commit_to_store();
        store.write(&writes);
        version = next.version;
        assert_eq!(entries(&store.load(version, capacity).unwrap()), model);
    }
}

/// A store that forges a slot key of a chunk record (no hash covers it)
/// sends a write of the forged key to that slot, whose entry is another
/// key's. A value read for it cannot confirm the slot (only the slot's own
/// entry hashes to its entry hash), so the write is refused at the commit.
#[test]
fn a_read_value_does_not_confirm_a_forged_slot_key() {
    let capacity = 8;
    let (mut store, mut tree) = (Store::default(), Tree::new(capacity).unwrap());
    for k in 0..16u16 {
        tree.insert(&key(k), &value(k, 1)).unwrap();
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    let mut bad = store.clone();
    let (record_key, bytes) =
        bad.records[&(Table::Chunks as u8)].iter().next().map(|(k, v)| (k.clone(), v.clone())).unwrap();
    let Ok(ChunkRecord::Full { mut slots, groups }) = ChunkRecord::decode(&bytes, capacity) else {
        panic!("full chunks")
    };
    // Between its neighbours, so that the record still decodes.
    let real = slots[1].key.to_vec();
    let forged = [real.as_slice(), b"~"].concat();
    slots[1].key = forged.as_slice().into();
    bad.table(Table::Chunks).insert(record_key, ChunkRecord::Full { slots, groups }.encode());
    let mut head = bad.load_as(commit.version, capacity, true).unwrap();
    load_for(&mut head, &bad, &forged, false);
    // The slot's own value, under the forged key.
    let (_, own) =
        entries(&store.load(commit.version, capacity).unwrap()).into_iter().find(|(k, _)| *k == real).unwrap();
    head.confirm_read(&forged, &own);
    assert_eq!(head.unconfirmed().len(), 1);
    head.insert(&forged, b"new").unwrap();
    assert_eq!(confirm(&mut head, &bad), Err(StoreError::Corrupt));
}

/// A paged head checks a loaded chunk's groups as its writes use them: an
/// update checks its own group, a write that moves entries every group. A
/// flipped entry hash in another group is carried to the next version,
/// whose whole load finds it (as a read of that group would).
#[test]
fn a_paged_write_checks_the_groups_it_uses() {
    let capacity = 64;
    let (store, _, version) = committed(capacity, 60);
    // Slot 40 (group 2 of 4) of the one chunk of 60 entries names another entry hash.
    let (bad, slots) = store.with_entry_hash_flipped(capacity, |s| (s.len() == 60).then_some(40));
    let keys: Vec<Vec<u8>> = slots.iter().map(|s| s.key.to_vec()).collect();
    let write = |k: &[u8], new_key: bool| -> Result<Tree, StoreError> {
        let mut head = bad.load_as(version, capacity, true)?;
        for _ in 0..4 {
            let wanted = head.needed_for(k, false)?;
            if wanted.is_empty() {
                assert_eq!(head.insert(k, b"new").unwrap(), new_key);
                confirm(&mut head, &bad)?;
                return Ok(head);
            }
            for (t, r) in wanted {
                head.supply_record(t, &r, bad.get(t, &r))?;
            }
        }
        unreachable!("a write needs a few rounds")
    };
    // Updates in groups 0, 1 and 3 write; the next version carries the flip, and its load finds it.
    for at in [0, 17, 63 - 4] {
        let mut head = write(&keys[at], false).unwrap();
        let (next, writes) = head.commit_to_store();
        let mut after = bad.clone();
        after.write(&writes);
        assert_eq!(after.load(next.version, capacity).err(), Some(StoreError::Corrupt), "slot {at}");
    }
    // An update in group 2, and a new key (it moves entries), are refused.
    for at in [32, 40, 47] {
        assert_eq!(write(&keys[at], false).err(), Some(StoreError::Corrupt), "slot {at}");
    }
    let new_key = [keys[3].as_slice(), b"~"].concat();
    assert_eq!(write(&new_key, true).err(), Some(StoreError::Corrupt));
    // Unflipped, every one of these writes commits a version that loads whole.
    for k in [&keys[0], &keys[40], &new_key] {
        let mut head = store.clone();
        let mut tree = head.load_as(version, capacity, true).unwrap();
        load_for(&mut tree, &head, k, false);
        tree.insert(k, b"new").unwrap();
        confirm(&mut tree, &head).unwrap();
        let (next, writes) = tree.commit_to_store();
        head.write(&writes);
        assert_eq!(
            entries(&head.load(next.version, capacity).unwrap()).get(k.as_slice()).map(Vec::as_slice),
            Some(&b"new"[..])
        );
    }
}

/// A store that forges the first slot of a chunk (another key, an entry
/// hash of that key with a value whose record it adds, and the key copy
/// above it) cannot make a paged head insert past that key: the head checks
/// the group of the next chunk's first slot before it relies on its key.
#[test]
fn a_forged_first_key_of_the_next_chunk_is_caught() {
    let capacity = 16;
    let (mut store, mut tree) = (Store::default(), Tree::new(capacity).unwrap());
    for k in (0..96u16).step_by(2) {
        tree.insert(&key(k), &value(k, 1)).unwrap();
    }
    let (commit, writes) = tree.commit_to_store();
    store.write(&writes);
    let mut chunks: Vec<_> = store.records[&(Table::Chunks as u8)]
        .iter()
        .map(|(k, v)| match ChunkRecord::decode(v, capacity) {
            Ok(ChunkRecord::Full { slots, groups }) => (k.clone(), slots, groups),
            _ => panic!("full chunks"),
        })
        .collect();
    chunks.sort_by(|a, b| a.1[0].key.cmp(&b.1[0].key));
    let (record_key, mut slots, groups) = chunks.swap_remove(1);
    let real = slots[0].key.to_vec();
    let (fake, inserted) = ([real.as_slice(), b"~"].concat(), [real.as_slice(), b"0"].concat());
    let birth = slots[0].entry.record().expect("a tree's commit writes entry records").birth;
    let forged = Ref { birth, hash: entry_hash(&fake, b"x") };
    slots[0] = Slot::new(&fake, forged);
    let mut bad = store.clone();
    bad.table(Table::Chunks).insert(record_key, ChunkRecord::Full { slots, groups }.encode());
    bad.table(Table::Entries).insert(forged.key().to_vec(), encode_entry(b"x"));
    let nodes = bad.table(Table::Nodes).clone();
    let mut copies = 0;
    for (k, v) in nodes {
        let hash: [u8; 32] = k[8..].try_into().unwrap();
        let mut node = NodeRecord::decode(&v, &hash).unwrap();
        if node.key_copy == real {
            node.key_copy = fake.clone();
            bad.table(Table::Nodes).insert(k, node.encode());
            copies += 1;
        }
    }
    assert_eq!(copies, 1);
    let mut head = bad.load_as(commit.version, capacity, true).unwrap();
    let outcome = (|| {
        for _ in 0..8 {
            let wanted = head.needed_for(&inserted, false)?;
            if wanted.is_empty() {
                return Ok(());
            }
            for (t, r) in wanted {
                head.supply_record(t, &r, bad.get(t, &r))?;
            }
        }
        unreachable!("a write needs a few rounds")
    })();
    assert_eq!(outcome, Err(StoreError::Corrupt));
}

/// A batch that writes its chunk ahead and then empties the tree discards
/// that chunk's records: the empty version leaves nothing behind.
#[test]
fn a_batch_that_empties_a_tree_it_wrote_ahead_discards_what_it_wrote() {
    let (mut store, tree, v) = committed(4, 2);
    let mut versions = BTreeMap::from([(v, (entries(&tree), tree.head().root()))]);
    let mut paged = store.load_as(v, 4, true).unwrap();
    load_for(&mut paged, &store, &key(2), false);
    paged.insert(&key(2), &value(2, 1)).unwrap();
    spill(&mut paged, &mut store);
    for k in 0..3 {
        load_for(&mut paged, &store, &key(k), true);
        assert!(paged.remove(&key(k)));
    }
    confirm(&mut paged, &store).unwrap();
    let (commit, writes) = paged.commit_to_store();
    let written_ahead = writes.discarded.iter().filter(|(t, _)| *t != Table::Values).count();
    assert_eq!(written_ahead, 2, "the chunk and the entry written ahead");
    // A full chunk record's values records go with it, one ref a group (a group of 4 at C = 4).
    assert_eq!(writes.discarded.len(), 2 + 1);
    store.write(&writes);
    versions.insert(commit.version, (Model::new(), commit.root));
    check(&store, &versions, 4);
}
