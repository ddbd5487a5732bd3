//! Fuzz-style robustness tests for the inputs `tests/fuzz.rs` does not
//! cover: the catch-up answers of peers (`NODES`, `LEAVES`, `ENTRIES` and
//! the subtree answers a resume takes back from `meta`) and the records read
//! back from storage (chunk records full and delta, values, entry, node,
//! version, store and sync progress records), through the decoders and
//! through every consumer that takes them: `CatchUp`, `Loader` (whole and
//! paged), a paged head's writes (`Tree::needed_for`), `Pages`, and
//! `StoreSync` (its restore, and a head's next version).
//!
//! Deterministic (fixed `SplitMix64` seeds), bounded to a few seconds in
//! `--release`. Every call runs under `catch_unwind`; for each input:
//!
//! - nothing panics;
//! - a rejection carries a code of `spec/errors.md`: `STORE_CORRUPT` for a
//!   record (or `VERSION_UNKNOWN`), a Decoding or Verification code for a
//!   peer's answer;
//! - nothing wrong is accepted: a catch-up or a sync fed mutated answers or
//!   records either fails with such a code or commits a version that loads
//!   to exactly the target tree (or that fails to load as `STORE_CORRUPT`:
//!   counted, see `store_corruption_in_a_catch_up`); a load that succeeds
//!   from mutated records gives exactly the stored tree;
//! - a run ends: a consumer that keeps asking for records without
//!   progress (a livelock on corrupt storage) is a failure;
//! - the record decoders make no single allocation above `64 × input + 1 MiB`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bpavl_core::record::{
    decode_entry, decode_store, held_values, ChunkRecord, NodeRecord, Ref, Table, VersionRecord, FORMAT_CHUNK_DELTA,
};
use bpavl_core::{
    verify_chunk, verify_entries, verify_leaves, verify_subtree, CatchUp, Fetch, Loader, ProofError, Snapshot,
    StoreError, StoreSync, Tree, TreePath, WriteSet, FORMAT_SYNC_PROGRESS,
};
use bpavl_testkit::alloc::{alloc_budget, guarded, CountingAlloc};
use bpavl_testkit::codes::{load_codes, Codes};
use bpavl_testkit::guard::Outcome;
use bpavl_testkit::rng::SplitMix64;
use rand::Rng;

mod model_keys;
mod store_kit;
use model_keys::{key, value};
use store_kit::{entries, random_states, Store};

const MAX_BYTES: usize = 8 << 20;

// Allocation tracking (`bpavl_testkit::alloc`), as in `tests/fuzz.rs`.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

// ---------------------------------------------------------------------------
// Mutations.

