//! Reads from stored versions with a tiny chunk cache (`bpavl_core::pages`):
//! every lookup at every version agrees with the resident tree once its
//! entry records check, the resident chunk bytes never exceed the budget,
//! and a flipped record gives `STORE_CORRUPT` or an entry that fails its
//! check, never a wrong answer.

use std::collections::BTreeMap;

use bpavl_core::hash::entry_hash;
use bpavl_core::pages::{Absence, Lookup, Paged, Pages, RangeCursor, Value, Witness};
use bpavl_core::record::{
    decode_entry, encode_entry, held_value, Child, ChunkRecord, Entry, Ref, Table, VersionRecord,
};
use bpavl_core::{verify_absence, verify_existence, AbsenceProof, ExistenceProof, Hash, Snapshot, StoreError, Tree};
use proptest::prelude::*;

mod model_keys;
mod store_kit;

type Records = BTreeMap<(u8, [u8; 40]), Vec<u8>>;
/// A stored version: its top, its root, and the entries it holds.
type Version = (Child, Hash, BTreeMap<Vec<u8>, Vec<u8>>);

/// Stores `rounds` versions of random writes; returns the records and, per
/// version, its top and its entries.
fn stored(capacity: usize, seed: u64, rounds: usize) -> (Records, Vec<Version>) {
    let (records, versions) = stored_snapshots(capacity, seed, rounds);
    (records, versions.into_iter().map(|(v, _)| v).collect())
}

/// `stored`, with each version's snapshot.
fn stored_snapshots(capacity: usize, seed: u64, rounds: usize) -> (Records, Vec<(Version, Snapshot)>) {
    let mut x = seed | 1;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let (mut tree, mut records, mut versions) = (Tree::new(capacity).unwrap(), Records::new(), Vec::new());
    for round in 0..rounds {
        for _ in 0..60 {
            let k = (next(300) as u16).to_be_bytes();
            if next(4) == 0 {
                tree.remove(&k);
            } else {
                tree.insert(&k, &[round as u8; 9]).unwrap();
            }
        }
        let (_, w) = tree.commit_to_store();
        for (t, r, b) in w.puts {
            records.insert((t as u8, r.key()), b);
        }
        let v = VersionRecord::decode(&w.version_record, capacity).unwrap();
        let entries = tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        versions.push(((v.top.expect("never empty"), v.root, entries), tree.head().clone()));
    }
    (records, versions)
}

fn record<'a>(records: &'a Records, t: Table, r: &Ref) -> Option<&'a [u8]> {
    records.get(&(t as u8, r.key())).map(Vec::as_slice)
}

/// Looks `key` up, fetching what the pages need; returns the checked value
/// (`Ok(None)`: checked absence).
fn get(pages: &mut Pages, records: &Records, top: Child, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    get_from(pages, &|t, r| record(records, t, r), top, key, false)
}

/// [`get`] from any store: `read` gives a record's bytes. With `held`
/// values, an absence lists only the neighbours in entry records.
fn get_from<'a>(
    pages: &mut Pages,
    read: &impl Fn(Table, &Ref) -> Option<&'a [u8]>,
    top: Child,
    key: &[u8],
    held: bool,
) -> Result<Option<Vec<u8>>, StoreError> {
    for _ in 0..64 {
        match pages.lookup(top, key)? {
            Lookup::Need(wanted) => {
                for (t, r) in wanted {
                    pages.supply(t, &r, read(t, &r))?;
                }
            }
            Lookup::Found(Value::Record(entry)) => {
                let bytes = read(Table::Entries, &entry).ok_or(StoreError::Corrupt)?;
                return Ok(Some(decode_entry(bytes, &entry.hash, key)?.to_vec()));
            }
            Lookup::Found(Value::Here(value)) => return Ok(Some(value)),
            Lookup::Found(Value::Held(values, hash)) => {
                let bytes = read(Table::Values, &values).ok_or(StoreError::Corrupt)?;
                return Ok(Some(held_value(bytes, key, &hash)?.to_vec()));
            }
            Lookup::Absent(bracket) => {
                for (entry, slot_key) in &bracket {
                    let bytes = read(Table::Entries, entry).ok_or(StoreError::Corrupt)?;
                    decode_entry(bytes, &entry.hash, slot_key)?;
                }
                assert!(bracket.iter().all(|(_, k)| k.as_slice() != key), "an absence lists no entry of the key");
                let brackets = match bracket.as_slice() {
                    [(_, first), (_, last)] => first.as_slice() < key && key < last.as_slice(),
                    // A neighbour whose value a values record holds was checked by the pages, and is not listed.
                    _ if held => true,
                    [(_, only)] => key < only.as_slice() || key > only.as_slice(),
                    _ => false,
                };
                assert!(brackets, "an absence is bracketed by the entries that prove it");
                return Ok(None);
            }
        }
    }
    panic!("a lookup needs one round per level and three more");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn lookups_match_every_version_within_the_budget(capacity in 2usize..=9, seed in any::<u64>(), budget in 0usize..20_000) {
        let (records, versions) = stored(capacity, seed, 6);
        let mut pages = Pages::new(capacity, budget);
        for k in 0..320u16 {
            let (top, _, entries) = &versions[k as usize % versions.len()];
            let key = k.to_be_bytes();
            prop_assert_eq!(get(&mut pages, &records, *top, &key).unwrap(), entries.get(key.as_slice()).cloned());
            prop_assert!(pages.resident_bytes() <= pages.budget());
        }
        let (hits, misses) = pages.hits_and_misses();
        prop_assert!(misses > 0 && hits + misses >= 320);
    }

}

