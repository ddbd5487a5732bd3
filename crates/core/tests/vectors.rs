//! Checks every committed test vector in `spec/vectors/` through the public
//! API: valid cases verify with exactly the recorded outputs, invalid cases
//! fail with exactly the recorded code, and every tree in `trees.json`
//! replays to the recorded root, shape and entries (and rebuilds from its
//! chunk envelopes), as does every bulk load of `bulk_load.json`; every
//! store record of `store_records.json` decodes to its recorded fields and
//! encodes back to its bytes.

use std::path::PathBuf;

use bpavl_core::record::{
    decode_entry, decode_store, encode_entry, encode_full, encode_store, full_record_puts, held_value, held_values,
    slot_groups, stale_key, values_ref, values_refs, verify_slots, Child, ChunkRecord, Delta, Edit, Entry, NodeRecord,
    Ref, Slot, Table, VersionRecord,
};
use bpavl_core::{
    verify_absence, verify_chunk, verify_chunk_proof, verify_existence, verify_multiproof, verify_range, AbsenceProof,
    BulkLoad, ChunkEnvelope, ChunkPath, ChunkProof, ExistenceProof, Hash, Multiproof, PathStep, ProofError, RangeProof,
    Rebuilder, StoreError, StoreSync, SyncProgress, Tree,
};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors")
}

fn load(name: &str) -> Value {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap_or_else(|| panic!("expected a hex string, got {v}"))).expect("hex")
}
fn opt_bytes(v: &Value) -> Option<Vec<u8>> {
    if v.is_null() {
        None
    } else {
        Some(bytes(v))
    }
}
fn hash(v: &Value) -> Hash {
    bytes(v).try_into().expect("32-byte hash")
}
fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("expected an integer, got {v}"))
}
fn pairs(v: &Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    v.as_array().expect("array").iter().map(|p| (bytes(&p[0]), bytes(&p[1]))).collect()
}
fn cases<'a>(file: &'a Value, kind: &str) -> &'a [Value] {
    let list = file[kind].as_array().unwrap_or_else(|| panic!("no {kind} array"));
    assert!(!list.is_empty(), "no {kind} cases");
    list
}
fn label(c: &Value) -> String {
    c.get("why")
        .or_else(|| c.get("description"))
        .map(|v| v.to_string())
        .unwrap_or_else(|| c.to_string().chars().take(120).collect())
}

/// Checks that `result` failed with exactly the case's code.
fn expect_code<T: std::fmt::Debug>(c: &Value, result: Result<T, ProofError>) {
    let code = c["code"].as_str().expect("code");
    match result {
        Err(e) => assert_eq!(e.code(), code, "case {}", label(c)),
        Ok(v) => panic!("case {}: expected {code}, verified: {v:?}", label(c)),
    }
}

#[test]
fn every_vector_file_is_checked() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("spec/vectors")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "absence.json",
            "bulk_load.json",
            "catchup.json",
            "chunk_envelope.json",
            "chunk_proof.json",
            "existence.json",
            "multiproof.json",
            "range.json",
            "rebuild.json",
            "store_records.json",
            "trees.json",
            // The wire's byte rules: checked by the TypeScript codec and server
            // (packages/light-client/test/wire-vectors.test.ts); the core has no wire code.
            "wire.json"
        ]
    );
    for n in &names {
        let v = load(n);
        assert!(v["description"].is_string() && v["spec"].is_string(), "{n}: description and spec");
    }
}