/// A mutation of `b`: bit flips, byte rewrites, truncations, extensions,
/// varint rewrites (non-canonical, huge, overlong), duplicated and swapped
/// segments, and splices with `other` (another valid record).
fn mutate(rng: &mut SplitMix64, b: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    let rounds = if rng.gen_bool(0.25) { rng.gen_range(2..=4) } else { 1 };
    for _ in 0..rounds {
        let n = v.len();
        match rng.gen_range(0..13) {
            0 if n > 0 => {
                let i = rng.gen_range(0..n);
                v[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if n > 0 => {
                // Mostly near the front, where the counts and lengths are.
                let front = if rng.gen_bool(0.5) { 12 } else { n };
                let i = rng.gen_range(0..n.min(front));
                v[i] = [0x00, 0x01, 0x02, 0x03, 0x7f, 0x80, 0x81, 0xff, 0x09, 0x0a, 0x10, 0x30][rng.gen_range(0..12)];
            }
            2 if n > 0 => {
                let i = rng.gen_range(0..n);
                v[i] = rng.gen();
            }
            3 => {
                let i = rng.gen_range(0..=n);
                let k = rng.gen_range(1..=40);
                let ins: Vec<u8> = (0..k).map(|_| rng.gen()).collect();
                v.splice(i..i, ins);
            }
            4 if n > 0 => {
                let i = rng.gen_range(0..n);
                let k = rng.gen_range(1..=40.min(n - i));
                v.drain(i..i + k);
            }
            5 if n > 0 => {
                v.truncate(rng.gen_range(0..n));
            }
            6 => {
                // Extended: a few bytes, or the record again.
                if rng.gen_bool(0.5) {
                    v.extend((0..rng.gen_range(1..=8)).map(|_| rng.gen::<u8>()));
                } else {
                    v.extend_from_slice(b);
                }
            }
            7 => {
                let i = rng.gen_range(0..=n);
                let run: &[u8] = match rng.gen_range(0..5) {
                    0 => &[0xff, 0xff, 0xff, 0xff, 0x0f],
                    1 => &[0xff; 8],
                    2 => &[0x80, 0x00],
                    3 => &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
                    _ => &[0x81, 0x80, 0x80, 0x80, 0x10],
                };
                if rng.gen_bool(0.5) && i < n {
                    let k = rng.gen_range(1..=3.min(n - i));
                    v.splice(i..i + k, run.iter().copied());
                } else {
                    v.splice(i..i, run.iter().copied());
                }
            }
            8 if n > 2 => {
                // Two segments swapped (fields exchanged).
                let a = rng.gen_range(1..n);
                let la = rng.gen_range(1..=(n - a).min(41));
                let bpos = rng.gen_range(1..n);
                let lb = rng.gen_range(1..=(n - bpos).min(41));
                if a + la <= bpos || bpos + lb <= a {
                    let (x, y) = if a < bpos { ((a, la), (bpos, lb)) } else { ((bpos, lb), (a, la)) };
                    let mut out = v[..x.0].to_vec();
                    out.extend_from_slice(&v[y.0..y.0 + y.1]);
                    out.extend_from_slice(&v[x.0 + x.1..y.0]);
                    out.extend_from_slice(&v[x.0..x.0 + x.1]);
                    out.extend_from_slice(&v[y.0 + y.1..]);
                    v = out;
                }
            }
            9 if n > 0 => {
                let a = rng.gen_range(0..n);
                let e = rng.gen_range(a + 1..=n.min(a + 80));
                let seg = v[a..e].to_vec();
                let at = rng.gen_range(0..=n);
                v.splice(at..at, seg);
            }
            10 => {
                let i = rng.gen_range(0..=n);
                let j = rng.gen_range(0..=other.len());
                v.truncate(i);
                v.extend_from_slice(&other[j..]);
            }
            11 if n > 1 => {
                // The format byte of another record.
                v[0] = [0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0e, 0x0f, 0x00][rng.gen_range(0..10)];
            }
            _ => {
                let i = rng.gen_range(0..=n);
                v.insert(i, rng.gen());
            }
        }
    }
    v
}

/// One decoder's call on one input.
type Check<'a> = Box<dyn FnOnce() -> Result<(), &'static str> + 'a>;

/// A record as a read returns it.
type Read = Option<Vec<u8>>;

fn short_hex(b: &[u8]) -> String {
    if b.len() <= 200 {
        hex::encode(b)
    } else {
        format!("{}…({} bytes)", hex::encode(&b[..200]), b.len())
    }
}

/// Collects failures; panics at the end with the first few.
struct Checker {
    codes: Codes,
    /// The codes of the "Catch-up" table of `spec/errors.md`.
    catch_up: Vec<String>,
    failures: Vec<String>,
    failed: u64,
    calls: u64,
}

impl Checker {
    fn new() -> Checker {
        Checker { codes: load_codes(), catch_up: catch_up_codes(), failures: Vec::new(), failed: 0, calls: 0 }
    }

    fn fail(&mut self, what: &str, input: &[u8], detail: String) {
        self.failed += 1;
        if self.failures.len() < 30 {
            self.failures.push(format!("{what}: {detail}\n    input ({} bytes) = {}", input.len(), short_hex(input)));
        }
    }

    fn store_outcome(&mut self, what: &str, input: &[u8], out: &Outcome) {
        self.calls += 1;
        match out {
            Outcome::Panic(_) => self.fail(what, input, out.describe()),
            Outcome::Err(c) if *c != "STORE_CORRUPT" && *c != "VERSION_UNKNOWN" => {
                self.fail(what, input, format!("{c}: not a store code"))
            }
            Outcome::Err(c) if c.starts_with('<') => self.fail(what, input, c.to_string()),
            _ => {}
        }
    }

    /// A code a catch-up answer may be refused with: Decoding, Verification or Catch-up.
    fn answer_code(&self, c: &str) -> bool {
        self.codes.is_verifier_code(c) || self.catch_up.iter().any(|k| k == c)
    }

    fn proof_outcome(&mut self, what: &str, input: &[u8], out: &Outcome) {
        self.calls += 1;
        match out {
            Outcome::Panic(_) => self.fail(what, input, out.describe()),
            Outcome::Err(c) if c.starts_with('<') => self.fail(what, input, c.to_string()),
            Outcome::Err(c) if !self.answer_code(c) => {
                self.fail(what, input, format!("{c}: not a Decoding, Verification or Catch-up code"))
            }
            _ => {}
        }
    }

    fn finish(self, test: &str) {
        eprintln!("{test}: {} calls", self.calls);
        if !self.failures.is_empty() {
            panic!(
                "{test}: {} failure(s) (first {} shown):\n{}",
                self.failed,
                self.failures.len(),
                self.failures.join("\n")
            );
        }
    }
}

/// The codes of the "Catch-up" table of `spec/errors.md`.
fn catch_up_codes() -> Vec<String> {
    let text = std::fs::read_to_string(bpavl_testkit::codes::spec_dir().join("errors.md")).unwrap();
    let section = text.split("\n## ").find(|s| s.starts_with("Catch-up")).expect("a Catch-up table");
    let codes: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert!(codes.iter().any(|c| c == "NODE_MISMATCH"), "errors.md parse: {codes:?}");
    codes
}

fn code_of(e: StoreError) -> &'static str {
    e.code()
}

// ---------------------------------------------------------------------------
// Stores.

/// The scenarios: capacity, base writes, changes, bulk.
const SCENARIOS: [(usize, usize, usize, bool); 8] = [
    (2, 40, 10, false),
    (3, 120, 30, false),
    (4, 200, 40, true),
    (16, 300, 20, false),
    (64, 400, 6, false),
    (64, 300, 40, true),
    (4, 1, 3, false),
    (16, 150, 150, false),
];

fn head_version(store: &Store) -> u64 {
    *store.version_numbers().last().unwrap()
}

/// Every record of `store`: (table, key, bytes); version records as table 0.
fn all_records(store: &Store) -> Vec<(u8, Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(u8, Vec<u8>, Vec<u8>)> = store.versions.iter().map(|(k, v)| (0, k.clone(), v.clone())).collect();
    for (t, recs) in &store.records {
        out.extend(recs.iter().map(|(k, v)| (*t, k.clone(), v.clone())));
    }
    out
}

// ---------------------------------------------------------------------------
// 1. The record and answer decoders, alone.

#[test]
fn store_records_and_catch_up_answers_decode_without_panics() {
    let t = Instant::now();
    let mut rng = SplitMix64::new(0x5707_0001);
    let mut ck = Checker::new();
    let mut inputs = 0u64;
    for (si, &(capacity, n, changes, bulk)) in SCENARIOS.iter().enumerate() {
        let (mut store, _, target) = random_states(&mut rng, capacity, n, changes, bulk);
        // A version written as deltas of the first (capacity 64 makes small deltas).
        let v = head_version(&store);
        let mut next = store.load(v, capacity).unwrap();
        for k in 0..3u16 {
            next.insert(&key(k * 7), &value(k, 9)).unwrap();
        }
        let (_, ws) = next.commit_to_store();
        store.write(&ws);
        // Sync progress records.
        let root = target.head().root();
        let mut sync = StoreSync::new(root, 1);
        let mut progress = Vec::new();
        for i in 0..target.chunk_count() {
            let c = verify_chunk(&root, i, &target.head().export_chunk_bytes(i).unwrap()).unwrap();
            progress.push(sync.add(c).unwrap().unwrap().progress);
        }
        // Catch-up answers of the target.
        let snap = target.head();
        let mut answers: Vec<(u8, TreePath, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut todo = vec![TreePath::top()];
        while let Some(p) = todo.pop() {
            if let Ok(b) = snap.export_subtree(&p, 3, MAX_BYTES) {
                answers.push((0, p.clone(), vec![], b));
                todo.extend([p.child(false), p.child(true)]);
            } else if let Ok(l) = snap.export_leaves(&p) {
                let m = (l.len() - 1 - usize::from(capacity > 127)) / 32;
                let bitmap = bpavl_core::positions_bitmap(&(0..m).step_by(2).collect::<Vec<_>>(), m);
                answers.push((2, p.clone(), bitmap.clone(), snap.export_entries(&p, &bitmap, MAX_BYTES).unwrap()));
                answers.push((1, p.clone(), vec![], l));
            }
        }
        let records = all_records(&store);
        let mut corpus: Vec<(u8, Vec<u8>, Vec<u8>)> = records.clone();
        corpus.extend(progress.iter().map(|p| (9, vec![], p.clone())));
        let versions: Vec<Vec<u8>> = store.versions.values().cloned().collect();
        for (ri, (table, rkey, bytes)) in corpus.iter().enumerate() {
            let per = if ri % 3 == 0 { 24 } else { 6 };
            for m in 0..per {
                let other = &corpus[rng.gen_range(0..corpus.len())].2;
                let input = if m == 0 { bytes.clone() } else { mutate(&mut rng, bytes, other) };
                inputs += 1;
                let r = Ref::from_key(rkey);
                // Every store decoder gets every input.
                let checks: [(&str, Check); 7] = [
                    (
                        "ChunkRecord::decode",
                        Box::new(|| ChunkRecord::decode(&input, capacity).map(|_| ()).map_err(code_of)),
                    ),
                    (
                        "VersionRecord::decode",
                        Box::new(|| VersionRecord::decode(&input, capacity).map(|_| ()).map_err(code_of)),
                    ),
                    (
                        "NodeRecord::decode",
                        Box::new(|| {
                            NodeRecord::decode(&input, &r.map_or([0; 32], |r| r.hash)).map(|_| ()).map_err(code_of)
                        }),
                    ),
                    ("held_values", Box::new(|| held_values(&input).map(|_| ()).map_err(code_of))),
                    (
                        "decode_entry",
                        Box::new(|| {
                            decode_entry(&input, &r.map_or([0; 32], |r| r.hash), b"k").map(|_| ()).map_err(code_of)
                        }),
                    ),
                    ("decode_store", Box::new(|| decode_store(&input).map(|_| ()).map_err(code_of))),
                    ("SyncProgress::decode", Box::new(|| sync.chunk_ref(&input).map(|_| ()).map_err(code_of))),
                ];
                for (what, f) in checks {
                    let (out, largest) = guarded(f);
                    ck.store_outcome(what, &input, &out);
                    if largest > alloc_budget(input.len()) {
                        ck.fail(what, &input, format!("largest allocation {largest} B"));
                    }
                }
                // A mutated record that still decodes must not verify to its ref, except by chance
                // of a field the hash does not cover (a node's key copy).
                if m > 0 && *table == Table::Nodes as u8 {
                    if let (Outcome::Ok, _) =
                        guarded(|| NodeRecord::decode(&input, &r.unwrap().hash).map(|_| ()).map_err(code_of))
                    {
                        let a = NodeRecord::decode(&input, &r.unwrap().hash).unwrap();
                        let b = NodeRecord::decode(bytes, &r.unwrap().hash).unwrap();
                        // The children's births and the key copy are not hashed (a load finds them out).
                        if a.hash() != b.hash() {
                            ck.fail("NodeRecord::decode", &input, "a mutated node record verified".into());
                        }
                    }
                }
                if m > 0 && *table == 0 {
                    // Any version record that decodes is self-consistent; a loader must cope.
                    let (out, _) = guarded(|| {
                        let l = Loader::new(1, &input, capacity).map_err(code_of)?;
                        drop(l);
                        Ok(())
                    });
                    ck.store_outcome("Loader::new", &input, &out);
                }
            }
        }
        let _ = versions;
        // Catch-up answers through the stateless verifiers.
        let codes_for: Vec<(u8, TreePath, Vec<u8>, Vec<u8>)> = answers.clone();
        for (kind, p, bitmap, bytes) in &codes_for {
            for m in 0..12 {
                let other = &codes_for[rng.gen_range(0..codes_for.len())].3;
                let input = if m == 0 { bytes.clone() } else { mutate(&mut rng, bytes, other) };
                inputs += 1;
                let anchor = [7u8; 32];
                let levels = [0u8, 1, 3, 48, 255][rng.gen_range(0..5)];
                let (out, largest) =
                    guarded(|| verify_subtree(p, &anchor, levels, capacity, &input).map(|_| ()).map_err(|e| e.code()));
                ck.proof_outcome("verify_subtree", &input, &out);
                if largest > alloc_budget(input.len()) {
                    ck.fail("verify_subtree", &input, format!("largest allocation {largest} B"));
                }
                let (out, _) = guarded(|| verify_leaves(&anchor, capacity, &input).map(|_| ()).map_err(|e| e.code()));
                ck.proof_outcome("verify_leaves", &input, &out);
                let leaves: Vec<[u8; 32]> = (0..capacity.min(20)).map(|i| [i as u8; 32]).collect();
                let bm = if *kind == 2 { bitmap.clone() } else { mutate(&mut rng, &[0x55, 0x01], &[]) };
                let (out, _) = guarded(|| verify_entries(&leaves, &bm, &input).map(|_| ()).map_err(|e| e.code()));
                ck.proof_outcome("verify_entries", &input, &out);
                let (out, _) = guarded(|| TreePath::decode(&input).map(|_| ()).map_err(|e| e.code()));
                ck.proof_outcome("TreePath::decode", &input, &out);
            }
        }
        eprintln!("scenario {si}: {} records, {} answers", corpus.len(), answers.len());
    }
    eprintln!("store_records_and_catch_up_answers_decode_without_panics: {inputs} inputs in {:?}", t.elapsed());
    ck.finish("store_records_and_catch_up_answers_decode_without_panics");
}

// ---------------------------------------------------------------------------
// 2. A catch-up fed lying answers.

/// The honest answer to `f` from `snap`: (bytes, the bitmap for ENTRIES), or a chunk for a one-chunk tree.
fn honest(snap: &Snapshot, f: &Fetch, levels: u8) -> Option<Vec<u8>> {
    match f {
        Fetch::Nodes(p) => snap.export_subtree(p, levels, MAX_BYTES).ok(),
        Fetch::Leaves(p) => Some(snap.export_leaves(p).unwrap()),
        Fetch::Entries(p, bitmap) => Some(snap.export_entries(p, bitmap, MAX_BYTES).unwrap()),
    }
}

/// Answers `f` as an honest peer of `snap` would. `false` when the honest
/// peer has no answer: the catch-up asks for a piece that is not in the
/// target tree (a node where a chunk is, or leaves where a node is), which
/// only an accepted lie about a child's kind could cause (the `kinds` bits
/// of a `NODES` answer are not hashed: `lies_about_a_childs_kind_are_refused_or_asked_again`).
fn answer_honestly(cu: &mut CatchUp, snap: &Snapshot, f: &Fetch, levels: u8) -> bool {
    let answer = match f {
        Fetch::Nodes(p) => snap.export_subtree(p, levels, MAX_BYTES).ok(),
        Fetch::Leaves(p) => snap.export_leaves(p).ok(),
        Fetch::Entries(p, bitmap) => snap.export_entries(p, bitmap, MAX_BYTES).ok(),
    };
    match (answer, f) {
        (Some(b), _) => {
            add(cu, f, levels, &b, 1).unwrap();
            true
        }
        (None, Fetch::Nodes(p)) if p.depth() == 0 => {
            let root = snap.root();
            cu.add_top_chunk(verify_chunk(&root, 0, &snap.export_chunk_bytes(0).unwrap()).unwrap())
        }
        _ => false,
    }
}

fn add(cu: &mut CatchUp, f: &Fetch, levels: u8, bytes: &[u8], tag: u32) -> Result<(), ProofError> {
    match f {
        Fetch::Nodes(p) => cu.add_subtree(p, levels, bytes, tag),
        Fetch::Leaves(p) => cu.add_leaves(p, bytes),
        Fetch::Entries(p, bitmap) => cu.add_entries(p, bitmap, bytes),
    }
}

/// Hands `store`'s records to the catch-up until it needs none. `Err` with
/// the code of the first refusal; `Err("<livelock>")` if it keeps asking.
fn feed(cu: &mut CatchUp, get: &mut impl FnMut(Table, &Ref) -> Option<Vec<u8>>) -> Result<(), &'static str> {
    for _ in 0..2_000 {
        let needed = cu.needed().map_err(code_of)?;
        if needed.is_empty() {
            return Ok(());
        }
        for (t, r) in needed {
            cu.supply_record(&r, get(t, &r).as_deref()).map_err(code_of)?;
        }
    }
    Err("<livelock: the catch-up keeps asking for records>")
}

/// Runs a catch-up of `store`'s head to `target` to its end: `answer`
/// answers each fetch, `get` reads the store. Returns the write set, or
/// the code of the first refusal of a store read.
fn run_catch_up(
    store: &mut Store,
    cu: &mut CatchUp,
    get: &mut impl FnMut(&Store, Table, &Ref) -> Option<Vec<u8>>,
    mut answer: impl FnMut(&mut CatchUp, &Fetch) -> bool,
) -> Result<(), &'static str> {
    for _ in 0..2_000 {
        feed(cu, &mut |t, r| get(store, t, r))?;
        for (t, r, bytes) in cu.take_puts() {
            store.table(t).insert(r.key().to_vec(), bytes);
        }
        if cu.is_fetched() && cu.needed().map_err(code_of)?.is_empty() {
            return Ok(());
        }
        let fetches = cu.fetches(usize::MAX);
        if fetches.is_empty() {
            return Err("<stall: nothing to fetch, nothing to read, not fetched>");
        }
        for f in fetches {
            if !answer(cu, &f) {
                return Err(STUCK);
            }
        }
    }
    Err("<livelock: the catch-up never ends>")
}

