//! State-store records (`spec/store-format.md`): round trips, deltas against
//! a model, and corruption. A flipped byte either fails with `STORE_CORRUPT`
//! or changes only what routes a search (a birth, a key copy, a slot's key),
//! which the record's parent hash does not cover and the next check catches.

use bpavl_core::hash::{chunk_hash, entry_hash, inchunk_tree, inner_hash, root_hash, Hash};
use bpavl_core::record::{
    apply_edits, chunk_record, decode_entry, decode_store, diff_slots, encode_entry, encode_store, slot_groups,
    stale_key, store_layout, verify_group, verify_groups, verify_slots, Child, ChunkRecord, Delta, Entry, NodeRecord,
    Ref, Slot, Table, VersionRecord,
};
use bpavl_core::{StoreError, TreeError};
use proptest::prelude::*;

mod model_keys;
use model_keys::{key, value};

fn entry_ref(k: u16, seed: u8, birth: u64) -> Ref {
    Ref { birth, hash: entry_hash(&key(k), &value(k, seed)) }
}

/// Slots for the sorted, distinct keys `keys`, each with its value seed.
fn slots(keys: &std::collections::BTreeMap<u16, u8>, birth: u64) -> Vec<Slot> {
    keys.iter().map(|(&k, &s)| Slot::new(&key(k), entry_ref(k, s, birth))).collect()
}

fn chunk_hash_of(slots: &[Slot]) -> Hash {
    let leaves: Vec<Hash> = slots.iter().map(|s| *s.entry.hash()).collect();
    chunk_hash(slots.len(), &inchunk_tree(&leaves)[0])
}

/// Every single-byte flip of `bytes`, each with the result of `decode`.
fn flips<T>(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<T, StoreError>) -> Vec<Result<T, StoreError>> {
    (0..bytes.len())
        .map(|i| {
            let mut b = bytes.to_vec();
            b[i] ^= 0x01;
            decode(&b)
        })
        .collect()
}

#[test]
fn store_record_round_trips_and_rejects_bad_capacities() {
    assert_eq!(decode_store(&encode_store(256).unwrap()), Ok(256));
    assert_eq!(decode_store(&encode_store(2).unwrap()), Ok(2));
    assert_eq!(decode_store(&encode_store(4096).unwrap()), Ok(4096));
    // A record no open would read is never made.
    assert_eq!(encode_store(1), Err(TreeError::CapacityInvalid));
    assert_eq!(encode_store(4097), Err(TreeError::CapacityInvalid));
    assert_eq!(decode_store(&[0x06, 0x01]), Err(StoreError::Corrupt));
    assert_eq!(decode_store(&[0x07, 0x04]), Err(StoreError::Corrupt));
    assert_eq!(decode_store(&[]), Err(StoreError::Corrupt));
    assert_eq!(decode_store(&[0x06, 0x04, 0x03, 0x00]), Err(StoreError::Corrupt));
    assert_eq!(encode_store(4).unwrap(), vec![0x06, 0x04, 0x04]);
    assert_eq!(decode_store(&[0x06, 0x04]), Err(StoreError::Corrupt), "layout 1 had no layout byte");
    assert_eq!(decode_store(&[0x06, 0x04, 0x02]), Err(StoreError::Corrupt), "layout 2 kept keys in entry records");
    assert_eq!(decode_store(&[0x06, 0x04, 0x03]), Err(StoreError::Corrupt), "layout 3 held no values in chunk records");
    assert_eq!(decode_store(&[0x06, 0x04, 0x05]), Err(StoreError::Corrupt), "a later layout");
    assert_eq!(store_layout(&encode_store(4).unwrap()), Some(4));
    assert_eq!(store_layout(&[0x06, 0x04]), Some(1));
    assert_eq!(store_layout(&[0x06, 0x04, 0x02]), Some(2));
    assert_eq!(store_layout(&[0x06, 0x01, 0x02]), None, "capacity 1");
    assert_eq!(store_layout(&[0x07, 0x04, 0x03]), None, "another record");
    assert_eq!(store_layout(&[0x06, 0x04, 0x03, 0x00]), None, "bytes after the layout");
}

