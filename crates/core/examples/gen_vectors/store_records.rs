//! `store_records.json`: the records and keys of a state store
//! (`spec/store-format.md`), taken from small stores: bulk loads of
//! capacity 32 and 256 (full chunk records of kind-1 slots, their values
//! records, a node and version records), a commit over the first (a delta
//! with set, insert and delete edits, a full chunk record with both slot
//! kinds, entry records, stale keys) and one more (an entry record's stale
//! key), a bulk load of 12 at capacity 4 (two nodes), and trees of capacity 4 and 8
//! committed from nothing (a chunk top, the empty tree), and two syncs into
//! an empty store (`StoreSync`: progress records and the chunk records they
//! name, taken back by a new run of the sync). Invalid cases are
//! a valid record with one rule broken: re-encoded by the core's encoders
//! from changed fields, or edited at its ends (the format byte, the count
//! after it, a cut, an extra byte). Every case is run through the core's
//! decoders and checks before it is written.

use std::collections::HashMap;

use bpavl_core::hash::{chunk_hash, entry_hash, inchunk_tree, root_hash, Hash};
use bpavl_core::record::{
    decode_entry, decode_store, encode_entry, encode_full, encode_store, full_record_puts, held_value, held_values,
    slot_groups, stale_key, values_ref, values_refs, verify_slots, Child, ChunkRecord, Delta, Edit, Entry, NodeRecord,
    Ref, Slot, Table, VersionRecord,
};
use bpavl_core::{
    verify_chunk, BulkLoad, ChunkPath, Loader, PathStep, StoreError, StoreSync, SyncProgress, Tree, WriteSet,
};
use bpavl_testkit::fields::{bytes_field, noncanonical, varint, varint_len};
use serde_json::{json, Value};

use crate::cases::{cat, flip_last, h, n, obj, s};

type Records = HashMap<(Table, Ref), Vec<u8>>;

/// One part of the file: a record kind (or the keys) with its cases.
struct Part {
    description: &'static str,
    valid: Vec<Value>,
    invalid: Vec<Value>,
}

impl Part {
    fn new(description: &'static str) -> Part {
        Part { description, valid: Vec::new(), invalid: Vec::new() }
    }

    /// Records an invalid case after checking that `result` is `STORE_CORRUPT`,
    /// the one code a stored record fails with (`spec/store-format.md`).
    fn invalid<T: std::fmt::Debug>(
        &mut self,
        why: &str,
        result: Result<T, StoreError>,
        mut fields: Vec<(&str, Value)>,
    ) {
        match result {
            Err(StoreError::Corrupt) => {}
            other => panic!("store_records: invalid case {why:?}: expected STORE_CORRUPT, got {other:?}"),
        }
        fields.push(("code", s("STORE_CORRUPT")));
        fields.push(("why", s(why)));
        self.invalid.push(obj(fields));
    }

    fn json(self) -> Value {
        obj(vec![
            ("description", s(self.description)),
            ("valid", Value::Array(self.valid)),
            ("invalid", Value::Array(self.invalid)),
        ])
    }
}

fn table_name(t: Table) -> &'static str {
    match t {
        Table::Nodes => "nodes",
        Table::Chunks => "chunks",
        Table::Entries => "entries",
        Table::Values => "values",
    }
}

/// A ref with the record key it gives.
fn ref_json(r: &Ref) -> Value {
    obj(vec![("birth", n(r.birth)), ("hash", h(&r.hash)), ("key", h(&r.key()))])
}

fn child_json(c: &Child) -> Value {
    let (table, r) = match c {
        Child::Chunk(r) => ("chunks", r),
        Child::Node(r) => ("nodes", r),
    };
    obj(vec![("table", s(table)), ("birth", n(r.birth)), ("hash", h(&r.hash)), ("key", h(&r.key()))])
}

fn slot_json(slot: &Slot) -> Value {
    match &slot.entry {
        Entry::Record(r) => obj(vec![("key", h(&slot.key)), ("kind", n(0)), ("entry", ref_json(r))]),
        Entry::Held(hash) => obj(vec![("key", h(&slot.key)), ("kind", n(1)), ("entry_hash", h(hash))]),
    }
}

fn hashes(list: &[Hash]) -> Value {
    list.iter().map(|x| h(x)).collect()
}

/// `bytes` with byte `at` replaced by `b`.
fn with_byte(bytes: &[u8], at: usize, b: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at] = b;
    out
}