/// What `run_catch_up` returns when the catch-up asks for a piece the
/// target tree does not have (see `answer_honestly`).
const STUCK: &str = "<stuck: asks for a piece that is not in the target tree>";

/// The committed catch-up loads to exactly `target` (or, when `corrupt_ok`,
/// fails to load as `STORE_CORRUPT`). `Err` describes a wrong acceptance.
fn check_committed(store: &mut Store, ws: &WriteSet, capacity: usize, target: &Tree) -> Result<bool, String> {
    store.write(ws);
    match store.load(ws.version, capacity) {
        Ok(t) if t.head().root() == target.head().root() && entries(&t) == entries(target) => Ok(true),
        Ok(_) => Err("the committed version loads to another tree".into()),
        Err(StoreError::Corrupt) => Ok(false),
        Err(e) => Err(format!("load: {e:?}")),
    }
}

#[test]
fn lying_catch_up_answers_are_refused_or_harmless() {
    let t = Instant::now();
    let mut rng = SplitMix64::new(0x5707_0002);
    let mut ck = Checker::new();
    let (mut lies, mut accepted) = (0u64, 0u64);
    for round in 0..60u64 {
        let (capacity, n, changes, bulk) = SCENARIOS[round as usize % SCENARIOS.len()];
        let (mut store, _, target) = random_states(&mut rng, capacity, n, changes, bulk);
        let v = head_version(&store);
        let head = store.load_as(v, capacity, round % 2 == 0).unwrap();
        // At least 2: a node whose kinds its inner child proves is asked again, and comes with it.
        let levels = [2u8, 3, 4, 48][round as usize % 4];
        let snap = target.head();
        let mut cu = CatchUp::new(&head, snap.root()).unwrap();
        let mut last: HashMap<u8, Vec<u8>> = HashMap::new();
        let mut failures = Vec::new();
        let result = run_catch_up(&mut store, &mut cu, &mut |s, t, r| s.get(t, r).map(<[u8]>::to_vec), |cu, f| {
            let Some(good) = honest(snap, f, levels) else {
                return answer_honestly(cu, snap, f, levels);
            };
            let kind = match f {
                Fetch::Nodes(_) => 0,
                Fetch::Leaves(_) => 1,
                Fetch::Entries(..) => 2,
            };
            let other = last.get(&((kind + 1) % 3)).cloned().unwrap_or_default();
            for _ in 0..[6, 2, 1][kind as usize] {
                let lie = mutate(&mut rng, &good, &other);
                if lie == good {
                    continue;
                }
                lies += 1;
                // Sometimes the lie answers another request (its path, its levels).
                let (g, lvl) = match rng.gen_range(0..6) {
                    0 => (Fetch::Nodes(TreePath::top().child(rng.gen())), levels),
                    1 => (f.clone(), rng.gen()),
                    _ => (f.clone(), levels),
                };
                let (out, _) = guarded(|| add(cu, &g, lvl, &lie, 7).map_err(|e| e.code()));
                if let Outcome::Ok = out {
                    accepted += 1;
                }
                match &out {
                    Outcome::Panic(_) => failures.push((format!("add {g:?} levels {lvl}"), lie, out.describe())),
                    Outcome::Err(c) if !ck.answer_code(c) => {
                        failures.push((format!("add {g:?}"), lie, format!("{c}: not a spec code")))
                    }
                    _ => {}
                }
            }
            last.insert(kind, good.clone());
            add(cu, f, levels, &good, 1).unwrap();
            true
        });
        for (what, input, detail) in failures {
            ck.fail(&what, &input, detail);
        }
        ck.calls += lies;
        match result {
            Ok(()) => match cu.finish() {
                Ok((ws, liars)) => {
                    if liars.iter().any(|&s| s != 7) {
                        ck.fail("finish", &[], format!("round {round}: honest peer blamed: {liars:?}"));
                    }
                    match check_committed(&mut store, &ws, capacity, &target) {
                        Ok(true) => {}
                        Ok(false) => ck.fail("finish", &[], format!("round {round}: committed version is corrupt")),
                        Err(e) => ck.fail("finish", &[], format!("round {round}: {e}")),
                    }
                }
                Err(e) => ck.fail("finish", &[], format!("round {round}: {e:?}")),
            },
            Err(e) => ck.fail("catch-up", &[], format!("round {round}: {e}")),
        }
    }
    eprintln!(
        "lying_catch_up_answers_are_refused_or_harmless: {lies} lies ({accepted} accepted), in {:?}",
        t.elapsed()
    );
    ck.finish("lying_catch_up_answers_are_refused_or_harmless");
}