/// Every record flipped at a few places (its last bytes are a node's key
/// copy, an entry's value or a chunk's group node; at C = 40 a chunk has
/// groups whose leaves are checked only when a lookup uses them, so every
/// 23rd byte too): each lookup at each version is right, or is
/// `STORE_CORRUPT`.
#[test]
fn a_flipped_record_never_gives_a_wrong_answer() {
    for (capacity, seed) in [(3, 1), (3, 2), (40, 3)] {
        let (records, versions) = stored(capacity, seed, 4);
        for which in records.keys() {
            let len = records[which].len();
            let stride = if capacity > 16 { 23 } else { len };
            for at in [1, len / 2, len - 2, len - 1].into_iter().chain((0..len).step_by(stride)) {
                let mut bad = records.clone();
                bad.get_mut(which).unwrap()[at] ^= 0x01;
                let mut pages = Pages::new(capacity, 4_000);
                for k in 0..320u16 {
                    let (top, _, entries) = &versions[k as usize % versions.len()];
                    let key = k.to_be_bytes();
                    match get(&mut pages, &bad, *top, &key) {
                        Ok(answer) => {
                            assert_eq!(answer, entries.get(key.as_slice()).cloned(), "record {which:?} byte {at}")
                        }
                        Err(e) => assert_eq!(e, StoreError::Corrupt),
                    }
                }
            }
        }
    }
}

/// A bulk-loaded version (every value in a values record) and a version
/// committed over it (deltas whose kept slots read their values from their
/// base's groups, new entries in entry records): every lookup at both, with a
/// tiny cache, is the model's; a flipped record, values records included,
/// gives the model's answer or `STORE_CORRUPT`.
#[test]
fn lookups_over_values_records_and_deltas_of_them() {
    for capacity in [4usize, 17, 40] {
        let mut store = store_kit::Store::default();
        let first: Vec<(Vec<u8>, Vec<u8>)> =
            (0..200u16).map(|k| (model_keys::key(k * 2), model_keys::value(k * 2, 1))).collect();
        store_kit::bulk_load(&mut store, capacity, first.iter().map(|(k, v)| (k.as_slice(), v.as_slice())));
        let mut tree = store.load(1, capacity).unwrap();
        for k in (0..400u16).step_by(7) {
            tree.insert(&model_keys::key(k), &model_keys::value(k, 2)).unwrap();
        }
        let (_, w) = tree.commit_to_store();
        store.write(&w);
        let models = [first.into_iter().collect::<BTreeMap<_, _>>(), store_kit::entries(&tree)];
        let top = |v: u64| VersionRecord::decode(&store.versions[&store_kit::be(v)], capacity).unwrap().top.unwrap();
        let check = |store: &store_kit::Store, exact: bool| {
            let mut pages = Pages::new(capacity, 0);
            for (v, model) in [1u64, 2].iter().zip(&models) {
                for k in 0..410u16 {
                    let key = model_keys::key(k);
                    let read = |t: Table, r: &Ref| store.get(t, r);
                    match get_from(&mut pages, &read, top(*v), &key, true) {
                        Ok(answer) => {
                            assert_eq!(answer.as_ref(), model.get(&key), "C = {capacity}, version {v}, key {k}")
                        }
                        Err(e) => {
                            assert!(!exact && e == StoreError::Corrupt, "C = {capacity}, version {v}, key {k}: {e:?}")
                        }
                    }
                }
            }
        };
        check(&store, true);
        let values = store.records[&(Table::Values as u8)].clone();
        assert!(!values.is_empty());
        for (key, bytes) in values.iter().step_by(3) {
            for at in [0, bytes.len() / 2, bytes.len() - 1] {
                let mut bad = store.clone();
                bad.table(Table::Values).get_mut(key).unwrap()[at] ^= 0x01;
                check(&bad, false);
            }
        }
    }
}