#[test]
fn version_records_verify_their_own_root() {
    let top = Ref { birth: 300, hash: [7; 32] };
    let full = VersionRecord {
        capacity: 4,
        chunk_count: 3,
        entry_count: 9,
        top: Some(Child::Node(top)),
        root: root_hash(4, 3, 9, &top.hash),
    };
    let empty =
        VersionRecord { capacity: 4, chunk_count: 0, entry_count: 0, top: None, root: bpavl_core::hash::empty_root(4) };
    for v in [&full, &empty] {
        let bytes = v.encode();
        assert_eq!(VersionRecord::decode(&bytes, 4).as_ref(), Ok(v));
        assert_eq!(VersionRecord::decode(&bytes, 8), Err(StoreError::Corrupt), "another store's capacity");
        for got in flips(&bytes, |b| VersionRecord::decode(b, 4)) {
            match got {
                Err(e) => assert_eq!(e, StoreError::Corrupt),
                // Only a birth can change unnoticed: it locates the top, it does not name it.
                Ok(g) => {
                    assert_eq!((g.root, g.top.map(|t| t.record().hash)), (v.root, v.top.map(|t| t.record().hash)));
                    assert_ne!(g.top.map(|t| t.record().birth), v.top.map(|t| t.record().birth));
                }
            }
        }
    }
    let wrong_root = VersionRecord { root: [0; 32], ..full };
    assert_eq!(VersionRecord::decode(&wrong_root.encode(), 4), Err(StoreError::Corrupt));
}

#[test]
fn node_records_verify_against_their_parents_hash() {
    let left = Child::Chunk(Ref { birth: 1, hash: [1; 32] });
    let right = Child::Node(Ref { birth: 2, hash: [2; 32] });
    let node = NodeRecord { height: 2, chunk_count: 3, entry_count: 7, left, right, key_copy: b"m".to_vec() };
    let hash = inner_hash(2, 3, 7, &[1; 32], &[2; 32]);
    assert_eq!(node.hash(), hash);
    let bytes = node.encode();
    assert_eq!(NodeRecord::decode(&bytes, &hash), Ok(node.clone()));
    assert_eq!(NodeRecord::decode(&bytes, &[0; 32]), Err(StoreError::Corrupt));
    for got in flips(&bytes, |b| NodeRecord::decode(b, &hash)) {
        match got {
            Err(e) => assert_eq!(e, StoreError::Corrupt),
            Ok(g) => {
                assert_eq!(g.hash(), hash);
                // A wrong kind looks in the other table, where no record has this hash.
                let routing_only = g.key_copy != node.key_copy
                    || g.left.record().birth != node.left.record().birth
                    || g.right.record().birth != node.right.record().birth
                    || std::mem::discriminant(&g.left) != std::mem::discriminant(&node.left)
                    || std::mem::discriminant(&g.right) != std::mem::discriminant(&node.right);
                assert!(routing_only, "a flip that decodes changes a birth, a child's kind or the key copy");
            }
        }
    }
}

#[test]
fn entry_records_fail_on_every_flip() {
    let (k, v) = (b"alice".as_slice(), b"100".as_slice());
    let hash = entry_hash(k, v);
    let bytes = encode_entry(v);
    assert_eq!(decode_entry(&bytes, &hash, k), Ok(v));
    assert_eq!(bytes, [&[0x0b][..], v].concat(), "the value to the end of the record, no key, no length");
    assert_eq!(decode_entry(&bytes, &hash, b"alicf"), Err(StoreError::Corrupt), "the slot lists another key");
    let empty = entry_hash(k, b"");
    assert_eq!(decode_entry(&encode_entry(b""), &empty, k), Ok(&b""[..]));
    let long = vec![7; 65_537];
    let too_long = [&[0x0b][..], &long].concat();
    assert_eq!(decode_entry(&too_long, &entry_hash(k, &long), k), Err(StoreError::Corrupt), "a value over 65536 bytes");
    for got in flips(&bytes, |b| decode_entry(b, &hash, k).map(<[u8]>::to_vec)) {
        assert_eq!(got, Err(StoreError::Corrupt));
    }
}