#[test]
fn trees_replay_to_the_recorded_roots_and_shapes() {
    let file = load("trees.json");
    let trees = file["trees"].as_array().unwrap();
    assert!(trees.len() >= 5);
    for t in trees {
        let name = t["name"].as_str().unwrap();
        let capacity = num(&t["capacity"]) as usize;
        let mut tree = Tree::new(capacity).unwrap();
        for op in t["ops"].as_array().unwrap() {
            match op[0].as_str().unwrap() {
                "insert" => {
                    tree.insert(&bytes(&op[1]), &bytes(&op[2])).unwrap();
                }
                "remove" => {
                    tree.remove(&bytes(&op[1]));
                }
                other => panic!("{name}: unknown op {other}"),
            }
        }
        let root = tree.commit().root;
        assert_eq!(root, hash(&t["root"]), "{name}: root");
        assert_eq!(tree.chunk_count(), num(&t["chunk_count"]), "{name}: chunks");
        assert_eq!(tree.len(), num(&t["entry_count"]), "{name}: entries");
        assert_eq!(tree.height() as u64, num(&t["height"]), "{name}: height");
        let entries: Vec<_> = tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(entries, pairs(&t["final_entries"]), "{name}: entries");
        let list = t["chunk_list"].as_array().unwrap();
        assert_eq!(list.len() as u64, tree.chunk_count());
        for (i, c) in list.iter().enumerate() {
            assert_eq!(num(&c["index"]), i as u64);
            let env = tree.head().export_chunk(i as u64).unwrap();
            assert_eq!(env.key_height as u64, num(&c["key_height"]), "{name}: chunk {i} key_height");
            assert_eq!(env.entries.len() as u64, num(&c["entry_count"]), "{name}: chunk {i} entries");
        }
        // The chunk envelopes rebuild the same tree, in any order.
        if tree.chunk_count() > 0 {
            let mut rb = Rebuilder::new(root);
            for i in (0..tree.chunk_count()).rev() {
                assert!(rb.add(i, &tree.head().export_chunk_bytes(i).unwrap()).unwrap());
            }
            let rebuilt = rb.finish(1).unwrap();
            assert_eq!(rebuilt.head().root(), root, "{name}: rebuilt root");
            assert_eq!(rebuilt.height(), tree.height(), "{name}: rebuilt height");
        }
    }
}

#[test]
fn existence_vectors() {
    let file = load("existence.json");
    for c in cases(&file, "valid") {
        let (root, key, value, proof) = (hash(&c["root"]), bytes(&c["key"]), bytes(&c["value"]), bytes(&c["proof"]));
        let got =
            verify_existence(&root, &key, &value, &proof).unwrap_or_else(|e| panic!("case {}: {}", label(c), e.code()));
        assert_eq!(got.chunk_index, num(&c["chunk_index"]), "case {}", label(c));
        assert_eq!(got.position as u64, num(&c["position"]), "case {}", label(c));
        assert_eq!(got.chunk_count, num(&c["chunk_count"]), "case {}", label(c));
        assert_eq!(got.entry_count, num(&c["entry_count"]), "case {}", label(c));
        assert_eq!(ExistenceProof::decode(&proof).unwrap().encode(), proof, "canonical: {}", label(c));
    }
    for c in cases(&file, "invalid") {
        let r = verify_existence(&hash(&c["root"]), &bytes(&c["key"]), &bytes(&c["value"]), &bytes(&c["proof"]));
        expect_code(c, r);
    }
}

#[test]
fn absence_vectors() {
    let file = load("absence.json");
    for c in cases(&file, "valid") {
        let (root, key, proof) = (hash(&c["root"]), bytes(&c["key"]), bytes(&c["proof"]));
        verify_absence(&root, &key, &proof).unwrap_or_else(|e| panic!("case {}: {}", label(c), e.code()));
        let decoded = AbsenceProof::decode(&proof).unwrap();
        assert_eq!(decoded.left.as_ref().map(|n| n.key.clone()), opt_bytes(&c["left_key"]), "case {}", label(c));
        assert_eq!(decoded.right.as_ref().map(|n| n.key.clone()), opt_bytes(&c["right_key"]), "case {}", label(c));
        assert_eq!(decoded.encode(), proof, "canonical: {}", label(c));
    }
    for c in cases(&file, "invalid") {
        let r = verify_absence(&hash(&c["root"]), &bytes(&c["key"]), &bytes(&c["proof"]));
        expect_code(c, r);
    }
}

fn key_list(v: &Value) -> Vec<Vec<u8>> {
    v.as_array().expect("a list of keys").iter().map(bytes).collect()
}

#[test]
fn multiproof_vectors() {
    let file = load("multiproof.json");
    for c in cases(&file, "valid") {
        let keys = key_list(&c["keys"]);
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let proof = bytes(&c["proof"]);
        let got = verify_multiproof(&hash(&c["root"]), &keys, &proof)
            .unwrap_or_else(|e| panic!("case {}: {}", label(c), e.code()));
        let want: Vec<Option<Vec<u8>>> = c["values"].as_array().unwrap().iter().map(opt_bytes).collect();
        assert_eq!(got.values, want, "case {}", label(c));
        assert_eq!((got.chunk_count, got.entry_count), (num(&c["chunk_count"]), num(&c["entry_count"])));
        assert_eq!(Multiproof::decode(&proof).unwrap().encode(), proof, "canonical: {}", label(c));
    }
    for c in cases(&file, "invalid") {
        let keys = key_list(&c["keys"]);
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        expect_code(c, verify_multiproof(&hash(&c["root"]), &keys, &bytes(&c["proof"])));
    }
}

