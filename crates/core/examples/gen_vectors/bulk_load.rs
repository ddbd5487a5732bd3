//! `bulk_load.json`: bulk loads (`spec/store-format.md`, "Bulk load"):
//! entries in key order and a capacity give the chunk sizes, the shape and
//! the root. Each valid load's records are read back through the store's
//! loader (every record checked against its hash) into a tree whose
//! invariants, entries and chunks are checked before the case is written.

use std::collections::{BTreeMap, HashMap};

use bpavl_core::record::VersionRecord;
use bpavl_core::{BulkLoad, Loader, TreeError};
use bpavl_testkit::rng::SplitMix64;
use serde_json::Value;

use crate::cases::{h, kv, n, obj, s, VectorFile};
use crate::trees::{chunk_list, shape_of};

/// The version every load is.
const VERSION: u64 = 1;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// `count` entries in key order: distinct keys of 1 … 8 random bytes,
/// values of 0 … 6.
fn entries(seed: u64, count: usize) -> Entries {
    let mut rng = SplitMix64::new(seed);
    let mut map = BTreeMap::new();
    while map.len() < count {
        let (key_len, value_len) = (1 + rng.below(8) as usize, rng.below(7) as usize);
        let key = rng.bytes(key_len);
        let value = rng.bytes(value_len);
        map.insert(key, value);
    }
    map.into_iter().collect()
}

/// Pushes `entries` into a load of `capacity`: the finished load, or the
/// position of the push that failed (None: the capacity was refused) and its
/// error.
fn run(capacity: usize, entries: &Entries) -> Result<BulkLoad, (Option<usize>, TreeError)> {
    let mut load = BulkLoad::new(capacity, VERSION).map_err(|e| (None, e))?;
    for (i, (k, v)) in entries.iter().enumerate() {
        load.push(k, v).map_err(|e| (Some(i), e))?;
    }
    Ok(load)
}

fn valid(f: &mut VectorFile, name: &str, about: &str, capacity: usize, input: Entries) {
    let mut load = run(capacity, &input).unwrap_or_else(|e| panic!("bulk load {name}: {e:?}"));
    let mut records: HashMap<_, _> = load.take_puts().into_iter().map(|(t, r, b)| ((t, r), b)).collect();
    let (root, finished) = load.finish();
    records.extend(finished.puts.into_iter().map(|(t, r, b)| ((t, r), b)));
    assert_eq!(VersionRecord::decode(&finished.version_record, capacity).unwrap().root, root);
    let loader = Loader::new(VERSION, &finished.version_record, capacity).unwrap();
    let tree = loader.load_from(|table, r| records.get(&(table, *r)).map(Vec::as_slice)).unwrap();
    tree.check_invariants().unwrap();
    let got: Entries = tree.head().iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    assert_eq!(got, input, "{name}");
    assert_eq!(tree.head().root(), root, "{name}");
    let shape = shape_of(&tree);
    f.valid.push(obj(vec![
        ("name", s(name)),
        ("description", s(about)),
        ("capacity", n(capacity as u64)),
        ("entries", kv(&input)),
        ("root", h(&root)),
        ("chunk_count", n(tree.chunk_count())),
        ("entry_count", n(tree.len())),
        ("height", n(tree.height() as u64)),
        ("chunk_list", chunk_list(&shape)),
    ]));
}

pub fn bulk_load() -> VectorFile {
    let mut f = VectorFile::new(
        "bulk_load",
        "Bulk loads (spec/store-format.md, Bulk load): a load of capacity takes entries ([key, value], hex) one by one in the order given, then finishes as version 1. Valid cases: the loaded tree has root, chunk_count, entry_count and height, and chunk_list gives per chunk in key order its key_height and entry_count (as in trees.json). Invalid cases: the push of entries[at] fails with code (at null: the capacity is refused before any entry).",
        "spec/store-format.md, Bulk load; spec/hashing.md",
    );
    // (name, about, C, N): sizes by the rule in each about.
    let cases: [(&str, &str, usize, usize); 14] = [
        ("c4_empty", "no entries: the empty tree", 4, 0),
        ("c2_one", "one entry: one chunk", 2, 1),
        ("c2_three", "below C = 16 the fill is C: 2, then 2 + 1 > C makes halves 2 and 1", 2, 3),
        ("c3_ten", "C = 3: 3, 3, then 3 + 1 = 4 > C makes halves 2 and 2", 3, 10),
        ("c4_four", "N = C: one full chunk", 4, 4),
        ("c4_five", "4 + 1 > C: halves 3 and 2", 4, 5),
        ("c4_nine", "4, then 4 + 1 > C: 4, 3, 2", 4, 9),
        ("c4_twelve", "F divides N: three chunks of 4", 4, 12),
        ("c16_thirty_one", "F = 15 at C = 16: 15, then 15 + 1 ≤ C makes 16", 16, 31),
        ("c16_forty_eight", "15, 15, then 15 + 3 > C: halves 9 and 9", 16, 48),
        ("c17_fifty", "F = 16 at C = 17: 16, 16, then 16 + 2 > C: halves 9 and 9", 17, 50),
        ("c256_two_fifty", "N ≤ C: one chunk of 250", 256, 250),
        ("c256_four_ninety_six", "F = 240 at C = 256: 240, then 240 + 16 = C makes 256", 256, 496),
        ("c256_thousand_one", "240, 240, 240, then 240 + 41 > C: halves 141 and 140", 256, 1001),
    ];
    for (i, (name, about, capacity, count)) in cases.into_iter().enumerate() {
        valid(&mut f, name, about, capacity, entries(0xB01C_0000 + i as u64, count));
    }

    let base = entries(0xB01C_1000, 5);
    let with = |at: usize, key: Vec<u8>| -> Entries {
        let mut e = base[..at].to_vec();
        e.push((key, b"v".to_vec()));
        e
    };
    let mut invalid = |why: &str, capacity: usize, input: Entries, code: &'static str| {
        let result = run(capacity, &input);
        let at = match &result {
            Err((Some(i), _)) => n(*i as u64),
            _ => Value::Null,
        };
        let fields = vec![("capacity", n(capacity as u64)), ("entries", kv(&input)), ("at", at)];
        f.invalid(why, result.map(|_| ()).map_err(|(_, e)| e), code, fields);
    };
    invalid("capacity 1 is below 2", 1, base.clone(), "CAPACITY_INVALID");
    invalid("capacity 4097 is above 4096", 4097, base.clone(), "CAPACITY_INVALID");
    invalid("a key equal to the one before", 4, with(3, base[2].0.clone()), "KEYS_NOT_SORTED");
    invalid("a key below the one before", 4, with(3, base[0].0.clone()), "KEYS_NOT_SORTED");
    let prefix = base[2].0[..base[2].0.len() - 1].to_vec();
    assert!(!prefix.is_empty(), "the seed gives a key of two bytes or more");
    invalid("a proper prefix of the key before sorts below it", 4, with(3, prefix), "KEYS_NOT_SORTED");
    invalid("an empty key", 4, with(0, Vec::new()), "KEY_EMPTY");
    invalid("a key of 1,025 bytes, past the limit of 1,024", 4, with(0, vec![0xff; 1025]), "KEY_TOO_LONG");
    f.require(&[&["CAPACITY_INVALID", "KEYS_NOT_SORTED", "KEY_EMPTY", "KEY_TOO_LONG"]]);
    f
}