#[test]
fn full_chunks_verify_and_a_flipped_slot_key_is_caught_by_its_entry() {
    let keys = (0..5u16).map(|k| (k * 3, k as u8)).collect();
    let s = slots(&keys, 9);
    let hash = chunk_hash_of(&s);
    let groups = slot_groups(&s);
    let bytes = ChunkRecord::Full { slots: s.clone(), groups: groups.clone() }.encode();
    assert_eq!(ChunkRecord::decode(&bytes, 4), Err(StoreError::Corrupt), "5 slots exceed C = 4");
    assert_eq!(ChunkRecord::decode(&bytes, 8), Ok(ChunkRecord::Full { slots: s.clone(), groups: groups.clone() }));
    assert!(verify_slots(&s, &groups, &hash).is_ok());
    assert_eq!(verify_slots(&s, &groups, &[0; 32]), Err(StoreError::Corrupt));
    assert_eq!(verify_slots(&s, &[[0; 32]], &hash), Err(StoreError::Corrupt), "another group node");
    for got in flips(&bytes, |b| match ChunkRecord::decode(b, 8)? {
        ChunkRecord::Full { slots, groups } => verify_slots(&slots, &groups, &hash).map(|_| slots),
        ChunkRecord::Delta(_) => Err(StoreError::Corrupt),
    }) {
        let Ok(g) = got else { continue };
        // Entry hashes all verified, so a key or a birth changed: the entry record of that slot
        // (or its absence under the wrong birth) is what fails.
        let changed: Vec<usize> = (0..s.len()).filter(|&i| g[i] != s[i]).collect();
        assert_eq!(changed.len(), 1);
        let i = changed[0];
        let (k, seed) = (3 * i as u16, i as u8);
        let record = encode_entry(&value(k, seed));
        if g[i].key != s[i].key {
            assert_eq!(decode_entry(&record, g[i].entry.hash(), &g[i].key), Err(StoreError::Corrupt));
        } else {
            assert_ne!(g[i].entry, s[i].entry);
        }
    }
}

#[test]
fn stale_keys_sort_by_version_then_table() {
    let r = Ref { birth: 5, hash: [3; 32] };
    let a = stale_key(7, Table::Entries, &r);
    let b = stale_key(8, Table::Nodes, &r);
    assert!(a < b);
    assert_eq!(&a[..8], &7u64.to_be_bytes());
    assert_eq!(a[8], 3);
    assert_eq!(&a[9..], &r.key());
}