/// `bytes` with the varint right after the format byte replaced by `v`.
fn with_first_varint(bytes: &[u8], v: &[u8]) -> Vec<u8> {
    cat(&[&bytes[..1], v, &bytes[1 + varint_len(&bytes[1..])..]])
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn value(i: usize, round: u8) -> Vec<u8> {
    format!("v{i}.{round}").into_bytes()
}

/// A finished store: its records, its version record and the tree it loads to.
struct Store {
    capacity: usize,
    records: Records,
    version_record: Vec<u8>,
    tree: Tree,
}

impl Store {
    fn bulk_load(capacity: usize, keys: impl Iterator<Item = usize>) -> Store {
        let mut load = BulkLoad::new(capacity, 1).unwrap();
        for i in keys {
            load.push(&key(i), &value(i, 1)).unwrap();
        }
        let mut records: Records = load.take_puts().into_iter().map(|(t, r, b)| ((t, r), b)).collect();
        let (_, finished) = load.finish();
        records.extend(finished.puts.into_iter().map(|(t, r, b)| ((t, r), b)));
        Store::loaded(capacity, records, finished.version_record, 1)
    }

    fn loaded(capacity: usize, records: Records, version_record: Vec<u8>, version: u64) -> Store {
        let loader = Loader::new(version, &version_record, capacity).unwrap();
        let tree = loader.load_from(|table, r| records.get(&(table, *r)).map(Vec::as_slice)).unwrap();
        tree.check_invariants().unwrap();
        Store { capacity, records, version_record, tree }
    }

    /// Commits the tree's pending writes; the store then holds both versions,
    /// and the new one loads back from its records to the same root.
    fn commit(&mut self) -> WriteSet {
        let (_, written) = self.tree.commit_to_store();
        self.records.extend(written.puts.iter().map(|(t, r, b)| ((*t, *r), b.clone())));
        self.version_record = written.version_record.clone();
        let reloaded = Loader::new(written.version, &written.version_record, self.capacity).unwrap();
        let tree = reloaded.load_from(|table, r| self.records.get(&(table, *r)).map(Vec::as_slice)).unwrap();
        assert_eq!(tree.head().root(), self.tree.head().root());
        written
    }

    /// The records of `table` born at `birth`, in key order.
    fn born(&self, table: Table, birth: u64) -> Vec<(Ref, &[u8])> {
        let mut out: Vec<(Ref, &[u8])> = self
            .records
            .iter()
            .filter(|((t, r), _)| *t == table && r.birth == birth)
            .map(|((_, r), b)| (*r, b.as_slice()))
            .collect();
        out.sort_by_key(|(r, _)| r.key());
        out
    }

    fn record(&self, table: Table, r: &Ref) -> &[u8] {
        &self.records[&(table, *r)]
    }

    /// The value of slot `slot` of full chunk record `chunk`.
    fn value_of(&self, chunk: &Ref, index: usize, slot: &Slot) -> Vec<u8> {
        match &slot.entry {
            Entry::Record(r) => decode_entry(self.record(Table::Entries, r), &r.hash, &slot.key).unwrap().to_vec(),
            Entry::Held(hash) => {
                let values = self.record(Table::Values, &values_ref(chunk, index / 16));
                held_value(values, &slot.key, hash).unwrap().to_vec()
            }
        }
    }
}

fn full(bytes: &[u8], capacity: usize) -> (Vec<Slot>, Vec<Hash>) {
    match ChunkRecord::decode(bytes, capacity).unwrap() {
        ChunkRecord::Full { slots, groups } => (slots, groups),
        ChunkRecord::Delta(_) => panic!("a delta where a full chunk record was expected"),
    }
}

fn delta(bytes: &[u8], capacity: usize) -> Delta {
    match ChunkRecord::decode(bytes, capacity).unwrap() {
        ChunkRecord::Delta(d) => d,
        ChunkRecord::Full { .. } => panic!("a full chunk record where a delta was expected"),
    }
}

/// A full chunk record checked as a reader checks it: decoded, then its
/// slots and group nodes against the chunk hash.
fn check_full(bytes: &[u8], capacity: usize, chunk_hash: &Hash) -> Result<(), StoreError> {
    match ChunkRecord::decode(bytes, capacity)? {
        ChunkRecord::Full { slots, groups } => verify_slots(&slots, &groups, chunk_hash).map(|_| ()),
        ChunkRecord::Delta(_) => Err(StoreError::Corrupt),
    }
}

/// A chunk delta checked as a reader checks it: decoded, applied to its
/// base's slots and group nodes, and the result checked against the chunk hash.
fn check_delta(bytes: &[u8], capacity: usize, base: &[u8], chunk_hash: &Hash) -> Result<Vec<Slot>, StoreError> {
    let (base_slots, base_groups) = full(base, capacity);
    match ChunkRecord::decode(bytes, capacity)? {
        ChunkRecord::Delta(d) => {
            let (slots, groups) = d.apply(&base_slots, &base_groups, capacity)?;
            verify_slots(&slots, &groups, chunk_hash)?;
            Ok(slots)
        }
        ChunkRecord::Full { .. } => Err(StoreError::Corrupt),
    }
}

/// The chunk hash that `slots` give (what a ref to their record names).
fn chunk_hash_of(slots: &[Slot]) -> Hash {
    let leaves: Vec<Hash> = slots.iter().map(|s| *s.entry.hash()).collect();
    chunk_hash(slots.len(), &inchunk_tree(&leaves)[0])
}

fn store_part() -> Part {
    let mut p =
        Part::new("The store record (0x06), under meta[store]: decoding record gives capacity and layout (4, the only layout read).");
    for capacity in [2, 4, 127, 128, 256, 4096] {
        let record = encode_store(capacity).unwrap();
        assert_eq!(decode_store(&record), Ok(capacity));
        p.valid.push(obj(vec![
            ("description", s(&format!("capacity {capacity}"))),
            ("record", h(&record)),
            ("capacity", n(capacity as u64)),
            ("layout", n(4)),
        ]));
    }
    let good = encode_store(256).unwrap();
    let mut bad = |why: &str, record: Vec<u8>| {
        let result = decode_store(&record);
        p.invalid(why, result, vec![("record", h(&record))]);
    };
    bad("empty record", vec![]);
    bad("the format byte only", vec![0x06]);
    bad("format byte 0x07 (a version record's)", with_byte(&good, 0, 0x07));
    bad("format byte 0x16 (version 2 of the kind)", with_byte(&good, 0, 0x16));
    bad("no layout byte (layout 1)", good[..good.len() - 1].to_vec());
    bad("layout 3 (no values in chunk records)", with_byte(&good, good.len() - 1, 3));
    bad("layout 5", with_byte(&good, good.len() - 1, 5));
    bad("capacity 1", with_first_varint(&good, &varint(1)));
    bad("capacity 4097", with_first_varint(&good, &varint(4097)));
    bad("capacity 256 with a redundant zero group", with_first_varint(&good, &noncanonical(256)));
    bad("a byte after the layout", cat(&[&good, &[0]]));
    p
}

/// The version records of `stores`, and invalid cases made from the one
/// whose top is a node.
fn version_part(stores: &[(&str, &Store)]) -> Part {
    let mut p = Part::new("Version records (0x07), under versions[u64be(version)]: decoding record in a store of capacity (the store record's) gives the fields; top is null (the empty tree) or the chunk or node record it names (table, birth, hash, record key). The root is H(0x04 ‖ u32be(C) ‖ u64be(chunk_count) ‖ u64be(entry_count) ‖ top hash), with 32 zero bytes for the empty tree.");
    for (about, store) in stores {
        let v = VersionRecord::decode(&store.version_record, store.capacity).unwrap();
        assert_eq!(v.encode(), store.version_record);
        p.valid.push(obj(vec![
            ("description", s(about)),
            ("capacity", n(store.capacity as u64)),
            ("record", h(&store.version_record)),
            ("chunk_count", n(v.chunk_count)),
            ("entry_count", n(v.entry_count)),
            ("top", v.top.as_ref().map_or(Value::Null, child_json)),
            ("root", h(&v.root)),
        ]));
    }
    let node_top = stores
        .iter()
        .find(|(_, st)| {
            matches!(VersionRecord::decode(&st.version_record, st.capacity).unwrap().top, Some(Child::Node(_)))
        })
        .expect("a node top")
        .1;
    let capacity = node_top.capacity;
    let good = VersionRecord::decode(&node_top.version_record, capacity).unwrap();
    // A record re-encoded with changed fields and the root they give, so that
    // only the rule under test catches it.
    let rooted = |chunk_count: u64, entry_count: u64, top: Option<Child>| {
        let top_hash = top.as_ref().map_or([0u8; 32], |t| t.record().hash);
        let root = root_hash(capacity, chunk_count, entry_count, &top_hash);
        VersionRecord { capacity, chunk_count, entry_count, top, root }.encode()
    };
    let mut bad = |why: &str, capacity: usize, record: Vec<u8>| {
        let result = VersionRecord::decode(&record, capacity);
        p.invalid(why, result, vec![("capacity", n(capacity as u64)), ("record", h(&record))]);
    };
    let b = node_top.version_record.clone();
    bad("empty record", capacity, vec![]);
    bad("format byte 0x08 (a node record's)", capacity, with_byte(&b, 0, 0x08));
    bad("the last byte (of the root) missing", capacity, b[..b.len() - 1].to_vec());
    bad("a byte after the root", capacity, cat(&[&b, &[0]]));
    bad("the root's last byte flipped", capacity, flip_last(&b));
    bad("the store's capacity is another (the record is of a store of 32, read as one of 16)", 16, b.clone());
    bad("capacity with a redundant zero group", capacity, with_first_varint(&b, &noncanonical(capacity as u64)));
    let mut top3 = VersionRecord { top: None, ..good.clone() }.encode();
    let top_at = top3.len() - 33;
    top3[top_at] = 3;
    bad("top 3 (only 0, 1 and 2 name a top)", capacity, top3);
    bad("the empty tree with chunk_count 1 and entry_count 4 (root of those counts)", capacity, rooted(1, 4, None));
    bad("the empty tree with entry_count 1 (root of those counts)", capacity, rooted(0, 1, None));
    bad("a node top with chunk_count 0 (root of those counts)", capacity, rooted(0, good.entry_count, good.top));
    bad(
        "chunk_count 2^32, over 2^32 − 1 (root of those counts)",
        capacity,
        rooted(1 << 32, good.entry_count, good.top),
    );
    p
}

fn node_part(stores: &[&Store]) -> Part {
    let mut p = Part::new("Node records (0x08), under nodes[u64be(birth) ‖ inner hash]: decoding record, named by hash (its parent's or its version's ref), gives the fields. left and right are the children's records (table chunks or nodes, by the kinds bits); key_copy is the smallest key of the right subtree, covered by no hash.");
    let mut good: Option<(Ref, NodeRecord)> = None;
    for store in stores {
        for (r, bytes) in store.born(Table::Nodes, 1) {
            let node = NodeRecord::decode(bytes, &r.hash).unwrap();
            assert_eq!(node.encode(), bytes);
            p.valid.push(obj(vec![
                (
                    "description",
                    s(&format!("a node of height {} of a bulk load of capacity {}", node.height, store.capacity)),
                ),
                ("hash", h(&r.hash)),
                ("key", h(&r.key())),
                ("record", h(bytes)),
                ("height", n(node.height as u64)),
                ("chunk_count", n(node.chunk_count)),
                ("entry_count", n(node.entry_count)),
                ("left", child_json(&node.left)),
                ("right", child_json(&node.right)),
                ("key_copy", h(&node.key_copy)),
            ]));
            good.get_or_insert((r, node));
        }
    }
    let (r, node) = good.unwrap();
    let b = node.encode();
    let mut bad = |why: &str, hash: Hash, record: Vec<u8>| {
        let result = NodeRecord::decode(&record, &hash);
        p.invalid(why, result, vec![("hash", h(&hash)), ("record", h(&record))]);
    };
    // A node with changed fields, named by the hash those fields give, so
    // that only the rule under test catches it.
    let mut rehashed = |why: &str, change: &dyn Fn(&mut NodeRecord)| {
        let mut changed = node.clone();
        change(&mut changed);
        bad(why, changed.hash(), changed.encode());
    };
    rehashed("height 0", &|node| node.height = 0);
    rehashed("height 49, over 48", &|node| node.height = 49);
    rehashed("chunk_count 1: a node has two chunks or more", &|node| node.chunk_count = 1);
    rehashed("chunk_count 2^32, over 2^32 − 1", &|node| node.chunk_count = 1 << 32);
    rehashed("an empty key copy", &|node| node.key_copy.clear());
    rehashed("a key copy of 1,025 bytes, over 1,024", &|node| node.key_copy = vec![b'k'; 1025]);
    bad("empty record", r.hash, vec![]);
    bad("format byte 0x09 (a full chunk's)", r.hash, with_byte(&b, 0, 0x09));
    let kinds_at = 2 + varint(node.chunk_count).len() + varint(node.entry_count).len();
    bad("kinds bit 2 set (only bits 0 and 1 are used)", r.hash, with_byte(&b, kinds_at, b[kinds_at] | 4));
    bad("the key copy's last byte missing", r.hash, b[..b.len() - 1].to_vec());
    bad("a byte after the key copy", r.hash, cat(&[&b, &[0]]));
    bad("named by another hash (the hash's last byte flipped)", flip_last(&r.hash).try_into().unwrap(), b.clone());
    bad(
        "chunk_count with a redundant zero group",
        r.hash,
        cat(&[&b[..2], &noncanonical(node.chunk_count), &b[2 + varint(node.chunk_count).len()..]]),
    );
    p
}

fn full_chunk_json(about: &str, capacity: usize, r: &Ref, bytes: &[u8]) -> Value {
    let (slots, groups) = full(bytes, capacity);
    assert_eq!(encode_full(&slots, &groups), bytes);
    verify_slots(&slots, &groups, &r.hash).unwrap();
    let mut fields = chunk_fields(about, capacity, r, bytes);
    fields.extend([("slots", slots.iter().map(slot_json).collect()), ("groups", hashes(&groups))]);
    obj(fields)
}

/// The fields every chunk record case opens with: what it is, and where it is stored.
fn chunk_fields<'a>(about: &str, capacity: usize, r: &Ref, bytes: &[u8]) -> Vec<(&'a str, Value)> {
    vec![
        ("description", s(about)),
        ("capacity", n(capacity as u64)),
        ("chunk_hash", h(&r.hash)),
        ("key", h(&r.key())),
        ("record", h(bytes)),
    ]
}