#[test]
fn a_small_budget_evicts_and_counts_misses() {
    let (records, versions) = stored(4, 7, 3);
    let (top, _, entries) = versions.last().unwrap();
    let mut pages = Pages::new(4, 0);
    for key in entries.keys().chain(entries.keys()) {
        assert_eq!(get(&mut pages, &records, *top, key).unwrap().as_ref(), entries.get(key));
        assert!(pages.resident_bytes() <= pages.budget());
    }
    let (hits, misses) = pages.hits_and_misses();
    assert!(misses >= entries.len() as u64 / 4, "chunks are loaded again after eviction");
    assert!(hits > 0);
}

/// Existence proofs from the pages verify against their version's root.
#[test]
fn witnesses_from_pages_verify_against_each_versions_root() {
    for capacity in [2, 3, 8] {
        let (records, versions) = stored(capacity, 5, 5);
        let mut pages = Pages::new(capacity, 0);
        let mut proven = 0;
        for k in 0..320u16 {
            let (top, root, entries) = &versions[k as usize % versions.len()];
            let key = k.to_be_bytes();
            let (entry, witness) = loop {
                match pages.witness(*top, &key).unwrap() {
                    Witness::Found(e, w) => break Some((e, w)),
                    Witness::NotFound => break None,
                    Witness::Need(wanted) => {
                        for (t, r) in wanted {
                            pages.supply(t, &r, record(&records, t, &r)).unwrap();
                        }
                    }
                }
            }
            .unzip();
            assert_eq!(entry.is_some(), entries.contains_key(key.as_slice()));
            let (Some(entry), Some(witness)) = (entry, witness) else { continue };
            let value = match entry {
                Value::Record(r) => decode_entry(record(&records, Table::Entries, &r).unwrap(), &r.hash, &key).unwrap(),
                Value::Here(ref v) => v,
                Value::Held(..) => unreachable!("a tree's commit writes entry records"),
            };
            let proof = ExistenceProof { capacity, witness }.encode();
            verify_existence(root, &key, value, &proof).unwrap();
            proven += 1;
        }
        assert!(proven > 20, "only {proven} keys were present");
    }
}

/// A proof answered from a chunk cached before it is a hit, as a get is.
#[test]
fn witnesses_count_hits_and_misses() {
    let (records, versions) = stored(4, 3, 1);
    let (top, _, entries) = &versions[0];
    let key = entries.keys().next().unwrap();
    let mut pages = Pages::new(4, 1 << 20);
    for round in 0..3u64 {
        loop {
            match pages.witness(*top, key).unwrap() {
                Witness::Found(..) => break,
                Witness::NotFound => panic!("the key is present"),
                Witness::Need(wanted) => {
                    for (t, r) in wanted {
                        pages.supply(t, &r, record(&records, t, &r)).unwrap();
                    }
                }
            }
        }
        let (hits, misses) = pages.hits_and_misses();
        assert_eq!((hits, misses > 0), (round, true), "the first proof loads its chunk; the next ones hit it");
    }
}

/// Asks for `key`'s absence proof, fetching what the pages need.
fn absence(pages: &mut Pages, records: &Records, top: Option<Child>, key: &[u8]) -> Result<Absence, StoreError> {
    for _ in 0..64 {
        match pages.prove_absence(top, key)? {
            Absence::Need(wanted) => {
                for (t, r) in wanted {
                    pages.supply(t, &r, record(records, t, &r))?;
                }
            }
            answer => return Ok(answer),
        }
    }
    panic!("no answer in 64 rounds")
}