fn sorted_map(max: usize) -> impl Strategy<Value = std::collections::BTreeMap<u16, u8>> {
    prop::collection::btree_map(0u16..64, any::<u8>(), 1..=max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A delta applied to its base gives the chunk back, and both records round-trip.
    #[test]
    fn deltas_rebuild_the_chunk(base in sorted_map(16), now in sorted_map(16)) {
        // Entries kept from the base keep their records (same birth).
        let (base, now) = (slots(&base, 1), slots(&now, 1));
        let base_ref = Ref { birth: 1, hash: chunk_hash_of(&base) };
        let edits = diff_slots(&base, &now).expect("every slot names an entry record");
        prop_assert_eq!(apply_edits(&base, &edits, 16), Ok(now.clone()));
        let base_groups = slot_groups(&base);
        let record = chunk_record(Some((&base_ref, &base, &base_groups)), &now, slot_groups(&now));
        prop_assert_eq!(ChunkRecord::decode(&record.encode(), 16), Ok(record.clone()));
        let (rebuilt, groups) = match &record {
            ChunkRecord::Full { slots, groups } => (slots.clone(), groups.clone()),
            ChunkRecord::Delta(d) => {
                prop_assert_eq!(&d.base, &base_ref);
                // Only the group nodes that differ from the base's are stored.
                let unchanged = base_groups.iter().zip(slot_groups(&now)).filter(|(a, b)| *a == b).count();
                prop_assert_eq!(d.changed_groups.len(), slot_groups(&now).len() - unchanged);
                d.apply(&base, &base_groups, 16).unwrap()
            }
        };
        prop_assert_eq!(&rebuilt, &now);
        prop_assert!(verify_slots(&rebuilt, &groups, &chunk_hash_of(&now)).is_ok());
        // The group nodes alone check the chunk hash, and each group its leaves.
        let upper = verify_groups(now.len(), &groups, &chunk_hash_of(&now)).unwrap();
        prop_assert_eq!(&upper[0], &groups);
        let leaves: Vec<_> = now.iter().map(|s| *s.entry.hash()).collect();
        for (g, node) in leaves.chunks(16).zip(&groups) {
            prop_assert!(verify_group(g, node).is_ok());
        }
    }

    /// Edits that break a chunk's rules are corrupt, never applied.
    #[test]
    fn bad_edits_are_corrupt(base in sorted_map(8), position in 0usize..12) {
        let base = slots(&base, 1);
        let delete_past_end = [bpavl_core::record::Edit::Delete { position: base.len() + position }];
        prop_assert_eq!(apply_edits(&base, &delete_past_end, 16), Err(StoreError::Corrupt));
        let duplicate = [bpavl_core::record::Edit::Insert { position: 0, key: base[0].key.to_vec(), entry: base[0].entry.record().unwrap() }];
        prop_assert_eq!(apply_edits(&base, &duplicate, 16), Err(StoreError::Corrupt));
        let overflow = [bpavl_core::record::Edit::Insert { position: 0, key: vec![0], entry: base[0].entry.record().unwrap() }];
        prop_assert_eq!(apply_edits(&base, &overflow, base.len()), Err(StoreError::Corrupt));
    }
}

#[test]
fn one_changed_entry_in_a_large_chunk_is_stored_as_a_small_delta() {
    let base: std::collections::BTreeMap<u16, u8> = (0..256u16).map(|k| (k, 0)).collect();
    let base = slots(&base, 1);
    let mut now = base.clone();
    now[100].entry = entry_ref(100, 1, 2).into();
    let base_ref = Ref { birth: 1, hash: chunk_hash_of(&base) };
    let record = chunk_record(Some((&base_ref, &base, &slot_groups(&base))), &now, slot_groups(&now));
    // One edit, and the one group node it changed.
    assert!(matches!(&record, ChunkRecord::Delta(d) if d.edits.len() == 1 && d.changed_groups.len() == 1));
    assert!(record.encode().len() < 100 + 34, "the base ref, the edit, and the group's index and node");
    assert!(matches!(chunk_record(None, &now, slot_groups(&now)), ChunkRecord::Full { .. }));
}

#[test]
fn a_delta_is_chosen_by_the_full_chunks_encoded_length() {
    // Keys of 1 … 300 bytes and births across varint boundaries: the
    // threshold must compare with the real encoding.
    let base: Vec<Slot> = (0..64u16)
        .map(|k| {
            let mut key = key(k);
            key.extend(std::iter::repeat_n(b'x', k as usize * 5));
            Slot::new(&key, Ref { birth: 1u64 << (k % 40), hash: [k as u8; 32] })
        })
        .collect();
    let full = ChunkRecord::Full { slots: base.clone(), groups: slot_groups(&base) }.encode().len();
    let base_ref = Ref { birth: 1, hash: chunk_hash_of(&base) };
    for changed in 1..64 {
        let mut now = base.clone();
        for s in now.iter_mut().take(changed) {
            if let Entry::Record(r) = &mut s.entry {
                r.hash[0] ^= 1;
            }
        }
        let (base_groups, groups) = (slot_groups(&base), slot_groups(&now));
        let delta =
            ChunkRecord::Delta(Delta::of(&base_ref, &base, &base_groups, &now, &groups).unwrap()).encode().len();
        let record = chunk_record(Some((&base_ref, &base, &base_groups)), &now, groups);
        assert_eq!(matches!(record, ChunkRecord::Delta(_)), 4 * delta <= full, "{changed} changed slots");
    }
}

#[test]
fn a_deltas_group_nodes_are_its_bases_with_the_changed_ones_replaced() {
    // 40 entries (3 groups) grow to 50 (4 groups): group 2 changes, group 3 is new.
    let base = slots(&(0..40u16).map(|k| (k, 0)).collect(), 1);
    let now = slots(&(0..50u16).map(|k| (k, 0)).collect(), 1);
    let (base_groups, groups) = (slot_groups(&base), slot_groups(&now));
    let base_ref = Ref { birth: 1, hash: chunk_hash_of(&base) };
    let delta = Delta::of(&base_ref, &base, &base_groups, &now, &groups).unwrap();
    assert_eq!(delta.changed_groups.iter().map(|c| c.0).collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(delta.apply(&base, &base_groups, 64), Ok((now.clone(), groups.clone())));
    let bytes = ChunkRecord::Delta(delta.clone()).encode();
    assert_eq!(ChunkRecord::decode(&bytes, 64), Ok(ChunkRecord::Delta(delta.clone())));

    // A group past the base's that the delta does not give, or a changed index past its count.
    let missing = Delta { changed_groups: delta.changed_groups[..1].to_vec(), ..delta.clone() };
    assert_eq!(missing.apply(&base, &base_groups, 64), Err(StoreError::Corrupt));
    let past = Delta { group_count: 3, ..delta.clone() };
    assert_eq!(ChunkRecord::decode(&ChunkRecord::Delta(past).encode(), 64), Err(StoreError::Corrupt));
    // Out of order, or more groups than the capacity allows.
    let unordered = Delta { changed_groups: delta.changed_groups.iter().rev().copied().collect(), ..delta.clone() };
    assert_eq!(ChunkRecord::decode(&ChunkRecord::Delta(unordered).encode(), 64), Err(StoreError::Corrupt));
    assert_eq!(ChunkRecord::decode(&bytes, 48), Err(StoreError::Corrupt), "4 groups exceed C = 48");
    // A group node that is not the chunk's fails the check against the chunk hash.
    let (got, mut got_groups) = delta.apply(&base, &base_groups, 64).unwrap();
    got_groups[1][0] ^= 1;
    assert_eq!(verify_groups(got.len(), &got_groups, &chunk_hash_of(&now)).err(), Some(StoreError::Corrupt));
}