fn full_chunk_part(cases: &[(&str, &Store, Ref)], mixed: (&Store, Ref)) -> Part {
    let mut p = Part::new("Full chunk records (0x09), under chunks[u64be(birth) ‖ chunk hash]: decoding record in a store of capacity gives slots (key, kind 0 with its entry record's ref, or kind 1 with the entry hash) and group nodes; the record verifies when the slots' entry hashes give each group node and the group nodes give chunk_hash (spec/store-format.md, both checks). Invalid cases fail decoding or that check.");
    for (about, store, r) in cases {
        p.valid.push(full_chunk_json(about, store.capacity, r, store.record(Table::Chunks, r)));
    }
    let (store, r) = mixed;
    let capacity = store.capacity;
    let b = store.record(Table::Chunks, &r).to_vec();
    let (slots, groups) = full(&b, capacity);
    assert_eq!((slots.len(), capacity), (32, 32), "the counts the cases name");
    let mut bad = |why: &str, capacity: usize, chunk_hash: Hash, record: Vec<u8>| {
        let result = check_full(&record, capacity, &chunk_hash);
        p.invalid(
            why,
            result,
            vec![("capacity", n(capacity as u64)), ("chunk_hash", h(&chunk_hash)), ("record", h(&record))],
        );
    };
    // Slots re-encoded with their own group nodes and named by the chunk hash
    // they give, so that only the rule under test catches them.
    let mut rehashed = |why: &str, slots: Vec<Slot>| {
        let groups = slot_groups(&slots);
        bad(why, capacity, chunk_hash_of(&slots), encode_full(&slots, &groups));
    };
    let mut swapped = slots.clone();
    swapped.swap(0, 1);
    rehashed("the first two slots' keys out of order", swapped);
    let mut equal = slots.clone();
    equal[1].key = equal[0].key.clone();
    rehashed("the second slot's key equal to the first's", equal);
    let mut empty_key = slots.clone();
    empty_key[0].key.clear();
    rehashed("an empty slot key", empty_key);
    bad("M 33 over the capacity 32", capacity, r.hash, with_first_varint(&b, &varint(capacity as u64 + 1)));
    bad("read as a record of a store of capacity 16: M 32 over it", 16, r.hash, b.clone());
    bad("M 0", capacity, r.hash, with_first_varint(&b, &varint(0)));
    bad("M with a redundant zero group", capacity, r.hash, with_first_varint(&b, &noncanonical(slots.len() as u64)));
    let kind_at = 1 + varint(slots.len() as u64).len() + bytes_field(&slots[0].key).len();
    bad("the first slot's kind 2", capacity, r.hash, with_byte(&b, kind_at, 2));
    bad("the last group node's last byte missing", capacity, r.hash, b[..b.len() - 1].to_vec());
    bad("a byte after the group nodes", capacity, r.hash, cat(&[&b, &[0]]));
    bad("one group node too many", capacity, r.hash, cat(&[&b, &groups[0]]));
    bad("format byte 0x0a (a delta's)", capacity, r.hash, with_byte(&b, 0, 0x0a));
    bad("format byte 0x00 (a values record's)", capacity, r.hash, with_byte(&b, 0, 0x00));
    bad("the last group node's last byte flipped: check (1) fails", capacity, r.hash, flip_last(&b));
    let mut wrong_leaf = slots.clone();
    let held = wrong_leaf.iter().position(|s| matches!(s.entry, Entry::Held(_))).expect("a kind-1 slot");
    if let Entry::Held(hash) = &mut wrong_leaf[held].entry {
        hash[31] ^= 1;
    }
    bad(
        "a kind-1 slot's entry hash flipped, the group nodes kept: check (2) fails",
        capacity,
        r.hash,
        encode_full(&wrong_leaf, &groups),
    );
    bad("named by another hash", capacity, flip_last(&r.hash).try_into().unwrap(), b.clone());
    p
}