type RangeInputs = (Hash, Vec<u8>, Option<Vec<u8>>, usize, Vec<u8>);

fn range_inputs(c: &Value) -> RangeInputs {
    (hash(&c["root"]), bytes(&c["start"]), opt_bytes(&c["end"]), num(&c["limit"]) as usize, bytes(&c["proof"]))
}

#[test]
fn range_vectors() {
    let file = load("range.json");
    for c in cases(&file, "valid") {
        let (root, start, end, limit, proof) = range_inputs(c);
        let got = verify_range(&root, &start, end.as_deref(), limit, &proof)
            .unwrap_or_else(|e| panic!("case {}: {}", label(c), e.code()));
        assert_eq!(got.entries, pairs(&c["results"]), "case {}", label(c));
        assert_eq!(got.complete, c["complete"].as_bool().unwrap(), "case {}", label(c));
        assert_eq!(got.resume_key, opt_bytes(&c["resume_key"]), "case {}", label(c));
        assert_eq!(RangeProof::decode(&proof).unwrap().encode(), proof, "canonical: {}", label(c));
    }
    for c in cases(&file, "invalid") {
        let (root, start, end, limit, proof) = range_inputs(c);
        expect_code(c, verify_range(&root, &start, end.as_deref(), limit, &proof));
    }
}

#[test]
fn chunk_proof_vectors() {
    let file = load("chunk_proof.json");
    for c in cases(&file, "valid") {
        let proof = bytes(&c["proof"]);
        let got =
            verify_chunk_proof(&hash(&c["root"]), &proof).unwrap_or_else(|e| panic!("case {}: {}", label(c), e.code()));
        assert_eq!(got.root, hash(&c["root"]));
        assert_eq!(got.index, num(&c["index"]), "case {}", label(c));
        assert_eq!(got.chunk_count, num(&c["chunk_count"]), "case {}", label(c));
        assert_eq!(got.entry_count, num(&c["entry_count"]), "case {}", label(c));
        assert_eq!(got.key_height as u64, num(&c["key_height"]), "case {}", label(c));
        assert_eq!(ChunkProof::decode(&proof).unwrap().encode(), proof, "canonical: {}", label(c));
    }
    for c in cases(&file, "invalid") {
        expect_code(c, verify_chunk_proof(&hash(&c["root"]), &bytes(&c["proof"])));
    }
}

#[test]
fn chunk_envelope_vectors() {
    let file = load("chunk_envelope.json");
    for c in cases(&file, "valid") {
        let bytes_ = bytes(&c["envelope"]);
        let got = verify_chunk(&hash(&c["root"]), num(&c["index"]), &bytes_)
            .unwrap_or_else(|e| panic!("case {}: {}", label(c), e.code()));
        assert_eq!(got.root(), hash(&c["root"]));
        assert_eq!(got.index(), num(&c["index"]));
        assert_eq!(got.capacity() as u64, num(&c["capacity"]));
        assert_eq!(got.key_height() as u64, num(&c["key_height"]));
        assert_eq!(got.chunk_count(), num(&c["chunk_count"]));
        assert_eq!(got.entry_count(), num(&c["entry_count"]));
        let entries: Vec<_> = got.entries().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(entries, pairs(&c["chunk_entries"]));
        assert_eq!(got.len(), entries.len());
        assert_eq!(ChunkEnvelope::decode(&bytes_).unwrap().encode(), bytes_, "canonical");
    }
    for c in cases(&file, "invalid") {
        let r = verify_chunk(&hash(&c["root"]), num(&c["index"]), &bytes(&c["envelope"]));
        expect_code(c, r.map(|v| v.index()));
    }
}

