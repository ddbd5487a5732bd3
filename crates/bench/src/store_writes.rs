//! `store-writes`: what the state store writes (`docs/store.md`, "What a
//! version writes"): the records of a fresh import of the standard
//! workload, then of 10,000 random updates and a commit, by table. The
//! records are kept in memory and checked while measured: a sample of
//! lookups through `Pages` at each version must find the workload's values.

use std::collections::HashMap;

use bpavl_core::pages::{Lookup, Pages, Value};
use bpavl_core::record::{decode_entry, Child, Ref, Table, VersionRecord};
use bpavl_core::{Tree, WriteSet};
use sha2::{Digest, Sha256};

use crate::common::{insert_range, new_tree};
use crate::timing::time;
use crate::workload::{Workload, VALUE_LEN};

const UPDATES: usize = 10_000;
/// Lookups checked at each version.
const CHECKS: usize = 2_000;

type Records = HashMap<(u8, [u8; 40]), Vec<u8>>;

/// SplitMix64, as the peers pick random keys (seed 2 for updates).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// An updated value: a SHA-256 chain started from the old value, 512 bytes long.
fn updated(old: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(VALUE_LEN);
    let mut block: [u8; 32] = Sha256::digest(old).into();
    while out.len() < VALUE_LEN {
        out.extend_from_slice(&block);
        block = Sha256::digest(block).into();
    }
    out
}

/// Bytes and records written per table, as JSON.
fn sizes(w: &WriteSet) -> serde_json::Value {
    let mut by_table = serde_json::Map::new();
    for (name, table) in [("nodes", Table::Nodes), ("chunks", Table::Chunks), ("entries", Table::Entries)] {
        let puts = w.puts.iter().filter(|p| p.0 == table);
        let (count, bytes) = puts.fold((0, 0), |(c, b), p| (c + 1, b + 40 + p.2.len()));
        by_table.insert(name.into(), serde_json::json!({ "records": count, "bytes": bytes }));
    }
    by_table.insert("stale".into(), serde_json::json!({ "records": w.stale.len(), "bytes": 49 * w.stale.len() }));
    serde_json::Value::Object(by_table)
}

fn store(records: &mut Records, w: WriteSet, capacity: usize) -> Child {
    let top = VersionRecord::decode(&w.version_record, capacity).expect("a fresh version record").top;
    for (t, r, bytes) in w.puts {
        records.insert((t as u8, r.key()), bytes);
    }
    top.expect("the workload is not empty")
}

/// Looks up `key` through `pages` and checks the entry record.
fn lookup(pages: &mut Pages, records: &Records, top: Child, key: &[u8]) -> Option<Vec<u8>> {
    let get = |t: Table, r: &Ref| records.get(&(t as u8, r.key())).map(Vec::as_slice);
    for _ in 0..64 {
        match pages.lookup(top, key).expect("records verify") {
            Lookup::Need(wanted) => {
                for (t, r) in wanted {
                    pages.supply(t, &r, get(t, &r)).expect("records verify");
                }
            }
            Lookup::Found(Value::Record(e)) => {
                return Some(decode_entry(get(Table::Entries, &e).unwrap(), &e.hash, key).unwrap().to_vec())
            }
            Lookup::Found(Value::Here(value)) => return Some(value),
            Lookup::Found(Value::Held(..)) => unreachable!("a tree's commit writes entry records"),
            Lookup::Absent(_) => return None,
        }
    }
    panic!("a lookup takes one round per level and three more");
}

pub fn run(n: usize, capacity: usize) {
    assert!(n > 0, "store-writes needs --n ≥ 1");
    let w = Workload::generate(n);
    let mut tree: Tree = new_tree(capacity);
    insert_range(&mut tree, &w, 0..n);
    let ((_, import), import_s) = time(|| tree.commit_to_store());
    let import_sizes = sizes(&import);
    let mut records = Records::new();
    let first = store(&mut records, import, capacity);

    let mut rng = SplitMix(2);
    let mut values: HashMap<usize, Vec<u8>> = HashMap::new();
    for _ in 0..UPDATES {
        let i = (rng.next() % n as u64) as usize;
        let value = updated(values.get(&i).map_or(w.value(i), Vec::as_slice));
        tree.insert(w.key(i), &value).expect("an update");
        values.insert(i, value);
    }
    let ((_, update), update_s) = time(|| tree.commit_to_store());
    let update_sizes = sizes(&update);
    let second = store(&mut records, update, capacity);

    let mut pages = Pages::new(capacity, 64 << 20);
    let mut check = SplitMix(1);
    for _ in 0..CHECKS {
        let i = (check.next() % n as u64) as usize;
        assert_eq!(
            lookup(&mut pages, &records, first, w.key(i)).as_deref(),
            Some(w.value(i)),
            "entry {i} at version 1"
        );
        let now = values.get(&i).map_or(w.value(i), Vec::as_slice);
        assert_eq!(lookup(&mut pages, &records, second, w.key(i)).as_deref(), Some(now), "entry {i} at version 2");
    }
    println!(
        "{}",
        serde_json::json!({
            "n": n,
            "capacity": capacity,
            "import_records_s": import_s,
            "import": import_sizes,
            "updates": UPDATES,
            "update_records_s": update_s,
            "update": update_sizes,
            "checked_lookups": 2 * CHECKS,
        })
    );
}