/// Absence proofs from the pages verify against their version's root, with
/// neighbours in one chunk, across two chunks and at either end; a present
/// key is `Present`; the empty tree has a proof without neighbours.
#[test]
fn absence_proofs_from_pages_verify_against_each_versions_root() {
    for capacity in [2, 3, 8] {
        let (records, versions) = stored(capacity, 9, 5);
        let mut pages = Pages::new(capacity, 0);
        let (mut proven, mut across) = (0, 0);
        for k in 0..330u16 {
            let (top, root, entries) = &versions[k as usize % versions.len()];
            let key = k.to_be_bytes();
            match absence(&mut pages, &records, Some(*top), &key).unwrap() {
                Absence::Present => assert!(entries.contains_key(key.as_slice())),
                Absence::Proof(proof) => {
                    assert!(!entries.contains_key(key.as_slice()));
                    let result = verify_absence(root, &key, &proof.encode()).unwrap();
                    let (l, r) =
                        (result.left.map(|n| n.position.chunk_index), result.right.map(|n| n.position.chunk_index));
                    across += usize::from(l.is_some() && r.is_some() && l != r);
                    proven += 1;
                }
                Absence::Need(_) => unreachable!(),
            }
            assert!(pages.resident_bytes() <= pages.budget());
        }
        assert!(proven > 20 && across > 0, "{proven} absent keys, {across} across two chunks");
    }
    let mut pages = Pages::new(4, 0);
    let empty = Tree::new(4).unwrap().head().root();
    let Absence::Proof(proof) = absence(&mut pages, &Records::new(), None, b"k").unwrap() else { panic!() };
    assert_eq!(*proof, AbsenceProof { capacity: 4, left: None, right: None });
    verify_absence(&empty, b"k", &proof.encode()).unwrap();
}

/// A flipped record never gives an absence proof for a present key, nor a
/// proof that fails to verify: the answer is right or `STORE_CORRUPT`.
#[test]
fn a_flipped_record_never_gives_a_wrong_absence_proof() {
    let (records, versions) = stored(3, 4, 3);
    for which in records.keys() {
        let len = records[which].len();
        for at in [1, len / 2, len - 1] {
            let mut bad = records.clone();
            bad.get_mut(which).unwrap()[at] ^= 0x01;
            let mut pages = Pages::new(3, 4_000);
            for k in (0..320u16).step_by(3) {
                let (top, root, entries) = &versions[k as usize % versions.len()];
                let key = k.to_be_bytes();
                match absence(&mut pages, &bad, Some(*top), &key) {
                    Ok(Absence::Present) => assert!(entries.contains_key(key.as_slice()), "record {which:?} byte {at}"),
                    Ok(Absence::Proof(proof)) => {
                        // Key copies are not hashed: a lie there may route to a proof that
                        // fails to verify (the store then says STORE_CORRUPT), never to one that passes.
                        if verify_absence(root, &key, &proof.encode()).is_ok() {
                            assert!(!entries.contains_key(key.as_slice()), "record {which:?} byte {at}");
                        }
                    }
                    Ok(Absence::Need(_)) => unreachable!(),
                    Err(e) => assert_eq!(e, StoreError::Corrupt),
                }
            }
        }
    }
}

/// Asks `ask` until it is done, fetching what the pages need.
fn paged<T>(
    pages: &mut Pages,
    records: &Records,
    mut ask: impl FnMut(&mut Pages) -> Result<Paged<T>, StoreError>,
) -> Result<T, StoreError> {
    for _ in 0..10_000 {
        match ask(pages)? {
            Paged::Need(wanted) => {
                for (t, r) in wanted {
                    pages.supply(t, &r, record(records, t, &r))?;
                }
            }
            Paged::Done(answer) => return Ok(answer),
        }
    }
    panic!("no answer in 10,000 rounds")
}

/// Range proofs, chunk proofs and chunk envelopes from the pages are the
/// bytes the resident snapshot gives, at every version, with a cache of a
/// few chunks (ranges longer than the cache included).
#[test]
fn ranges_and_chunks_from_pages_are_the_snapshots() {
    for capacity in [2, 3, 8] {
        let (records, versions) = stored_snapshots(capacity, 11, 4);
        let mut pages = Pages::new(capacity, 0);
        for ((top, _, _), snapshot) in &versions {
            let top = Some(*top);
            for (start, end, limit) in [
                (0u16, None, 1000),
                (37, Some(90u16), 1000),
                (120, None, 7),
                (299, None, 3),
                (300, None, 5),
                (5, Some(6), 1),
            ] {
                let (start, end) = (start.to_be_bytes(), end.map(u16::to_be_bytes));
                let mut cursor = RangeCursor::new(&start, end.as_ref().map(|e| e.as_slice()), limit).unwrap();
                let proof = paged(&mut pages, &records, |p| p.prove_range(top, &mut cursor)).unwrap();
                assert_eq!(
                    proof,
                    snapshot.prove_range(&start, end.as_ref().map(|e| e.as_slice()), limit).unwrap(),
                    "range {start:?}..{end:?} limit {limit}"
                );
                assert!(pages.resident_bytes() <= pages.budget());
            }
            for index in 0..snapshot.chunk_count() {
                assert_eq!(
                    paged(&mut pages, &records, |p| p.prove_chunk(top, index)).unwrap(),
                    snapshot.prove_chunk(index).unwrap()
                );
                assert_eq!(
                    paged(&mut pages, &records, |p| p.export_chunk(top, index)).unwrap(),
                    snapshot.export_chunk(index).unwrap()
                );
            }
            assert_eq!(pages.prove_chunk(top, snapshot.chunk_count()), Err(StoreError::Corrupt));
        }
    }
    let mut cursor = RangeCursor::new(b"a", None, 3).unwrap();
    let empty = Pages::new(4, 0).prove_range(None, &mut cursor).unwrap();
    assert_eq!(empty, Paged::Done(Tree::new(4).unwrap().head().prove_range(b"a", None, 3).unwrap()));
}