fn edit_json(e: &Edit) -> Value {
    match e {
        Edit::Set { position, entry } => {
            obj(vec![("op", s("set")), ("position", n(*position as u64)), ("entry", ref_json(entry))])
        }
        Edit::Insert { position, key, entry } => obj(vec![
            ("op", s("insert")),
            ("position", n(*position as u64)),
            ("key", h(key)),
            ("entry", ref_json(entry)),
        ]),
        Edit::Delete { position } => obj(vec![("op", s("delete")), ("position", n(*position as u64))]),
    }
}

/// A chunk delta as the vectors list it.
fn delta_json(about: &str, capacity: usize, r: &Ref, bytes: &[u8], base_record: &[u8]) -> Value {
    let d = delta(bytes, capacity);
    assert_eq!(ChunkRecord::Delta(d.clone()).encode(), bytes);
    let slots = check_delta(bytes, capacity, base_record, &r.hash).unwrap();
    let mut fields = chunk_fields(about, capacity, r, bytes);
    fields.extend([
        ("base", ref_json(&d.base)),
        ("base_record", h(base_record)),
        ("edits", d.edits.iter().map(edit_json).collect()),
        ("group_count", n(d.group_count as u64)),
        ("changed_groups", d.changed_groups.iter().map(|(i, g)| json!([i, hex::encode(g)])).collect()),
        ("slots", slots.iter().map(slot_json).collect()),
    ]);
    obj(fields)
}

/// The delta of full chunk record `base` that gives `now`, born at `birth`: its ref and the delta.
fn delta_to(store: &Store, base: &Ref, now: &[Slot], birth: u64) -> (Ref, Delta) {
    let (base_slots, base_groups) = full(store.record(Table::Chunks, base), store.capacity);
    let d = Delta::of(base, &base_slots, &base_groups, now, &slot_groups(now)).expect("a delta gives it");
    (Ref { birth, hash: chunk_hash_of(now) }, d)
}

/// `store`'s delta `r` (with set, insert and delete edits) and `one_group`'s
/// full chunk record of 16 slots, which a delta grows to two groups.
fn delta_part(store: &Store, r: Ref, one_group: (&Store, Ref)) -> Part {
    let mut p = Part::new("Chunk deltas (0x0A), under chunks[u64be(birth) ‖ chunk hash]: decoding record in a store of capacity gives the base's ref, the edits, the result's group count and its changed group nodes ([index, node]). Applied in order to the base's slots (base_record, the full chunk record the base ref names), the edits give slots, the result's (a slot kept from the base keeps its kind), which verify against chunk_hash with the base's group nodes cut or extended to group_count, each changed one replaced. Invalid cases fail decoding, applying or that check.");
    let capacity = store.capacity;
    let b = store.record(Table::Chunks, &r).to_vec();
    let d = delta(&b, capacity);
    let base_record = store.record(Table::Chunks, &d.base).to_vec();
    for op in ["set", "insert", "delete"] {
        assert!(d.edits.iter().map(edit_json).any(|e| e["op"] == op), "the delta has a {op} edit");
    }
    p.valid.push(delta_json(
        "a commit's set, insert and delete in a chunk of 25 (two groups) of a bulk load of capacity 32",
        capacity,
        &r,
        &b,
        &base_record,
    ));
    let (base_slots, _) = full(&base_record, capacity);
    assert_eq!((base_slots.len(), capacity), (25, 32), "the counts the cases name");
    let (shrunk_ref, shrink) = delta_to(store, &d.base, &base_slots[..16], r.birth);
    assert!(shrink.changed_groups.is_empty() && shrink.group_count == 1);
    p.valid.push(delta_json(
        "the base's last 9 slots deleted (9 deletes at position 16): one group, the base's group 0, so none changed",
        capacity,
        &shrunk_ref,
        &ChunkRecord::Delta(shrink.clone()).encode(),
        &base_record,
    ));
    let (small, small_base) = one_group;
    let small_record = small.record(Table::Chunks, &small_base).to_vec();
    let (mut grown_slots, _) = full(&small_record, capacity);
    let new_entry = Ref { birth: r.birth, hash: entry_hash(&key(99), &value(99, 2)) };
    grown_slots.push(Slot::new(&key(99), new_entry));
    let (grown_ref, grown) = delta_to(small, &small_base, &grown_slots, r.birth);
    assert_eq!((grown.group_count, grown.changed_groups.len()), (2, 1));
    p.valid.push(delta_json(
        "a slot inserted after the 16 slots of a bulk load's only chunk: a second group, listed as changed",
        capacity,
        &grown_ref,
        &ChunkRecord::Delta(grown.clone()).encode(),
        &small_record,
    ));

    let mut bad_of = |why: &str, base_record: &[u8], chunk_hash: Hash, record: Vec<u8>| {
        let result = check_delta(&record, capacity, base_record, &chunk_hash);
        p.invalid(
            why,
            result,
            vec![
                ("capacity", n(capacity as u64)),
                ("chunk_hash", h(&chunk_hash)),
                ("base_record", h(base_record)),
                ("record", h(&record)),
            ],
        );
    };
    bad_of(
        "the second group not listed: past the base's one group, a group must be a changed one",
        &small_record,
        grown_ref.hash,
        ChunkRecord::Delta(Delta { changed_groups: vec![], ..grown }).encode(),
    );
    let mut bad = |why: &str, chunk_hash: Hash, record: Vec<u8>| bad_of(why, &base_record, chunk_hash, record);
    let encoded = |d: Delta| ChunkRecord::Delta(d).encode();
    let with_edits = |edits: Vec<Edit>| encoded(Delta { edits, ..d.clone() });
    bad("empty record", r.hash, vec![]);
    bad("format byte 0x0b (an entry record's)", r.hash, with_byte(&b, 0, 0x0b));
    bad("the last byte missing", r.hash, b[..b.len() - 1].to_vec());
    bad("a byte after the changed groups", r.hash, cat(&[&b, &[0]]));
    bad("no edits", r.hash, with_edits(vec![]));
    bad(
        "65 edits, over 2·C = 64 (deletes of position 0)",
        r.hash,
        with_edits(vec![Edit::Delete { position: 0 }; 2 * capacity + 1]),
    );
    let op_at = 1 + varint(d.base.birth).len() + 32 + varint(d.edits.len() as u64).len();
    bad("an edit's op 3", r.hash, with_byte(&b, op_at, 3));
    bad(
        "a set at position 25, past the 25 slots",
        r.hash,
        with_edits(vec![Edit::Set { position: 25, entry: new_entry }]),
    );
    bad("a delete at position 25, past the 25 slots", r.hash, with_edits(vec![Edit::Delete { position: 25 }]));
    // Read as 16 by a 32-bit reader that casts a position before checking it: the valid delta above.
    let mut wrapped = shrink;
    wrapped.edits[0] = Edit::Delete { position: (1 << 32) + 16 };
    bad(
        "the first of the 9 deletes of the base's last 9 slots at position 2^32 + 16, past the 25 slots",
        shrunk_ref.hash,
        ChunkRecord::Delta(wrapped).encode(),
    );
    bad(
        "an insert at position 26, past the end (25)",
        r.hash,
        with_edits(vec![Edit::Insert { position: 26, key: b"k999".to_vec(), entry: new_entry }]),
    );
    bad(
        "an insert of the key of the slot after it: keys not strictly increasing",
        r.hash,
        with_edits(vec![Edit::Insert { position: 0, key: base_slots[0].key.to_vec(), entry: new_entry }]),
    );
    bad("25 deletes: no slot left", r.hash, with_edits(vec![Edit::Delete { position: 0 }; base_slots.len()]));
    let extra: Vec<Edit> = (0..8)
        .map(|i| Edit::Insert { position: base_slots.len() + i, key: format!("z{i}").into_bytes(), entry: new_entry })
        .collect();
    bad("8 inserts: 33 slots, over the capacity 32", r.hash, with_edits(extra));
    bad("group count 0", r.hash, encoded(Delta { group_count: 0, changed_groups: vec![], ..d.clone() }));
    bad(
        "group count 3, over ⌈C/16⌉ = 2",
        r.hash,
        encoded(Delta { group_count: 3, changed_groups: vec![(0, [0; 32]), (1, [0; 32]), (2, [0; 32])], ..d.clone() }),
    );
    let two_groups =
        |changed_groups: Vec<(usize, Hash)>| encoded(Delta { group_count: 2, changed_groups, ..d.clone() });
    let g = [7u8; 32];
    bad("changed groups listed twice (index 0, 0)", r.hash, two_groups(vec![(0, g), (0, g)]));
    bad("changed groups out of order (index 1, 0)", r.hash, two_groups(vec![(1, g), (0, g)]));
    bad("changed group index 2, not below the group count 2", r.hash, two_groups(vec![(2, g)]));
    bad("3 changed groups, over the group count 2", r.hash, two_groups(vec![(0, g), (1, g), (2, g)]));
    bad("a changed group node flipped: the result fails its chunk hash", r.hash, {
        let mut changed = d.clone();
        changed.changed_groups[0].1[31] ^= 1;
        encoded(changed)
    });
    bad("named by another hash", flip_last(&r.hash).try_into().unwrap(), b.clone());
    bad(
        "the base's birth with a redundant zero group",
        r.hash,
        cat(&[&b[..1], &noncanonical(d.base.birth), &b[1 + varint(d.base.birth).len()..]]),
    );
    p
}