/// A resume takes kept subtree answers from `meta`: mutated ones are refused
/// with a code or taken only if they check, and the resumed catch-up ends
/// with the target.
#[test]
fn corrupt_kept_subtrees_are_refused_or_harmless() {
    let mut rng = SplitMix64::new(0x5707_0003);
    let mut ck = Checker::new();
    for round in 0..16u64 {
        let (capacity, n, changes, bulk) = SCENARIOS[round as usize % SCENARIOS.len()];
        let (mut store, _, target) = random_states(&mut rng, capacity, n, changes, bulk);
        let v = head_version(&store);
        let head = store.load_as(v, capacity, true).unwrap();
        let snap = target.head();
        let levels = [2u8, 3, 48][round as usize % 3];
        let mut first = CatchUp::new(&head, snap.root()).unwrap();
        let mut kept = Vec::new();
        let _ = run_catch_up(&mut store, &mut first, &mut |s, t, r| s.get(t, r).map(<[u8]>::to_vec), |cu, f| {
            answer_honestly(cu, snap, f, levels)
        });
        kept.extend(first.take_progress());
        let mut cu = CatchUp::resume(&head, snap.root()).unwrap();
        kept.sort_by(|a, b| (a.0.depth(), &a.0).cmp(&(b.0.depth(), &b.0)));
        for (p, lv, answer) in &kept {
            for _ in 0..4 {
                let bad = mutate(&mut rng, answer, &[]);
                let lvl = if rng.gen_bool(0.2) { rng.gen() } else { *lv };
                let (out, _) = guarded(|| cu.restore_subtree(p, lvl, &bad).map_err(|e| e.code()));
                ck.proof_outcome("restore_subtree", &bad, &out);
            }
            let _ = cu.restore_subtree(p, *lv, answer);
        }
        let result = run_catch_up(&mut store, &mut cu, &mut |s, t, r| s.get(t, r).map(<[u8]>::to_vec), |cu, f| {
            answer_honestly(cu, snap, f, levels)
        });
        match result.map_err(String::from).and_then(|()| cu.finish().map_err(|e| format!("{e:?}"))) {
            Ok((ws, _)) => match check_committed(&mut store, &ws, capacity, &target) {
                Ok(true) => {}
                other => ck.fail("resume", &[], format!("round {round}: {other:?}")),
            },
            Err(e) => ck.fail("resume", &[], format!("round {round}: {e}")),
        }
    }
    ck.finish("corrupt_kept_subtrees_are_refused_or_harmless");
}