/// The envelopes of each tree, taken from `chunk_envelope.json`, rebuild a
/// tree with the recorded root, whatever order they arrive in.
#[test]
fn envelopes_rebuild_their_trees() {
    let file = load("chunk_envelope.json");
    type Envelopes = Vec<(u64, Vec<u8>)>;
    let mut by_root: Vec<(Hash, Envelopes)> = Vec::new();
    // Chunks of a tree of trees.json (a made-up chunk has `tree: null`).
    for c in cases(&file, "valid").iter().filter(|c| c["tree"].is_string()) {
        let root = hash(&c["root"]);
        let item = (num(&c["index"]), bytes(&c["envelope"]));
        match by_root.iter_mut().find(|(r, _)| *r == root) {
            Some((_, list)) => list.push(item),
            None => by_root.push((root, vec![item])),
        }
    }
    for (root, mut list) in by_root {
        // An interleaved order: odd indices descending, then even ascending.
        list.sort_by_key(|(i, _)| (i % 2 == 0, if i % 2 == 1 { u64::MAX - i } else { *i }));
        let mut rb = Rebuilder::new(root);
        let n = list.len() as u64;
        for (i, b) in &list {
            rb.add(*i, b).unwrap();
        }
        assert_eq!(rb.chunk_count(), Some(n), "every chunk of the tree is in the file");
        assert_eq!(rb.finish(7).unwrap().head().root(), root);
    }
}

/// Adds a case's envelopes in order: what each add returned, or the
/// position of the add that failed and its code.
fn add_all(rb: &mut Rebuilder, c: &Value) -> Result<Vec<bool>, (usize, &'static str)> {
    let adds = c["adds"].as_array().expect("adds");
    let add = |(i, a): (usize, &Value)| rb.add(num(&a["index"]), &bytes(&a["envelope"])).map_err(|e| (i, e.code()));
    adds.iter().enumerate().map(add).collect()
}

#[test]
fn rebuild_vectors() {
    let file = load("rebuild.json");
    for c in cases(&file, "valid") {
        let root = hash(&c["root"]);
        let mut rb = Rebuilder::new(root);
        let new: Vec<bool> = c["adds"].as_array().unwrap().iter().map(|a| a["new"].as_bool().unwrap()).collect();
        assert_eq!(add_all(&mut rb, c), Ok(new), "case {}", label(c));
        let tree = rb.finish(num(&c["version"])).unwrap_or_else(|e| panic!("case {}: {e:?}", label(c)));
        let got = (tree.head().root(), tree.head().version(), tree.chunk_count(), tree.len());
        assert_eq!(
            got,
            (root, num(&c["version"]), num(&c["chunk_count"]), num(&c["entry_count"])),
            "case {}",
            label(c)
        );
    }
    for c in cases(&file, "invalid") {
        let code = c["code"].as_str().expect("code");
        let mut rb = Rebuilder::new(hash(&c["root"]));
        match (add_all(&mut rb, c), c["at"].as_u64()) {
            (Err((i, got)), Some(at)) => assert_eq!((i as u64, got), (at, code), "case {}", label(c)),
            (Ok(_), None) => match rb.finish(num(&c["version"])) {
                Err(e) => assert_eq!(e.code(), code, "case {}", label(c)),
                Ok(_) => panic!("case {}: finish succeeded, expected {code}", label(c)),
            },
            (got, at) => panic!("case {}: adds gave {got:?}, expected a failure at {at:?}", label(c)),
        }
    }
}