fn values_part(cases: &[(&str, &Store, Ref, usize)]) -> Part {
    let mut p = Part::new("Values records (0x00), under values[the first 39 bytes of a full chunk record's key ‖ u8(group)]: the values of the kind-1 slots of one group of chunk_key's record, in slot order. Decoding record gives values, each with its slot's key and entry hash; a value is used once entry_hash(key, value) equals the slot's entry_hash. Invalid cases carry a key and entry hash of a slot the record was made for: a decoder that skipped the rule under test would find its value.");
    for (about, store, chunk, group) in cases {
        let at = values_ref(chunk, *group);
        let record = store.record(Table::Values, &at);
        let (slots, _) = full(store.record(Table::Chunks, chunk), store.capacity);
        let held: Vec<(usize, &Slot)> = slots
            .iter()
            .enumerate()
            .skip(16 * group)
            .take(16)
            .filter(|(_, s)| matches!(s.entry, Entry::Held(_)))
            .collect();
        let values = held_values(record).unwrap();
        assert_eq!(values.len(), held.len());
        p.valid.push(obj(vec![
            ("description", s(about)),
            ("chunk_key", h(&chunk.key())),
            ("group", n(*group as u64)),
            ("key", h(&at.key())),
            ("record", h(record)),
            (
                "values",
                held.iter()
                    .zip(&values)
                    .map(|((i, slot), (k, v))| {
                        assert_eq!((*k, v.to_vec()), (&slot.key[..], store.value_of(chunk, *i, slot)));
                        obj(vec![("key", h(k)), ("value", h(v)), ("entry_hash", h(slot.entry.hash()))])
                    })
                    .collect(),
            ),
        ]));
    }
    let (_, store, chunk, group) = cases[0];
    let record = store.record(Table::Values, &values_ref(&chunk, group)).to_vec();
    let values: Vec<(Vec<u8>, Vec<u8>)> =
        held_values(&record).unwrap().into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    assert_eq!(values.len(), 16, "the first case is a full group");
    let (k0, v0) = values[0].clone();
    let first = entry_hash(&k0, &v0);
    let mut bad = |why: &str, record: Vec<u8>, key: &[u8], hash: Hash| {
        let result = held_value(&record, key, &hash);
        p.invalid(why, result, vec![("record", h(&record)), ("key", h(key)), ("entry_hash", h(&hash))]);
    };
    // Values records of held slots, made by the core's writer: the slots
    // need only their keys and entry hashes.
    let written = |pairs: &[(Vec<u8>, Vec<u8>)]| -> Vec<u8> {
        let slots: Vec<Slot> = pairs.iter().map(|(k, v)| Slot::new(k, Entry::Held(entry_hash(k, v)))).collect();
        let puts = full_record_puts(chunk, &slots, &slot_groups(&slots), |i| &pairs[i].1);
        assert_eq!(puts.len(), 2, "one group");
        puts[1].2.clone()
    };
    bad("empty record", vec![], &k0, first);
    bad("format byte 0x0b (an entry record's)", with_byte(&record, 0, 0x0b), &k0, first);
    bad("format byte 0x10 (version 2 of the kind)", with_byte(&record, 0, 0x10), &k0, first);
    bad("the last value's last byte missing", record[..record.len() - 1].to_vec(), &k0, first);
    bad("a byte after the last value", cat(&[&record, &[0]]), &k0, first);
    bad("n 0", vec![0x00, 0x00], &k0, first);
    bad(
        "n 17, over 16 (a 17th value appended)",
        cat(&[&with_first_varint(&record, &varint(17)), &bytes_field(b"k999"), &bytes_field(b"v")]),
        &k0,
        first,
    );
    bad("n with a redundant zero group", with_first_varint(&record, &noncanonical(16)), &k0, first);
    let mut swapped = values.clone();
    swapped.swap(0, 1);
    bad("the first two keys out of order", written(&swapped), &k0, first);
    let mut equal = values.clone();
    equal[1].0 = equal[0].0.clone();
    bad("the second key equal to the first", written(&equal), &k0, first);
    let mut empty = values.clone();
    empty[1].0.clear();
    bad("an empty key", written(&empty), &k0, first);
    let mut long = values.clone();
    long[0].1 = vec![0x61; 65537];
    let long_hash = entry_hash(&long[0].0, &long[0].1);
    bad("a value of 65,537 bytes, over 65,536 (its entry hash matches)", written(&long), &k0, long_hash);
    bad("the key is not in the record", record.clone(), b"k001", entry_hash(b"k001", &v0));
    bad("the value does not give the entry hash", record.clone(), &k0, flip_last(&first).try_into().unwrap());
    p
}