// ---------------------------------------------------------------------------
// 3. Storage that lies: a catch-up, loads, a paged head, a sync's restore and
// a head's next version reading mutated records.

/// How a store read is corrupted: each record read is mutated with
/// probability `p` (the same bytes on every read, as a disk would), dropped,
/// or replaced by another record of its table.
struct Corrupter {
    rng: RefCell<SplitMix64>,
    p: f64,
    /// What each record read gave, by (table, key): the same bytes on every read.
    done: RefCell<HashMap<(u8, Vec<u8>), Read>>,
    hits: Cell<u64>,
}

impl Corrupter {
    fn new(seed: u64, p: f64) -> Corrupter {
        Corrupter { rng: RefCell::new(SplitMix64::new(seed)), p, done: RefCell::default(), hits: Cell::new(0) }
    }

    fn read(&self, store: &Store, t: Table, r: &Ref) -> Option<Vec<u8>> {
        let honest = store.get(t, r).map(<[u8]>::to_vec);
        let k = (t as u8, r.key().to_vec());
        if let Some(v) = self.done.borrow().get(&k) {
            return v.clone();
        }
        let mut rng = self.rng.borrow_mut();
        let out = match honest {
            Some(b) if rng.gen_bool(self.p) => {
                self.hits.set(self.hits.get() + 1);
                let others: Vec<&Vec<u8>> =
                    store.records.get(&(t as u8)).map(|m| m.values().collect()).unwrap_or_default();
                let other = others[rng.gen_range(0..others.len())].clone();
                match rng.gen_range(0..12) {
                    0 => None,
                    1 => Some(other),
                    2 => Some(self_based_delta(r, &b)),
                    _ => Some(mutate(&mut rng, &b, &other)),
                }
            }
            h => h,
        };
        self.done.borrow_mut().insert(k, out.clone());
        out
    }
}

/// A delta record naming `at` itself as its base (a cycle), edits none.
fn self_based_delta(at: &Ref, _b: &[u8]) -> Vec<u8> {
    let mut out = vec![FORMAT_CHUNK_DELTA];
    bpavl_testkit::fields::varint(at.birth).iter().for_each(|&x| out.push(x));
    out.extend_from_slice(&at.hash);
    out.extend_from_slice(&[1, 2, 0, 1, 0]); // one edit: delete position 0; 1 group, none changed
    out
}