#[test]
fn catchup_vectors() {
    use bpavl_core::{verify_entries, verify_leaves, verify_subtree, TreePath};
    let file = load("catchup.json");
    let path = |c: &Value| TreePath::decode(&bytes(&c["path"])).unwrap();
    let sub = &file["subtree"];
    for c in sub["valid"].as_array().unwrap() {
        let got = verify_subtree(
            &path(c),
            &hash(&c["anchor"]),
            num(&c["levels"]) as u8,
            num(&c["capacity"]) as usize,
            &bytes(&c["answer"]),
        )
        .unwrap();
        assert_eq!(got.capacity as u64, num(&c["capacity_carried"]));
        let want = c["nodes"].as_array().unwrap();
        assert_eq!(got.nodes.len(), want.len());
        for ((p, w, proven), x) in got.nodes.iter().zip(want) {
            assert_eq!(*proven, x["kinds_proven"].as_bool().unwrap());
            assert_eq!(p.to_bytes(), bytes(&x["path"]));
            assert_eq!(
                (w.height as u64, w.chunks, w.entries),
                (num(&x["height"]), num(&x["chunk_count"]), num(&x["entry_count"]))
            );
            assert_eq!(
                (w.left_is_chunk, w.right_is_chunk),
                (x["left_is_chunk"].as_bool().unwrap(), x["right_is_chunk"].as_bool().unwrap())
            );
            assert_eq!((w.left, w.right, w.hash()), (hash(&x["left"]), hash(&x["right"]), hash(&x["hash"])));
            assert_eq!(w.key_copy, bytes(&x["key_copy"]));
        }
    }
    for c in sub["invalid"].as_array().unwrap() {
        expect_code(
            c,
            verify_subtree(
                &path(c),
                &hash(&c["anchor"]),
                num(&c["levels"]) as u8,
                num(&c["capacity"]) as usize,
                &bytes(&c["answer"]),
            ),
        );
    }
    let leaves = &file["leaves"];
    for c in leaves["valid"].as_array().unwrap() {
        let got = verify_leaves(&hash(&c["chunk_hash"]), num(&c["capacity"]) as usize, &bytes(&c["answer"])).unwrap();
        assert_eq!(got, c["leaves"].as_array().unwrap().iter().map(hash).collect::<Vec<_>>());
    }
    for c in leaves["invalid"].as_array().unwrap() {
        expect_code(c, verify_leaves(&hash(&c["chunk_hash"]), num(&c["capacity"]) as usize, &bytes(&c["answer"])));
    }
    let entries = &file["entries"];
    let leaf_list = |c: &Value| c["leaves"].as_array().unwrap().iter().map(hash).collect::<Vec<_>>();
    for c in entries["valid"].as_array().unwrap() {
        let answer = bytes(&c["answer"]);
        let got = verify_entries(&leaf_list(c), &bytes(&c["bitmap"]), &answer).unwrap();
        let want: Vec<(u64, Vec<u8>, Vec<u8>)> =
            c["entries"].as_array().unwrap().iter().map(|e| (num(&e[0]), bytes(&e[1]), bytes(&e[2]))).collect();
        assert_eq!(got.iter().map(|(p, k, v)| (*p as u64, k.to_vec(), v.to_vec())).collect::<Vec<_>>(), want);
    }
    for c in entries["invalid"].as_array().unwrap() {
        let answer = bytes(&c["answer"]);
        expect_code(c, verify_entries(&leaf_list(c), &bytes(&c["bitmap"]), &answer).map(|e| e.len()));
    }
}

#[test]
fn bulk_load_vectors() {
    let file = load("bulk_load.json");
    for c in cases(&file, "valid") {
        let capacity = num(&c["capacity"]) as usize;
        let mut load = BulkLoad::new(capacity, 1).unwrap();
        for (k, v) in pairs(&c["entries"]) {
            load.push(&k, &v).unwrap();
        }
        let (root, finished) = load.finish();
        let record = VersionRecord::decode(&finished.version_record, capacity).unwrap();
        assert_eq!(root, hash(&c["root"]), "{}: root", label(c));
        assert_eq!(
            (record.root, record.chunk_count, record.entry_count),
            (root, num(&c["chunk_count"]), num(&c["entry_count"])),
            "{}",
            label(c)
        );
    }
    for c in cases(&file, "invalid") {
        let code = c["code"].as_str().unwrap();
        let failed = BulkLoad::new(num(&c["capacity"]) as usize, 1).map_err(|e| (None, e)).and_then(|mut load| {
            let entries = pairs(&c["entries"]);
            entries.iter().enumerate().try_for_each(|(i, (k, v))| load.push(k, v).map_err(|e| (Some(i as u64), e)))
        });
        match failed {
            Err((at, e)) => assert_eq!((at, e.code()), (c["at"].as_u64(), code), "case {}", label(c)),
            Ok(()) => panic!("case {}: expected {code}, every push succeeded", label(c)),
        }
    }
}

/// Checks that `result` failed with exactly the case's code (a stored record's).
fn expect_store_code<T: std::fmt::Debug>(c: &Value, result: Result<T, StoreError>) {
    let code = c["code"].as_str().expect("code");
    match result {
        Err(e) => assert_eq!(e.code(), code, "case {}", label(c)),
        Ok(v) => panic!("case {}: expected {code}, decoded: {v:?}", label(c)),
    }
}

fn store_ref(v: &Value) -> Ref {
    let r = Ref { birth: num(&v["birth"]), hash: hash(&v["hash"]) };
    assert_eq!(r.key().to_vec(), bytes(&v["key"]), "a ref's record key is u64be(birth) ‖ hash");
    r
}