fn entry_part(store: &Store, birth: u64) -> Part {
    let mut p = Part::new("Entry records (0x0B), under entries[u64be(birth) ‖ entry hash]: the value, to the end of the record. It is used once entry_hash(key, value) equals the entry hash its ref names, key being the key of the slot that names the record.");
    // The slot key of each entry record: the writes of version 2 use keys k000 … k099.
    let slot_key = |r: &Ref, bytes: &[u8]| -> Vec<u8> {
        (0..100).map(key).find(|k| decode_entry(bytes, &r.hash, k).is_ok()).expect("a written key")
    };
    let entries = store.born(Table::Entries, birth);
    for (r, bytes) in entries.iter().take(4) {
        let key = slot_key(r, bytes);
        let value = decode_entry(bytes, &r.hash, &key).unwrap();
        assert_eq!(encode_entry(value), *bytes);
        p.valid.push(obj(vec![
            ("description", s(&format!("a commit's value of {}", String::from_utf8_lossy(&key)))),
            ("key", h(&key)),
            ("entry_hash", h(&r.hash)),
            ("record", h(bytes)),
            ("value", h(value)),
        ]));
    }
    let empty_hash = entry_hash(b"k000", b"");
    decode_entry(&encode_entry(b""), &empty_hash, b"k000").unwrap();
    p.valid.push(obj(vec![
        ("description", s("an empty value: the format byte alone")),
        ("key", h(b"k000")),
        ("entry_hash", h(&empty_hash)),
        ("record", h(&encode_entry(b""))),
        ("value", h(b"")),
    ]));
    let (r, bytes) = entries[0];
    let key = slot_key(&r, bytes);
    let mut bad = |why: &str, record: Vec<u8>, key: &[u8], hash: Hash| {
        let result = decode_entry(&record, &hash, key);
        p.invalid(why, result, vec![("key", h(key)), ("entry_hash", h(&hash)), ("record", h(&record))]);
    };
    bad("empty record", vec![], b"k000", empty_hash);
    bad("format byte 0x0a (a delta's)", with_byte(bytes, 0, 0x0a), &key, r.hash);
    bad("format byte 0x1b (version 2 of the kind)", with_byte(bytes, 0, 0x1b), &key, r.hash);
    bad("the last byte missing: the value fails its entry hash", bytes[..bytes.len() - 1].to_vec(), &key, r.hash);
    bad("a byte appended: the value fails its entry hash", cat(&[bytes, &[0]]), &key, r.hash);
    bad("checked with another slot key", bytes.to_vec(), b"k999", r.hash);
    let long = vec![0x61; 65537];
    bad(
        "a value of 65,537 bytes, over 65,536 (its entry hash matches)",
        encode_entry(&long),
        b"k000",
        entry_hash(b"k000", &long),
    );
    p
}

/// One chunk a sync into an empty store wrote: its index, progress record and full chunk record.
struct Synced {
    index: u64,
    progress: Vec<u8>,
    chunk_record: Vec<u8>,
}

/// A sync of `tree`'s committed head into an empty store, as version
/// `version`: the root and each chunk's writes, in index order.
fn sync_of(tree: &Tree, version: u64) -> (Hash, Vec<Synced>) {
    let root = tree.head().root();
    let mut sync = StoreSync::new(root, version);
    let mut out = Vec::new();
    for index in 0..tree.chunk_count() {
        let chunk = verify_chunk(&root, index, &tree.head().export_chunk_bytes(index).unwrap()).unwrap();
        let write = sync.add(chunk).unwrap().expect("a new chunk");
        let chunk_key = Ref { birth: version, hash: SyncProgress::decode(&write.progress).unwrap().hash }.key();
        let chunk_record =
            write.puts.iter().find(|(t, r, _)| *t == Table::Chunks && r.key() == chunk_key).unwrap().2.clone();
        out.push(Synced { index, progress: write.progress, chunk_record });
    }
    sync.finish().unwrap();
    (root, out)
}

/// A progress record taken back by a new run of the sync of `root` as
/// `version`: decoded, then checked with its chunk record (`None`: missing).
fn restored(
    root: Hash,
    version: u64,
    index: u64,
    progress: &[u8],
    chunk_record: Option<&[u8]>,
) -> Result<(), StoreError> {
    StoreSync::new(root, version).restore(index, progress, chunk_record, None)
}

/// `meta[sync ‖ u64be(index)]`, the key of chunk `index`'s progress record.
fn progress_key(index: u64) -> Vec<u8> {
    cat(&[b"sync", &index.to_be_bytes()])
}

fn step_json(st: &PathStep) -> Value {
    obj(vec![
        ("sibling_is_left", Value::Bool(st.sibling_is_left)),
        ("parent_height", n(st.parent_height as u64)),
        ("sibling_chunks", n(st.sibling_chunks)),
        ("sibling_entries", n(st.sibling_entries)),
        ("sibling_hash", h(&st.sibling_hash)),
    ])
}