#[test]
fn store_corruption_in_a_catch_up() {
    let t = Instant::now();
    let mut rng = SplitMix64::new(0x5707_0004);
    let mut ck = Checker::new();
    let (mut refused, mut finished, mut corrupt_versions, mut runs) = (0, 0, 0, 0);
    for round in 0..240u64 {
        let (capacity, n, changes, bulk) = SCENARIOS[round as usize % SCENARIOS.len()];
        let (store0, _, target) = random_states(&mut rng, capacity, n, changes, bulk);
        let v = head_version(&store0);
        let head = store0.load_as(v, capacity, round % 2 == 0).unwrap();
        let snap = target.head();
        let levels = [2u8, 48][round as usize % 2];
        let corrupter = Corrupter::new(rng.gen(), [0.1, 0.3, 0.7][round as usize % 3]);
        let mut store = store0.clone();
        let mut cu = CatchUp::new(&head, snap.root()).unwrap();
        runs += 1;
        let (out, _) = guarded(|| {
            run_catch_up(&mut store, &mut cu, &mut |s, t, r| corrupter.read(s, t, r), |cu, f| {
                answer_honestly(cu, snap, f, levels)
            })
        });
        match out {
            Outcome::Err("STORE_CORRUPT") => refused += 1,
            Outcome::Panic(_) | Outcome::Err(_) => {
                ck.fail("catch-up over corrupt reads", &[], format!("round {round}: {}", out.describe()))
            }
            Outcome::Ok => {
                let (fin, _) = guarded(|| {
                    let (ws, _) = cu.finish().map_err(code_of)?;
                    match check_committed(&mut store, &ws, capacity, &target) {
                        Ok(true) => Ok(()),
                        Ok(false) => Err("<corrupt version>"),
                        Err(_) => Err("<WRONG: the committed version loads to another tree>"),
                    }
                });
                match fin {
                    Outcome::Ok => finished += 1,
                    Outcome::Err("STORE_CORRUPT") => refused += 1,
                    Outcome::Err("<corrupt version>") => corrupt_versions += 1,
                    other => ck.fail("catch-up finish", &[], format!("round {round}: {}", other.describe())),
                }
            }
        }
        ck.calls += corrupter.hits.get();
    }
    eprintln!(
        "store_corruption_in_a_catch_up: {runs} runs: {refused} refused, {finished} finished, \
         {corrupt_versions} committed a version that does not load, in {:?}",
        t.elapsed()
    );
    ck.finish("store_corruption_in_a_catch_up");
}

/// Loads (whole and paged) and a paged head's writes over corrupt reads:
/// `STORE_CORRUPT` or exactly the stored tree.
#[test]
fn store_corruption_in_loads_and_paged_writes() {
    let t = Instant::now();
    let mut rng = SplitMix64::new(0x5707_0005);
    let mut ck = Checker::new();
    let mut runs = 0u64;
    for round in 0..480u64 {
        let (capacity, n, changes, bulk) = SCENARIOS[round as usize % SCENARIOS.len()];
        let (store, tree, _) = random_states(&mut rng, capacity, n / 2 + 1, changes, bulk);
        let v = head_version(&store);
        let want = entries(&tree);
        let corrupter = Corrupter::new(rng.gen(), [0.1, 0.4][round as usize % 2]);
        let paged = round % 2 == 1;
        runs += 1;
        let (out, _) = guarded(|| {
            let record = store.versions.get(&store_kit::be(v)).unwrap();
            let mut loader = if paged { Loader::head(v, record, capacity) } else { Loader::new(v, record, capacity) }
                .map_err(code_of)?;
            let mut rounds = 0;
            loop {
                rounds += 1;
                if rounds > 300 {
                    return Err("<livelock: the load never ends>");
                }
                let wanted = loader.wanted();
                if wanted.is_empty() {
                    break;
                }
                for (t, r) in wanted {
                    loader.supply(t, &r, corrupter.read(&store, t, &r).as_deref()).map_err(code_of)?;
                }
            }
            let mut head = loader.finish().map_err(code_of)?;
            if !paged {
                return if entries(&head) == want { Ok(()) } else { Err("<WRONG: loaded another tree>") };
            }
            // Writes to the paged head: each loads the chunks it needs.
            for i in 0..6u16 {
                let k = key(rng.gen_range(0..(2 * n as u16).max(4)));
                let removing = i % 3 == 0;
                for step in 0.. {
                    if step == 40 {
                        return Err("<livelock: needed_for keeps asking>");
                    }
                    let needed = head.needed_for(&k, removing).map_err(code_of)?;
                    if needed.is_empty() {
                        break;
                    }
                    for (t, r) in needed {
                        head.supply_record(t, &r, corrupter.read(&store, t, &r).as_deref()).map_err(code_of)?;
                    }
                }
                if removing {
                    head.remove(&k);
                } else {
                    head.insert(&k, b"new").map_err(|e| e.code())?;
                }
            }
            let unconfirmed = head.unconfirmed();
            for (t, r) in unconfirmed {
                head.supply_record(t, &r, corrupter.read(&store, t, &r).as_deref()).map_err(code_of)?;
            }
            let _ = head.commit_to_store();
            Ok(())
        });
        match &out {
            Outcome::Ok | Outcome::Err("STORE_CORRUPT") => {}
            _ => ck.fail("load over corrupt reads", &[], format!("round {round} paged {paged}: {}", out.describe())),
        }
        ck.calls += corrupter.hits.get();
    }
    eprintln!("store_corruption_in_loads_and_paged_writes: {runs} runs in {:?}", t.elapsed());
    ck.finish("store_corruption_in_loads_and_paged_writes");
}