fn store_child(v: &Value) -> Child {
    match v["table"].as_str() {
        Some("chunks") => Child::Chunk(store_ref(v)),
        Some("nodes") => Child::Node(store_ref(v)),
        other => panic!("a child's table: {other:?}"),
    }
}

fn store_slot(v: &Value) -> Slot {
    match num(&v["kind"]) {
        0 => Slot::new(&bytes(&v["key"]), store_ref(&v["entry"])),
        1 => Slot::new(&bytes(&v["key"]), Entry::Held(hash(&v["entry_hash"]))),
        kind => panic!("slot kind {kind}"),
    }
}

fn store_slots(v: &Value) -> Vec<Slot> {
    v.as_array().expect("slots").iter().map(store_slot).collect()
}

fn hash_list(v: &Value) -> Vec<Hash> {
    v.as_array().expect("hashes").iter().map(hash).collect()
}

fn full_chunk(record: &[u8], capacity: usize) -> Result<(Vec<Slot>, Vec<Hash>), StoreError> {
    match ChunkRecord::decode(record, capacity)? {
        ChunkRecord::Full { slots, groups } => Ok((slots, groups)),
        ChunkRecord::Delta(_) => Err(StoreError::Corrupt),
    }
}

/// A chunk delta decoded and applied to its base: the delta and the
/// result's slots, checked against the chunk hash.
fn applied_delta(c: &Value) -> Result<(Delta, Vec<Slot>), StoreError> {
    let capacity = num(&c["capacity"]) as usize;
    let (base_slots, base_groups) = full_chunk(&bytes(&c["base_record"]), capacity).expect("a full base");
    let delta = match ChunkRecord::decode(&bytes(&c["record"]), capacity)? {
        ChunkRecord::Delta(d) => d,
        ChunkRecord::Full { .. } => return Err(StoreError::Corrupt),
    };
    let (slots, groups) = delta.apply(&base_slots, &base_groups, capacity)?;
    verify_slots(&slots, &groups, &hash(&c["chunk_hash"]))?;
    Ok((delta, slots))
}