/// Progress records of two syncs as version 1: of a tree of capacity 4
/// committed from 13 inserts (every chunk) and of one of 3 entries (one
/// chunk, no path). Invalid cases break the record's format (decoding
/// refuses them) or decode and are refused when taken back.
fn progress_part() -> Part {
    let mut p = Part::new("Sync progress records (0x0C), under meta[sync ‖ u64be(index)] (key) while a sync of root as version is unfinished: decoding record gives capacity, key_height, M, chunk_hash and path (its steps as in the chunk envelope, bottom-up); the chunk record it names is chunks[chunk_key], chunk_key = u64be(version) ‖ chunk_hash. A new run of that sync takes the chunk back (spec/store-format.md, \"Syncing into a store\") when chunk_record, a full chunk of M slots, verifies against chunk_hash and folding the path from it gives root, index, key_height and the tree's chunk_count and entry_count. Invalid cases: fails is \"decode\" when decoding refuses the record, \"restore\" when it decodes and taking it back as chunk index of root (with chunk_record, or null: missing) refuses it.");
    let version = 1;
    let mut many = Tree::new(4).unwrap();
    for i in 0..13 {
        many.insert(&key(i), &value(i, 1)).unwrap();
    }
    many.commit();
    let mut one = Tree::new(4).unwrap();
    for i in 0..3 {
        one.insert(&key(i), &value(i, 1)).unwrap();
    }
    one.commit();
    let (root, synced) = sync_of(&many, version);
    let (one_root, one_synced) = sync_of(&one, version);
    let cases = synced
        .iter()
        .map(|c| (root, c, "capacity 4, 13 entries"))
        .chain(one_synced.iter().map(|c| (one_root, c, "capacity 4, 3 entries: one chunk, no path")));
    for (root, c, tree) in cases {
        let pr = SyncProgress::decode(&c.progress).unwrap();
        assert_eq!(pr.encode(), c.progress);
        restored(root, version, c.index, &c.progress, Some(&c.chunk_record)).unwrap();
        let folded = pr.path.fold(pr.capacity, pr.entries, pr.hash);
        assert_eq!((folded.root, folded.index, folded.key_height), (root, c.index, pr.key_height));
        let chunk_key = Ref { birth: version, hash: pr.hash }.key();
        assert_eq!(StoreSync::new(root, version).chunk_ref(&c.progress).unwrap().map(|r| r.key()), Some(chunk_key));
        p.valid.push(obj(vec![
            ("description", s(&format!("chunk {} of {} ({} steps)", c.index, tree, pr.path.steps.len()))),
            ("root", h(&root)),
            ("version", n(version)),
            ("index", n(c.index)),
            ("key", h(&progress_key(c.index))),
            ("record", h(&c.progress)),
            ("capacity", n(pr.capacity as u64)),
            ("key_height", n(pr.key_height as u64)),
            ("M", n(pr.entries as u64)),
            ("chunk_hash", h(&pr.hash)),
            ("path", pr.path.steps.iter().map(step_json).collect()),
            ("chunk_count", n(folded.chunk_count)),
            ("entry_count", n(folded.entry_count)),
            ("chunk_key", h(&chunk_key)),
            ("chunk_record", h(&c.chunk_record)),
        ]));
    }
    // The record the invalid cases break: a chunk of two or more entries
    // whose path has two steps or more, one with its sibling on the left.
    let good = synced
        .iter()
        .find(|c| {
            let pr = SyncProgress::decode(&c.progress).unwrap();
            pr.entries >= 2 && pr.path.steps.len() >= 2 && pr.key_height > 0
        })
        .expect("a chunk with a path of two steps");
    let other = synced.iter().find(|c| c.index != good.index).unwrap();
    let single = &one_synced[0];
    let gp = SyncProgress::decode(&good.progress).unwrap();
    let b = good.progress.clone();
    let mut bad = |why: &str, decodes: bool, root: Hash, index: u64, record: Vec<u8>, chunk_record: Option<&[u8]>| {
        let decoded = SyncProgress::decode(&record);
        assert_eq!(decoded.is_ok(), decodes, "progress case {why:?}: decodes");
        let result = decoded.and_then(|_| restored(root, version, index, &record, chunk_record));
        p.invalid(
            why,
            result,
            vec![
                ("root", h(&root)),
                ("version", n(version)),
                ("index", n(index)),
                ("record", h(&record)),
                ("chunk_record", chunk_record.map_or(Value::Null, h)),
                ("fails", s(if decodes { "restore" } else { "decode" })),
            ],
        );
    };
    let mut undecodable =
        |why: &str, record: Vec<u8>| bad(why, false, root, good.index, record, Some(&good.chunk_record));
    let changed = |change: &dyn Fn(&mut SyncProgress)| {
        let mut pr = gp.clone();
        change(&mut pr);
        pr.encode()
    };
    let with_path = |steps: Vec<PathStep>| changed(&|pr| pr.path = ChunkPath { steps: steps.clone() });
    let path_at = with_path(vec![]).len() - 1;
    assert_eq!(b[path_at] as usize, gp.path.steps.len(), "the path length byte");
    undecodable("empty record", vec![]);
    undecodable("the format byte only", vec![0x0c]);
    undecodable("format byte 0x0b (an entry record's)", with_byte(&b, 0, 0x0b));
    undecodable("format byte 0x1c (version 2 of the kind)", with_byte(&b, 0, 0x1c));
    undecodable("capacity 1, under 2", changed(&|pr| pr.capacity = 1));
    undecodable("capacity with a redundant zero group", with_first_varint(&b, &noncanonical(4)));
    undecodable("key_height 49, over 48", changed(&|pr| pr.key_height = 49));
    undecodable(
        "M 1 with a path: under the fill ⌈C/2⌉ = 2 of a chunk of a tree of several",
        changed(&|pr| pr.entries = 1),
    );
    undecodable("the last byte (of the last step's sibling hash) missing", b[..b.len() - 1].to_vec());
    undecodable("a byte after the path", cat(&[&b, &[0]]));
    undecodable("path length 49, over 48", cat(&[&b[..path_at], &varint(49)]));
    undecodable(
        "path length with a redundant zero group",
        cat(&[&b[..path_at], &noncanonical(gp.path.steps.len() as u64), &b[path_at + 1..]]),
    );
    undecodable(
        "path length one more than the steps present",
        cat(&[&b[..path_at], &varint(gp.path.steps.len() as u64 + 1), &b[path_at + 1..]]),
    );
    let step = |i: usize, change: &dyn Fn(&mut PathStep)| {
        let mut steps = gp.path.steps.clone();
        change(&mut steps[i]);
        with_path(steps)
    };
    undecodable("the first step's parent height 0: not above the chunk's 0", step(0, &|st| st.parent_height = 0));
    undecodable("the first step's parent height 3: over the chunk's 0 + 2", step(0, &|st| st.parent_height = 3));
    undecodable("the second step's sibling chunk count 0", step(1, &|st| st.sibling_chunks = 0));
    undecodable(
        "the first step's sibling entries over its sibling chunks × C",
        step(0, &|st| st.sibling_entries = st.sibling_chunks * 4 + 1),
    );
    let s0 = SyncProgress::decode(&single.progress).unwrap();
    let mut one_chunk = |why: &str, change: &dyn Fn(&mut SyncProgress)| {
        let mut pr = s0.clone();
        change(&mut pr);
        bad(why, false, one_root, 0, pr.encode(), Some(&single.chunk_record));
    };
    // A single chunk has no path, so no fill: only the rule under test catches these.
    one_chunk("capacity 4097, over 4096 (one chunk, no path)", &|pr| pr.capacity = 4097);
    one_chunk("M 0 (one chunk, no path)", &|pr| pr.entries = 0);
    one_chunk("M 5, over the capacity 4 (one chunk, no path)", &|pr| pr.entries = 5);

    let mut refused = |why: &str, root: Hash, index: u64, record: Vec<u8>, chunk_record: Option<&[u8]>| {
        bad(why, true, root, index, record, chunk_record)
    };
    let last = gp.path.steps.len() - 1;
    refused(
        "the last step's sibling hash flipped: the path folds to another root",
        root,
        good.index,
        step(last, &|st| st.sibling_hash[31] ^= 1),
        Some(&good.chunk_record),
    );
    refused(
        "key_height one more than the path declares",
        root,
        good.index,
        changed(&|pr| pr.key_height += 1),
        Some(&good.chunk_record),
    );
    refused(
        "taken back as the next chunk's: the path folds to another index",
        root,
        good.index + 1,
        b.clone(),
        Some(&good.chunk_record),
    );
    refused(
        "the sync of another root (the last byte flipped)",
        flip_last(&root).try_into().unwrap(),
        good.index,
        b.clone(),
        Some(&good.chunk_record),
    );
    refused("its chunk record missing", root, good.index, b.clone(), None);
    refused(
        &format!("the chunk record of chunk {}: not the chunk it names", other.index),
        root,
        good.index,
        b.clone(),
        Some(&other.chunk_record),
    );
    refused(
        "its chunk record's last group node flipped: it does not verify against the chunk hash",
        root,
        good.index,
        b.clone(),
        Some(&flip_last(&good.chunk_record)),
    );
    p
}

/// The table keys; `stale` holds stale marks (since, table, record), of which
/// the first of each table is listed.
fn keys_part(chunk: &Ref, stale: &[(u64, Table, Ref)]) -> Value {
    let refs = [
        Ref { birth: 0, hash: chunk.hash },
        *chunk,
        Ref { birth: 0x0102_0304_0506_0708, hash: chunk.hash },
        Ref { birth: (1 << 53) - 1, hash: chunk.hash },
    ];
    let record_keys: Value = refs.iter().map(ref_json).collect();
    let versions: Value = [0u64, 1, 2, 256, (1 << 53) - 1]
        .iter()
        .map(|&v| obj(vec![("version", n(v)), ("key", h(&v.to_be_bytes()))]))
        .collect();
    let values_keys: Value = [2usize, 16, 17, 32, 256, 4096]
        .iter()
        .map(|&capacity| {
            let keys: Vec<Value> = values_refs(chunk, capacity).map(|r| h(&r.key())).collect();
            obj(vec![("chunk_key", h(&chunk.key())), ("capacity", n(capacity as u64)), ("keys", Value::Array(keys))])
        })
        .collect();
    let mut stale_valid = Vec::new();
    let mut tables = Vec::new();
    for (since, table, r) in stale {
        if tables.contains(table) {
            continue;
        }
        tables.push(*table);
        stale_valid.push(obj(vec![
            ("since", n(*since)),
            ("table", s(table_name(*table))),
            ("table_id", n(*table as u64)),
            ("record_key", h(&r.key())),
            ("key", h(&stale_key(*since, *table, r))),
        ]));
    }
    let good = stale_key(2, Table::Chunks, chunk);
    let stale_invalid: Value = [
        ("table id 0", with_byte(&good, 8, 0)),
        ("table id 4 (values records have no stale key)", with_byte(&good, 8, 4)),
        ("a record key of 39 bytes", good[..48].to_vec()),
        ("a record key of 41 bytes", cat(&[&good, &[0]])),
    ]
    .into_iter()
    .map(|(why, key)| obj(vec![("key", h(&key)), ("code", s("STORE_CORRUPT")), ("why", s(why))]))
    .collect();
    obj(vec![
        ("description", s("Table keys. record_keys: a ref (birth, hash) names the record key u64be(birth) ‖ hash. versions: versions[u64be(version)]. values_keys: the keys of the values records a full chunk record (chunk_key) of a store of capacity may have, one a group g < ⌈C/16⌉: its first 39 bytes ‖ u8(g). stale: u64be(since) ‖ u8(table id: 1 nodes, 2 chunks, 3 entries) ‖ record key (40 bytes); invalid stale keys name no record (no core decoder reads them: the store's TypeScript does).")),
        ("record_keys", record_keys),
        ("versions", versions),
        ("values_keys", values_keys),
        ("stale", obj(vec![("valid", Value::Array(stale_valid)), ("invalid", stale_invalid)])),
    ])
}