/// A sync into a store resumed from corrupt progress and chunk records, and
/// a sync as a head's next version reading corrupt head records.
#[test]
fn store_corruption_in_store_syncs() {
    let t = Instant::now();
    let mut rng = SplitMix64::new(0x5707_0006);
    let mut ck = Checker::new();
    let (mut restores, mut runs) = (0u64, 0u64);
    for round in 0..48u64 {
        let (capacity, n, changes, bulk) = SCENARIOS[round as usize % SCENARIOS.len()];
        let (store0, head_tree, target) = random_states(&mut rng, capacity, n, changes, bulk);
        if target.chunk_count() == 0 {
            continue; // nothing to sync
        }
        let snap = target.head();
        let root = snap.root();
        let chunks: Vec<_> = (0..target.chunk_count())
            .map(|i| verify_chunk(&root, i, &snap.export_chunk_bytes(i).unwrap()).unwrap())
            .collect();

        // A fresh sync's writes, then a resume from mutated progress and chunk records.
        let mut store = Store::default();
        let mut sync = StoreSync::new(root, 1);
        let mut progress = BTreeMap::new();
        for c in &chunks {
            let w = sync.add(c.clone()).unwrap().unwrap();
            store.write(&WriteSet { version: 1, puts: w.puts, ..WriteSet::default() });
            progress.insert(w.index, w.progress);
        }
        let mut resumed = StoreSync::new(root, 1);
        let all_progress: Vec<Vec<u8>> = progress.values().cloned().collect();
        for (&i, p) in &progress {
            for m in 0..4 {
                let other = &all_progress[rng.gen_range(0..all_progress.len())];
                let p2 = if m == 0 { p.clone() } else { mutate(&mut rng, p, other) };
                let (out, _) = guarded(|| {
                    let r = resumed.chunk_ref(&p2).map_err(code_of)?;
                    let rec = r.and_then(|r| store.get(Table::Chunks, &r)).map(|b| {
                        if rng.gen_bool(0.5) {
                            mutate(&mut rng, b, p)
                        } else {
                            b.to_vec()
                        }
                    });
                    let idx = if rng.gen_bool(0.9) { i } else { rng.gen_range(0..chunks.len() as u64 + 2) };
                    resumed.restore(idx, &p2, rec.as_deref(), None).map_err(code_of)
                });
                restores += 1;
                ck.store_outcome("StoreSync::restore", &p2, &out);
            }
        }
        // Whatever it took back, the rest comes from peers and the finish gives the root.
        let (out, _) = guarded(|| {
            for c in &chunks {
                resumed.add(c.clone()).map_err(|e| e.code())?;
            }
            let ws = resumed.finish().map_err(|e| e.code())?;
            let _ = ws;
            Ok(())
        });
        match out {
            Outcome::Ok => {}
            other => ck.fail("StoreSync after restores", &[], format!("round {round}: {}", other.describe())),
        }

        // A sync as the head's next version, over corrupt head records.
        let v = head_version(&store0);
        let head = store0.load_as(v, capacity, round % 2 == 0).unwrap();
        let first = entries(&head_tree).into_keys().next();
        let corrupter = Corrupter::new(rng.gen(), [0.1, 0.4][round as usize % 2]);
        let mut store = store0.clone();
        runs += 1;
        let (out, _) = guarded(|| {
            let mut sync = StoreSync::next(&head, root, first.as_deref()).unwrap();
            let mut steps = 0;
            for c in &chunks {
                sync.add(c.clone()).map_err(|e| e.code())?;
                loop {
                    steps += 1;
                    if steps > 20_000 {
                        return Err("<livelock: the reads never end>");
                    }
                    for w in sync.take_ready() {
                        store.write(&WriteSet { version: v + 1, puts: w.puts, ..WriteSet::default() });
                    }
                    let needed = sync.needed();
                    if needed.is_empty() {
                        break;
                    }
                    for (t, r) in needed {
                        sync.supply(&r, corrupter.read(&store, t, &r).as_deref()).map_err(code_of)?;
                    }
                }
            }
            for w in sync.take_ready() {
                store.write(&WriteSet { version: v + 1, puts: w.puts, ..WriteSet::default() });
            }
            for _ in 0.. {
                steps += 1;
                if steps > 20_000 {
                    return Err("<livelock: the stale reads never end>");
                }
                let needed = sync.stale_needed();
                if needed.is_empty() {
                    break;
                }
                for (t, r) in needed {
                    sync.stale_supply(&r, corrupter.read(&store, t, &r).as_deref()).map_err(code_of)?;
                }
            }
            let ws = sync.finish().map_err(|e| e.code())?;
            store.write(&ws);
            match store.load(v + 1, capacity) {
                Ok(t) if entries(&t) == entries(&target) => Ok(()),
                Ok(_) => Err("<WRONG: the next version loads to another tree>"),
                Err(e) => Err(code_of(e)),
            }
        });
        match &out {
            Outcome::Ok | Outcome::Err("STORE_CORRUPT") => {}
            // A head record that does not check blocks the chunks waiting for it: the finish refuses.
            Outcome::Err("REBUILD_INCOMPLETE") => {}
            _ => ck.fail("next-version sync over corrupt reads", &[], format!("round {round}: {}", out.describe())),
        }
        ck.calls += corrupter.hits.get();
    }
    eprintln!("store_corruption_in_store_syncs: {restores} restores, {runs} next-version runs in {:?}", t.elapsed());
    ck.finish("store_corruption_in_store_syncs");
}

const _: u8 = FORMAT_SYNC_PROGRESS;

// ---------------------------------------------------------------------------
// Regressions.

/// A catch-up and a sync as the next version whose head chunk record is
/// read back as a delta naming itself, or naming another delta, as its base.
fn corrupt_delta_cases(store: &Store, r: &Ref, capacity: usize) -> Vec<(&'static str, Store)> {
    let mut out = Vec::new();
    let mut s = store.clone();
    s.table(Table::Chunks).insert(r.key().to_vec(), self_based_delta(r, &[]));
    out.push(("a delta based on itself", s));
    // A delta whose base is a delta (of a full record that exists).
    let other = store
        .records
        .get(&(Table::Chunks as u8))
        .unwrap()
        .iter()
        .find(|(k, b)| {
            k.as_slice() != r.key().as_slice()
                && matches!(ChunkRecord::decode(b, capacity), Ok(ChunkRecord::Full { .. }))
        })
        .map(|(k, _)| Ref::from_key(k).unwrap())
        .unwrap();
    let mid = Ref { birth: 999, hash: [0x42; 32] };
    let mut s = store.clone();
    s.table(Table::Chunks).insert(mid.key().to_vec(), self_based_delta(&other, &[]));
    s.table(Table::Chunks).insert(r.key().to_vec(), self_based_delta(&mid, &[]));
    out.push(("a delta based on a delta", s));
    out
}