/// Walking every chunk of every version finds any flipped record: each
/// envelope is the snapshot's or `STORE_CORRUPT`, and a flip anywhere in a
/// record (a node's key copy included, which no hash covers) is found.
#[test]
fn a_walk_over_every_chunk_finds_every_flipped_record() {
    for capacity in [3, 40] {
        walk_over_every_chunk(capacity);
    }
}

fn walk_over_every_chunk(capacity: usize) {
    let (records, versions) = stored_snapshots(capacity, 6, 3);
    for which in records.keys() {
        let len = records[which].len();
        for at in [1, len / 2, len - 1] {
            let mut bad = records.clone();
            bad.get_mut(which).unwrap()[at] ^= 0x01;
            let mut found = false;
            for ((top, _, _), snapshot) in &versions {
                let mut pages = Pages::new(capacity, 0);
                for index in 0..snapshot.chunk_count() {
                    match paged(&mut pages, &bad, |p| p.export_chunk(Some(*top), index)) {
                        Ok(envelope) => {
                            assert_eq!(envelope, snapshot.export_chunk(index).unwrap(), "record {which:?} byte {at}")
                        }
                        Err(e) => {
                            assert_eq!(e, StoreError::Corrupt);
                            found = true;
                        }
                    }
                }
            }
            assert!(found, "record {which:?} byte {at} flipped and never found");
        }
    }
}

/// A store that swaps one slot's entry for another (a record whose entry
/// hash is the slot's new hash, so that the entry checks) is caught by the
/// chunk's group nodes, whichever group the slot is in: no version ever
/// answers with the swapped value, and a get of the swapped key at a
/// version that uses the chunk fails.
#[test]
fn a_swapped_entry_is_caught_by_its_group() {
    let (records, versions) = stored(40, 5, 3);
    let chunks: Vec<[u8; 40]> = records.keys().filter(|(t, _)| *t == Table::Chunks as u8).map(|(_, k)| *k).collect();
    let (mut swaps, mut caught) = (0, 0);
    for at in chunks {
        let Ok(ChunkRecord::Full { mut slots, groups }) = ChunkRecord::decode(&records[&(Table::Chunks as u8, at)], 40)
        else {
            continue;
        };
        for i in [0, slots.len() / 2, slots.len() - 1] {
            let (mut bad, key) = (records.clone(), slots[i].key.to_vec());
            let Entry::Record(old) = slots[i].entry else { panic!("a tree's commit writes entry records") };
            let entry = Entry::Record(Ref { birth: old.birth, hash: entry_hash(&key, b"swapped") });
            bad.insert((Table::Entries as u8, entry.record().unwrap().key()), encode_entry(b"swapped"));
            let kept = std::mem::replace(&mut slots[i].entry, entry);
            let record = ChunkRecord::Full { slots: slots.clone(), groups: groups.clone() };
            bad.insert((Table::Chunks as u8, at), record.encode());
            slots[i].entry = kept;
            swaps += 1;
            for (top, _, entries) in &versions {
                let mut pages = Pages::new(40, 1 << 20);
                for (k, v) in entries {
                    match get(&mut pages, &bad, *top, k) {
                        Ok(answer) => assert_eq!(answer.as_ref(), Some(v)),
                        Err(e) => {
                            assert_eq!(e, StoreError::Corrupt);
                            caught += usize::from(*k == key);
                        }
                    }
                }
            }
        }
    }
    assert!(swaps >= 6 && caught >= swaps, "{swaps} swaps, caught {caught} times");
}