/// Capacity 32: 50 entries (keys k000, k002, …) fill two chunks of 25 (two groups each).
fn even_keys() -> impl Iterator<Item = usize> {
    (0..50).map(|i| 2 * i)
}

/// Version 2 over a bulk load of the even keys: a set, an insert and a
/// delete in the first chunk (a delta); seven inserts in the second, too
/// many for a delta (a full record whose kept slots hold their values,
/// kind 1, and whose new ones name entry records, kind 0).
fn version_two() -> (Store, WriteSet) {
    let mut store = Store::bulk_load(32, even_keys());
    store.tree.insert(&key(10), &value(10, 2)).unwrap();
    store.tree.insert(&key(11), &value(11, 2)).unwrap();
    assert!(store.tree.remove(&key(20)));
    for i in (51..65).step_by(2) {
        store.tree.insert(&key(i), &value(i, 2)).unwrap();
    }
    let written = store.commit();
    (store, written)
}

pub fn store_records() -> Value {
    let loaded = Store::bulk_load(32, even_keys());
    let loaded_chunks: Vec<Ref> = loaded.born(Table::Chunks, 1).into_iter().map(|(r, _)| r).collect();
    assert_eq!(loaded_chunks.len(), 2);
    let (c32, written) = version_two();
    // Version 3 sets k010 again: version 2's entry record of it goes stale.
    let (mut c32_v3, _) = version_two();
    c32_v3.tree.insert(&key(10), &value(10, 3)).unwrap();
    let written_v3 = c32_v3.commit();
    // Each version's marks in key order: the listed ones do not depend on the order a commit finds them in.
    let marks = |w: &WriteSet| {
        let mut marks: Vec<_> = w.stale.iter().map(|&(table, r)| (w.version, table, r)).collect();
        marks.sort_by_key(|&(_, table, r)| (table as u8, r.key()));
        marks
    };
    let stale = [marks(&written), marks(&written_v3)].concat();
    let is_delta = |b: &[u8]| matches!(ChunkRecord::decode(b, 32).unwrap(), ChunkRecord::Delta(_));
    let chunks2 = c32.born(Table::Chunks, 2);
    let delta_ref = chunks2.iter().find(|(_, b)| is_delta(b)).expect("a delta").0;
    let mixed_ref = chunks2.iter().find(|(_, b)| !is_delta(b)).expect("a full chunk record").0;
    let (mixed_slots, _) = full(c32.record(Table::Chunks, &mixed_ref), 32);
    assert!(mixed_slots.iter().any(|s| matches!(s.entry, Entry::Held(_))));
    assert!(mixed_slots.iter().any(|s| matches!(s.entry, Entry::Record(_))));
    let mixed_group =
        mixed_slots.chunks(16).position(|g| g.iter().any(|s| matches!(s.entry, Entry::Record(_)))).unwrap();
    // Capacity 32 with 16 entries: one chunk of one group.
    let one_group = Store::bulk_load(32, 0..16);
    let one_group_chunk = one_group.born(Table::Chunks, 1)[0].0;

    let c4 = {
        let mut tree = Tree::new(4).unwrap();
        for i in 0..3 {
            tree.insert(&key(i), &value(i, 1)).unwrap();
        }
        let (_, w) = tree.commit_to_store();
        let records = w.puts.into_iter().map(|(t, r, b)| ((t, r), b)).collect();
        Store::loaded(4, records, w.version_record, 1)
    };
    let c4_chunk = c4.born(Table::Chunks, 1)[0].0;
    let empty = {
        let (_, w) = Tree::new(8).unwrap().commit_to_store();
        Store::loaded(8, Records::new(), w.version_record, 1)
    };
    let c256 = Store::bulk_load(256, 0..250);
    // Capacity 4: 12 entries fill three chunks under two nodes.
    let c4_three = Store::bulk_load(4, 0..12);
    let c256_chunk = c256.born(Table::Chunks, 1)[0].0;

    let versions = version_part(&[
        ("the empty tree (capacity 8)", &empty),
        ("one chunk of 3 (capacity 4): a chunk top", &c4),
        ("a bulk load of 50 at capacity 32: two chunks of 25 under a node", &loaded),
        ("the next version of that load: a commit's set, insert, delete and 7 inserts", &c32),
    ]);
    let full_chunks = full_chunk_part(
        &[
            ("a commit's chunk of 3 at capacity 4: kind-0 slots (entry records), one group", &c4, c4_chunk),
            (
                "a bulk load's chunk of 25 at capacity 32: kind-1 slots, two groups (16 and 9)",
                &loaded,
                loaded_chunks[0],
            ),
            (
                "a commit's rewrite of a chunk of 25 with 7 inserts: the kept slots kind 1, the new ones kind 0",
                &c32,
                mixed_ref,
            ),
            ("a bulk load's chunk of 250 at capacity 256: kind-1 slots, 16 groups", &c256, c256_chunk),
        ],
        (&c32, mixed_ref),
    );
    let values = values_part(&[
        ("group 0 of a bulk load's chunk of 25: 16 values", &loaded, loaded_chunks[0], 0),
        ("group 1 of that chunk: its last 9 slots", &loaded, loaded_chunks[0], 1),
        (
            "a group of a commit's rewrite that also has kind-0 slots: only the kind-1 slots' values",
            &c32,
            mixed_ref,
            mixed_group,
        ),
        ("group 15 of a chunk of 250 at capacity 256: slots 240 … 249", &c256, c256_chunk, 15),
    ]);
    obj(vec![
        ("description", s("The records and keys of a state store (spec/store-format.md), from small stores: bulk loads of capacity 32 (50 entries, keys k000, k002, …) and 256, a commit over the first as version 2, and trees of capacity 4 and 8 committed from nothing. Bytes are hex. Each part has valid cases (the record and its decoded fields: decoding gives them, encoding them gives the record) and invalid cases (one rule broken; code is STORE_CORRUPT, the one code of a stored record that fails a check, spec/store-format.md).")),
        ("spec", s("spec/store-format.md; spec/encoding.md; spec/hashing.md")),
        ("store", store_part().json()),
        ("version", versions.json()),
        ("node", node_part(&[&loaded, &c4_three]).json()),
        ("full_chunk", full_chunks.json()),
        ("chunk_delta", delta_part(&c32, delta_ref, (&one_group, one_group_chunk)).json()),
        ("values", values.json()),
        ("entry", entry_part(&c32, 2).json()),
        ("progress", progress_part().json()),
        ("keys", keys_part(&loaded_chunks[0], &stale)),
    ])
}