#[test]
fn a_corrupt_delta_chain_in_the_head_ends_a_next_version_sync() {
    let capacity = 4;
    let (store, head, v) = store_kit::committed(capacity, 60);
    let mut target = head.clone();
    target.insert(&key(1000), &value(1000, 2)).unwrap();
    target.commit();
    let root = target.head().root();
    let mut probe = StoreSync::next(&head, root, None).unwrap();
    for i in 0..target.chunk_count() {
        probe.add(verify_chunk(&root, i, &target.head().export_chunk_bytes(i).unwrap()).unwrap()).unwrap();
    }
    let (_, r) = probe.needed()[0];
    for (what, bad) in corrupt_delta_cases(&store, &r, capacity) {
        let mut sync = StoreSync::next(&head, root, None).unwrap();
        for i in 0..target.chunk_count() {
            sync.add(verify_chunk(&root, i, &target.head().export_chunk_bytes(i).unwrap()).unwrap()).unwrap();
        }
        let mut result = Err("<livelock>");
        for _ in 0..100 {
            let needed = sync.needed();
            if needed.is_empty() {
                result = Ok(());
                break;
            }
            if let Err(e) = needed.iter().try_for_each(|(t, r)| sync.supply(r, bad.get(*t, r))) {
                result = Err(e.code());
                break;
            }
        }
        assert_eq!(result, Err("STORE_CORRUPT"), "{what} (version {v})");
    }
}

#[test]
fn a_corrupt_delta_chain_in_the_head_ends_a_catch_up() {
    let capacity = 4;
    let (store, head, _) = store_kit::committed(capacity, 60);
    let mut target = head.clone();
    target.insert(&key(1000), &value(1000, 2)).unwrap();
    target.commit();
    let snap = target.head();
    // The head chunk record the catch-up reads first.
    let mut probe = CatchUp::new(&head, snap.root()).unwrap();
    let mut s = store.clone();
    let r = loop {
        let needed = probe.needed().unwrap();
        if let Some((_, r)) = needed.first() {
            break *r;
        }
        for f in probe.fetches(usize::MAX) {
            add(&mut probe, &f, 48, &honest(snap, &f, 48).unwrap(), 1).unwrap();
        }
        for (t, r, bytes) in probe.take_puts() {
            s.table(t).insert(r.key().to_vec(), bytes);
        }
    };
    for (what, mut bad) in corrupt_delta_cases(&store, &r, capacity) {
        let mut cu = CatchUp::new(&head, snap.root()).unwrap();
        let result = run_catch_up(&mut bad, &mut cu, &mut |s, t, r| s.get(t, r).map(<[u8]>::to_vec), |cu, f| {
            answer_honestly(cu, snap, f, 48)
        });
        assert_eq!(result, Err("STORE_CORRUPT"), "{what}");
    }
}

/// The `kinds` byte of a `NODES` answer (which child is a chunk) is not
/// hashed (`spec/catchup.md`, "Kinds"). Before each honest answer, a liar
/// sends the node at the asked path with its kinds changed: where height and
/// chunk count fix them, `KINDS_MISMATCH`; where they do not (height 2, 3
/// chunks), a swap is `TRUNCATED` when asked 2 levels, and asked 1 level it
/// checks but stays unproven, so the node is asked again. Every catch-up ends
/// at the target, asking no piece the target lacks.
#[test]
fn lies_about_a_childs_kind_are_refused_or_asked_again() {
    let mut codes: BTreeMap<String, u32> = BTreeMap::new();
    for (capacity, n) in [(2usize, 40u16), (3, 90), (4, 200)] {
        let (mut store, head, _) = store_kit::committed(capacity, n);
        let mut target = head.clone();
        for k in (0..n).step_by(5) {
            target.insert(&key(k), &value(k, 2)).unwrap();
        }
        target.commit();
        let snap = target.head();
        let mut cu = CatchUp::new(&head, snap.root()).unwrap();
        let result = run_catch_up(&mut store, &mut cu, &mut |s, t, r| s.get(t, r).map(<[u8]>::to_vec), |cu, f| {
            if let Fetch::Nodes(p) = f {
                let one = snap.export_subtree(p, 1, MAX_BYTES).unwrap();
                // 0x0E, capacity, height, chunk count, entry count (varints: a set top bit goes on), kinds.
                let past_varint = |at: usize| at + one[at..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
                let at = past_varint(past_varint(past_varint(1) + 1));
                for (flip, levels) in [(1u8, 1u8), (2, 1), (3, 1), (3, 2)] {
                    let mut lie = one.clone();
                    lie[at] ^= flip;
                    let code = match cu.add_subtree(p, levels, &lie, 7) {
                        Ok(()) => "accepted".to_string(),
                        Err(e) => e.code().to_string(),
                    };
                    *codes.entry(code).or_default() += 1;
                }
            }
            answer_honestly(cu, snap, f, 2)
        });
        assert_eq!(result, Ok(()), "capacity {capacity}");
        let (ws, liars) = cu.finish().unwrap();
        assert!(liars.iter().all(|&s| s == 7), "an honest peer blamed: {liars:?}");
        assert_eq!(check_committed(&mut store, &ws, capacity, &target), Ok(true));
    }
    // Every kind of lie was met: refused where the counts fix the kinds, cut or unproven where they do not.
    for code in ["KINDS_MISMATCH", "TRUNCATED", "accepted"] {
        assert!(codes.get(code).copied().unwrap_or(0) > 0, "{code} never met: {codes:?}");
    }
}

#[test]
fn a_corrupt_delta_chain_ends_a_paged_heads_write() {
    let capacity = 4;
    let (store, _, v) = store_kit::committed(capacity, 60);
    let k = key(30);
    let mut probe = store.load_as(v, capacity, true).unwrap();
    let (_, r) = probe.needed_for(&k, false).unwrap()[0];
    for (what, bad) in corrupt_delta_cases(&store, &r, capacity) {
        let mut head = bad.load_as(v, capacity, true).unwrap();
        let mut result = Err("<livelock>");
        for _ in 0..20 {
            match head.needed_for(&k, false) {
                Ok(needed) if needed.is_empty() => {
                    result = Ok(());
                    break;
                }
                Ok(needed) => {
                    if let Err(e) =
                        needed.iter().try_for_each(|(t, r)| head.supply_record(*t, r, bad.get(*t, r)).map(|_| ()))
                    {
                        result = Err(e.code());
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e.code());
                    break;
                }
            }
        }
        assert_eq!(result, Err("STORE_CORRUPT"), "{what}");
    }
}