#[test]
fn store_record_vectors() {
    let file = load("store_records.json");
    let part = |name: &str| &file[name];

    for c in cases(part("store"), "valid") {
        let (record, capacity) = (bytes(&c["record"]), num(&c["capacity"]) as usize);
        assert_eq!(decode_store(&record), Ok(capacity), "{}", label(c));
        assert_eq!(record.last().copied(), Some(num(&c["layout"]) as u8), "{}", label(c));
        assert_eq!(encode_store(capacity).unwrap(), record, "{}", label(c));
    }
    for c in cases(part("store"), "invalid") {
        expect_store_code(c, decode_store(&bytes(&c["record"])));
    }

    for c in cases(part("version"), "valid") {
        let record = bytes(&c["record"]);
        let v = VersionRecord::decode(&record, num(&c["capacity"]) as usize).unwrap();
        let top = (!c["top"].is_null()).then(|| store_child(&c["top"]));
        assert_eq!(
            (v.chunk_count, v.entry_count, v.top, v.root),
            (num(&c["chunk_count"]), num(&c["entry_count"]), top, hash(&c["root"])),
            "{}",
            label(c)
        );
        assert_eq!(v.encode(), record, "{}", label(c));
    }
    for c in cases(part("version"), "invalid") {
        expect_store_code(c, VersionRecord::decode(&bytes(&c["record"]), num(&c["capacity"]) as usize));
    }

    for c in cases(part("node"), "valid") {
        let record = bytes(&c["record"]);
        let node = NodeRecord::decode(&record, &hash(&c["hash"])).unwrap();
        let expected = NodeRecord {
            height: num(&c["height"]) as u8,
            chunk_count: num(&c["chunk_count"]),
            entry_count: num(&c["entry_count"]),
            left: store_child(&c["left"]),
            right: store_child(&c["right"]),
            key_copy: bytes(&c["key_copy"]),
        };
        assert_eq!(node, expected, "{}", label(c));
        assert_eq!(Ref::from_key(&bytes(&c["key"])).map(|r| r.hash), Some(hash(&c["hash"])), "{}", label(c));
        assert_eq!(node.encode(), record, "{}", label(c));
    }
    for c in cases(part("node"), "invalid") {
        expect_store_code(c, NodeRecord::decode(&bytes(&c["record"]), &hash(&c["hash"])));
    }

    for c in cases(part("full_chunk"), "valid") {
        let record = bytes(&c["record"]);
        let (slots, groups) = full_chunk(&record, num(&c["capacity"]) as usize).unwrap();
        assert_eq!((&slots, &groups), (&store_slots(&c["slots"]), &hash_list(&c["groups"])), "{}", label(c));
        verify_slots(&slots, &groups, &hash(&c["chunk_hash"])).unwrap();
        assert_eq!(Ref::from_key(&bytes(&c["key"])).map(|r| r.hash), Some(hash(&c["chunk_hash"])), "{}", label(c));
        assert_eq!(encode_full(&slots, &groups), record, "{}", label(c));
    }
    for c in cases(part("full_chunk"), "invalid") {
        let result = full_chunk(&bytes(&c["record"]), num(&c["capacity"]) as usize)
            .and_then(|(slots, groups)| verify_slots(&slots, &groups, &hash(&c["chunk_hash"])));
        expect_store_code(c, result);
    }

    for c in cases(part("chunk_delta"), "valid") {
        let (delta, slots) = applied_delta(c).unwrap();
        let edits: Vec<Edit> = c["edits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let position = num(&e["position"]) as usize;
                match e["op"].as_str().unwrap() {
                    "set" => Edit::Set { position, entry: store_ref(&e["entry"]) },
                    "insert" => Edit::Insert { position, key: bytes(&e["key"]), entry: store_ref(&e["entry"]) },
                    "delete" => Edit::Delete { position },
                    op => panic!("edit op {op}"),
                }
            })
            .collect();
        let changed_groups: Vec<(usize, Hash)> =
            c["changed_groups"].as_array().unwrap().iter().map(|g| (num(&g[0]) as usize, hash(&g[1]))).collect();
        let expected =
            Delta { base: store_ref(&c["base"]), edits, group_count: num(&c["group_count"]) as usize, changed_groups };
        assert_eq!(delta, expected, "{}", label(c));
        assert_eq!(slots, store_slots(&c["slots"]), "{}", label(c));
        assert_eq!(ChunkRecord::Delta(delta).encode(), bytes(&c["record"]), "{}", label(c));
    }
    for c in cases(part("chunk_delta"), "invalid") {
        expect_store_code(c, applied_delta(c));
    }

    for c in cases(part("values"), "valid") {
        let record = bytes(&c["record"]);
        let chunk = Ref::from_key(&bytes(&c["chunk_key"])).expect("a record key");
        assert_eq!(values_ref(&chunk, num(&c["group"]) as usize).key().to_vec(), bytes(&c["key"]), "{}", label(c));
        let listed: Vec<(Vec<u8>, Vec<u8>, Hash)> = c["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (bytes(&v["key"]), bytes(&v["value"]), hash(&v["entry_hash"])))
            .collect();
        let decoded: Vec<(Vec<u8>, Vec<u8>)> =
            held_values(&record).unwrap().into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(decoded, listed.iter().map(|(k, v, _)| (k.clone(), v.clone())).collect::<Vec<_>>());
        for (key, value, entry_hash) in &listed {
            assert_eq!(held_value(&record, key, entry_hash), Ok(value.as_slice()), "{}", label(c));
        }
        // The writer's encoding of these slots' values: the record's bytes
        // do not depend on the group's index.
        let slots: Vec<Slot> = listed.iter().map(|(k, _, h)| Slot::new(k, Entry::Held(*h))).collect();
        let puts = full_record_puts(chunk, &slots, &slot_groups(&slots), |i| &listed[i].1);
        assert_eq!(puts[1].2, record, "{}", label(c));
    }
    for c in cases(part("values"), "invalid") {
        expect_store_code(c, held_value(&bytes(&c["record"]), &bytes(&c["key"]), &hash(&c["entry_hash"])));
    }

    for c in cases(part("entry"), "valid") {
        let (record, value) = (bytes(&c["record"]), bytes(&c["value"]));
        assert_eq!(decode_entry(&record, &hash(&c["entry_hash"]), &bytes(&c["key"])), Ok(value.as_slice()));
        assert_eq!(encode_entry(&value), record, "{}", label(c));
    }
    for c in cases(part("entry"), "invalid") {
        expect_store_code(c, decode_entry(&bytes(&c["record"]), &hash(&c["entry_hash"]), &bytes(&c["key"])));
    }

    // Progress records: the core's one codec (SyncProgress, what StoreSync
    // writes and decodes), then taken back as a new run of the sync does.
    // The meta key (sync ‖ u64be(index)) is the store's TypeScript's.
    for c in cases(part("progress"), "valid") {
        let record = bytes(&c["record"]);
        let (root, version, index) = (hash(&c["root"]), num(&c["version"]), num(&c["index"]));
        let pr = SyncProgress::decode(&record).unwrap();
        let steps: Vec<PathStep> = c["path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|st| PathStep {
                sibling_is_left: st["sibling_is_left"].as_bool().unwrap(),
                parent_height: num(&st["parent_height"]) as u8,
                sibling_chunks: num(&st["sibling_chunks"]),
                sibling_entries: num(&st["sibling_entries"]),
                sibling_hash: hash(&st["sibling_hash"]),
            })
            .collect();
        let expected = SyncProgress {
            capacity: num(&c["capacity"]) as usize,
            key_height: num(&c["key_height"]) as u8,
            entries: num(&c["M"]) as usize,
            hash: hash(&c["chunk_hash"]),
            path: ChunkPath { steps },
        };
        assert_eq!(pr, expected, "{}", label(c));
        assert_eq!(pr.encode(), record, "{}", label(c));
        let folded = pr.path.fold(pr.capacity, pr.entries, pr.hash);
        assert_eq!(
            (folded.root, folded.index, folded.key_height, folded.chunk_count, folded.entry_count),
            (root, index, pr.key_height, num(&c["chunk_count"]), num(&c["entry_count"])),
            "{}",
            label(c)
        );
        let mut sync = StoreSync::new(root, version);
        let chunk_key = sync.chunk_ref(&record).unwrap().map(|r| r.key().to_vec());
        assert_eq!(chunk_key, Some(bytes(&c["chunk_key"])), "{}", label(c));
        sync.restore(index, &record, Some(&bytes(&c["chunk_record"])), None).unwrap();
        assert!(sync.has(index), "{}", label(c));
    }
    for c in cases(part("progress"), "invalid") {
        let record = bytes(&c["record"]);
        let decoded = SyncProgress::decode(&record);
        match c["fails"].as_str().unwrap() {
            "decode" => expect_store_code(c, decoded),
            "restore" => {
                decoded.unwrap_or_else(|e| panic!("case {}: decodes, got {e:?}", label(c)));
                let mut sync = StoreSync::new(hash(&c["root"]), num(&c["version"]));
                let chunk_record = opt_bytes(&c["chunk_record"]);
                expect_store_code(c, sync.restore(num(&c["index"]), &record, chunk_record.as_deref(), None));
            }
            other => panic!("case {}: fails {other}", label(c)),
        }
    }

    let keys = part("keys");
    for r in keys["record_keys"].as_array().unwrap() {
        let at = store_ref(r);
        assert_eq!(Ref::from_key(&at.key()), Some(at));
    }
    for v in keys["versions"].as_array().unwrap() {
        assert_eq!(num(&v["version"]).to_be_bytes().to_vec(), bytes(&v["key"]));
    }
    for c in keys["values_keys"].as_array().unwrap() {
        let chunk = Ref::from_key(&bytes(&c["chunk_key"])).unwrap();
        let got: Vec<Vec<u8>> = values_refs(&chunk, num(&c["capacity"]) as usize).map(|r| r.key().to_vec()).collect();
        let listed: Vec<Vec<u8>> = c["keys"].as_array().unwrap().iter().map(bytes).collect();
        assert_eq!(got, listed, "capacity {}", c["capacity"]);
    }
    // The core writes stale keys and reads none (the store's TypeScript
    // does), so only the valid ones are checked here.
    for c in cases(&keys["stale"], "valid") {
        let table = match c["table"].as_str().unwrap() {
            "nodes" => Table::Nodes,
            "chunks" => Table::Chunks,
            "entries" => Table::Entries,
            t => panic!("a stale key's table {t}"),
        };
        assert_eq!(table as u64, num(&c["table_id"]));
        let record = Ref::from_key(&bytes(&c["record_key"])).unwrap();
        assert_eq!(stale_key(num(&c["since"]), table, &record).to_vec(), bytes(&c["key"]));
    }
}
