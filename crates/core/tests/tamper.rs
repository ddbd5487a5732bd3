//! Tamper evidence: changing any single byte of a valid proof or chunk
//! envelope makes verification fail with a coded error (a code from
//! `spec/errors.md`), never a panic and never a pass.
//!
//! For trees of capacity 2, 3, 4, 16 and 64, from one entry to ~2000, some
//! after removals, plus the empty tree, we take valid encodings of every kind
//! — existence; absence with both, only a left, only a right and no
//! neighbours; range with multi-segment windows, limit-truncated results,
//! empty results, windows at the tree's edges; chunk proofs; chunk envelopes —
//! and, for **every** byte position, XOR the byte with 0x01, 0x80, 0xff and a
//! random non-zero mask, then verify against the true root with the original
//! context. Every result must be `Err` with a code from the table; when the
//! decoder alone already rejects the bytes, the verifier must report the
//! same code (first failing check wins). Envelopes also go through
//! `Rebuilder::add`, which must report what `verify_chunk` reports.
//!
//! One `#[test]` per capacity so the harness spreads them over the cores.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Instant;

use bpavl_core::hash::Hash;
use bpavl_core::{
    verify_absence, verify_chunk, verify_chunk_proof, verify_existence, verify_range, AbsenceProof, ChunkEnvelope,
    ChunkProof, ExistenceProof, RangeProof, Rebuilder, Tree,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

mod common;
use common::build_tree;

/// The longest random value in this test's trees.
const MAX_VALUE_LEN: usize = 16;

// ---------------------------------------------------------------------------
// Codes from spec/errors.md.

struct Codes {
    decoding: BTreeSet<String>,
    verification: BTreeSet<String>,
}

fn load_codes() -> Codes {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/errors.md");
    let text = std::fs::read_to_string(path).expect("spec/errors.md");
    let mut codes = Codes { decoding: BTreeSet::new(), verification: BTreeSet::new() };
    let mut section = "";
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim();
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        let set = if section.starts_with("Decoding") {
            &mut codes.decoding
        } else if section.starts_with("Verification") {
            &mut codes.verification
        } else {
            continue;
        };
        let cell = line.split('|').nth(1).unwrap_or("");
        for (i, tok) in cell.split('`').enumerate() {
            if i % 2 == 1 && !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
                set.insert(tok.to_string());
            }
        }
    }
    assert!(codes.decoding.contains("TRUNCATED") && codes.verification.contains("ROOT_MISMATCH"), "errors.md parse");
    codes
}

// ---------------------------------------------------------------------------
// Samples.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Existence,
    Absence,
    Range,
    ChunkProof,
    Envelope,
}

#[derive(Clone, Debug)]
enum Ctx {
    Existence { key: Vec<u8>, value: Vec<u8> },
    Absence { key: Vec<u8> },
    Range { start: Vec<u8>, end: Option<Vec<u8>>, limit: usize },
    ChunkProof,
    Envelope { index: u64 },
}

#[derive(Clone, Debug)]
struct Sample {
    kind: Kind,
    what: String,
    root: Hash,
    ctx: Ctx,
    bytes: Vec<u8>,
}

fn pe(e: bpavl_core::ProofError) -> &'static str {
    e.code()
}

fn decode_as(kind: Kind, b: &[u8]) -> Result<(), &'static str> {
    match kind {
        Kind::Existence => ExistenceProof::decode(b).map(drop).map_err(pe),
        Kind::Absence => AbsenceProof::decode(b).map(drop).map_err(pe),
        Kind::Range => RangeProof::decode(b).map(drop).map_err(pe),
        Kind::ChunkProof => ChunkProof::decode(b).map(drop).map_err(pe),
        Kind::Envelope => ChunkEnvelope::decode(b).map(drop).map_err(pe),
    }
}

fn verify_as(s: &Sample, b: &[u8]) -> Result<(), &'static str> {
    let root = &s.root;
    match &s.ctx {
        Ctx::Existence { key, value } => verify_existence(root, key, value, b).map(drop).map_err(pe),
        Ctx::Absence { key } => verify_absence(root, key, b).map(drop).map_err(pe),
        Ctx::Range { start, end, limit } => verify_range(root, start, end.as_deref(), *limit, b).map(drop).map_err(pe),
        Ctx::ChunkProof => verify_chunk_proof(root, b).map(drop).map_err(pe),
        Ctx::Envelope { index } => verify_chunk(root, *index, b).map(drop).map_err(pe),
    }
}

fn rebuild_add(s: &Sample, b: &[u8]) -> Result<(), &'static str> {
    let Ctx::Envelope { index } = s.ctx else { unreachable!() };
    Rebuilder::new(s.root).add(index, b).map(drop).map_err(|e| e.code())
}

/// `(description, start, end, limit)`.
type Query = (String, Vec<u8>, Option<Vec<u8>>, usize);

fn succ(k: &[u8]) -> Vec<u8> {
    let mut k = k.to_vec();
    k.push(0);
    k
}

/// Valid encodings of every kind for `tree`, covering the edge cases.
fn samples_for(rng: &mut SmallRng, tree: &Tree, keys: &[Vec<u8>]) -> Vec<Sample> {
    let root = tree.root();
    let mut out = Vec::new();
    let n = keys.len();
    let mut push = |kind, what: String, ctx, bytes| out.push(Sample { kind, what, root, ctx, bytes });

    // Absence: no neighbour (empty tree), right only, left only, both in one
    // chunk, both across a chunk boundary.
    let mut absent =
        vec![("below min (right only)".to_string(), vec![0x00]), ("above max (left only)".to_string(), vec![0xff; 13])];
    if n > 0 {
        absent.push(("between keys".into(), succ(&keys[rng.gen_range(0..n)])));
        let chunks = tree.chunk_count();
        if chunks > 1 {
            let i = rng.gen_range(0..chunks - 1);
            let last = tree.export_chunk(i).unwrap().entries.last().unwrap().0.clone();
            absent.push((format!("across chunks {i}|{}", i + 1), succ(&last)));
        }
    }
    for (what, key) in absent {
        if tree.get(&key).is_none() {
            let bytes = tree.prove_absence(&key).unwrap().encode();
            push(Kind::Absence, format!("absence {what}"), Ctx::Absence { key }, bytes);
        }
    }

    // Range queries.
    let mut queries: Vec<Query> =
        vec![("from start, limit 1".into(), vec![], None, 1), ("past the last key".into(), vec![0xff; 13], None, 3)];
    if n > 0 {
        let c = tree.capacity();
        if n <= 40 {
            // The whole tree in one window (kept to small trees: proofs stay small).
            queries.push(("whole small tree".into(), vec![], None, 65536));
        }
        let i = rng.gen_range(0..n);
        queries.push(("bounded, complete".into(), keys[i].clone(), keys.get(i + 4).cloned(), 65536));
        queries.push(("empty result between keys".into(), succ(&keys[i]), Some(succ(&succ(&keys[i]))), 10));
        let chunks = tree.chunk_count();
        if chunks > 1 {
            // Start two entries before the end of a chunk: the window spans
            // chunks (left neighbour, results, successor), limit-truncated.
            let ci = rng.gen_range(0..chunks - 1);
            let entries = tree.export_chunk(ci).unwrap().entries;
            let start = entries[entries.len().saturating_sub(2)].0.clone();
            let limit = (c + 2).min(9);
            queries.push((format!("multi-segment from chunk {ci}, limit {limit}"), start, None, limit));
            // Start at a chunk's first key: the left neighbour is in the previous chunk.
            let first = tree.export_chunk(ci + 1).unwrap().entries[0].0.clone();
            queries.push((format!("start at first key of chunk {}", ci + 1), first, None, 3));
        }
        // Random windows, some bounded, some limit-truncated.
        for _ in 0..3 {
            let i = rng.gen_range(0..n);
            let end = if rng.gen_bool(0.5) { keys.get(i + rng.gen_range(1..12)).cloned() } else { None };
            let limit = rng.gen_range(1..=8);
            queries.push((format!("random window, limit {limit}"), keys[i].clone(), end, limit));
        }
        // Up to the last key: the window ends at the tree's end.
        let start = keys[n.saturating_sub(3)].clone();
        queries.push(("to the end of the tree".into(), start, None, 5));
    }
    for (what, start, end, limit) in queries {
        let bytes = tree.prove_range(&start, end.as_deref(), limit).unwrap().encode();
        push(Kind::Range, format!("range {what}"), Ctx::Range { start, end, limit }, bytes);
    }

    if n > 0 {
        let mut ex = vec![keys[0].clone(), keys[n - 1].clone()];
        ex.extend((0..3).map(|_| keys[rng.gen_range(0..n)].clone()));
        ex.sort();
        ex.dedup();
        for key in ex {
            let value = tree.get(&key).unwrap().to_vec();
            let bytes = tree.prove_existence(&key).unwrap().encode();
            push(Kind::Existence, "existence".into(), Ctx::Existence { key, value }, bytes);
        }
        let chunks = tree.chunk_count();
        for i in [0, chunks / 2, chunks - 1, rng.gen_range(0..chunks)].into_iter().collect::<BTreeSet<_>>() {
            let bytes = tree.prove_chunk(i).unwrap().encode();
            push(Kind::ChunkProof, format!("chunk proof {i}"), Ctx::ChunkProof, bytes);
            let bytes = tree.export_chunk_bytes(i).unwrap();
            push(Kind::Envelope, format!("envelope {i}"), Ctx::Envelope { index: i }, bytes);
        }
    }
    for s in &out {
        verify_as(s, &s.bytes).unwrap_or_else(|c| panic!("valid sample `{}` does not verify: {c}", s.what));
    }
    out
}

// ---------------------------------------------------------------------------
// The sweep.

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn guarded(f: impl FnOnce() -> Result<(), &'static str>) -> Result<Result<(), &'static str>, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

struct Stats {
    samples: usize,
    bytes: usize,
    checks: usize,
    failures: Vec<String>,
    failed: usize,
}

impl Stats {
    fn fail(&mut self, s: &Sample, tree: &str, pos: usize, mask: u8, input: &[u8], msg: String) {
        self.failed += 1;
        if self.failures.len() < 30 {
            let shown = if input.len() <= 400 { hex(input) } else { format!("{}…", hex(&input[..400])) };
            self.failures.push(format!(
                "[{tree}: {} ({} bytes)] byte {pos} ^= {mask:#04x}: {msg}\n    tampered = {shown}",
                s.what,
                s.bytes.len()
            ));
        }
    }
}

fn sweep(codes: &Codes, stats: &mut Stats, tree: &str, s: &Sample, rng: &mut SmallRng) {
    stats.samples += 1;
    stats.bytes += s.bytes.len();
    let mut t = s.bytes.clone();
    for pos in 0..t.len() {
        let mut masks = vec![0x01u8, 0x80, 0xff];
        let r = loop {
            let m: u8 = rng.gen();
            if !masks.contains(&m) && m != 0 {
                break m;
            }
        };
        masks.push(r);
        for mask in masks {
            t[pos] ^= mask;
            stats.checks += 1;
            let ver = guarded(|| verify_as(s, &t));
            match ver {
                Err(p) => stats.fail(s, tree, pos, mask, &t, format!("PANIC: {p}")),
                Ok(Ok(())) => stats.fail(s, tree, pos, mask, &t, "TAMPERED BYTES VERIFIED".into()),
                Ok(Err(c)) => {
                    if !codes.decoding.contains(c) && !codes.verification.contains(c) {
                        stats.fail(s, tree, pos, mask, &t, format!("{c} is not in spec/errors.md"));
                    }
                    match guarded(|| decode_as(s.kind, &t)) {
                        Err(p) => stats.fail(s, tree, pos, mask, &t, format!("decode PANIC: {p}")),
                        Ok(Err(d)) if d != c => stats.fail(
                            s,
                            tree,
                            pos,
                            mask,
                            &t,
                            format!("verifier says {c}, decoder says {d} (first failing check must win)"),
                        ),
                        Ok(Ok(())) if codes.decoding.contains(c) => {
                            stats.fail(s, tree, pos, mask, &t, format!("decodes, yet the verifier reports {c}"))
                        }
                        _ => {}
                    }
                    if s.kind == Kind::Envelope && mask == r {
                        match guarded(|| rebuild_add(s, &t)) {
                            Ok(Err(rc)) if rc == c => {}
                            other => stats.fail(
                                s,
                                tree,
                                pos,
                                mask,
                                &t,
                                format!("Rebuilder::add gave {other:?}, verify_chunk {c}"),
                            ),
                        }
                    }
                }
            }
            t[pos] ^= mask;
        }
    }
    assert_eq!(t, s.bytes);
}

/// The edge cases a sample covers, read back from its decoded form.
fn shape(s: &Sample) -> Vec<String> {
    let mut out = Vec::new();
    match &s.ctx {
        Ctx::Absence { key } => {
            let p = AbsenceProof::decode(&s.bytes).unwrap();
            out.push(
                match (&p.left, &p.right) {
                    (None, None) => "absence: no neighbour",
                    (Some(_), None) => "absence: left only",
                    (None, Some(_)) => "absence: right only",
                    (Some(l), Some(r)) if verify_absence(&s.root, key, &s.bytes).is_ok() => {
                        let (li, ri) = (
                            verify_existence(&s.root, &l.key, &l.value, &neighbour_proof(p.capacity, l)).unwrap(),
                            verify_existence(&s.root, &r.key, &r.value, &neighbour_proof(p.capacity, r)).unwrap(),
                        );
                        if li.chunk_index == ri.chunk_index {
                            "absence: both, one chunk"
                        } else {
                            "absence: both, across chunks"
                        }
                    }
                    _ => unreachable!(),
                }
                .into(),
            );
        }
        Ctx::Range { start, end, limit } => {
            let p = RangeProof::decode(&s.bytes).unwrap();
            let got = verify_range(&s.root, start, end.as_deref(), *limit, &s.bytes).unwrap();
            if p.segments.is_empty() {
                out.push("range: empty tree".into());
            }
            if p.segments.len() > 1 {
                out.push("range: multi-segment".into());
            }
            if !got.complete {
                out.push("range: limit-truncated".into());
            }
            if got.entries.is_empty() && !p.segments.is_empty() {
                out.push("range: empty result".into());
            }
            if got.complete && p.segments.last().is_some_and(|l| l.lo + l.entries.len() == l.chunk_entries) {
                out.push("range: complete, ends at a chunk end".into());
            }
        }
        _ => {}
    }
    out
}

/// An existence proof re-assembled from an absence proof's neighbour.
fn neighbour_proof(capacity: usize, n: &bpavl_core::Neighbour) -> Vec<u8> {
    ExistenceProof { capacity, witness: n.witness.clone() }.encode()
}

/// Sweeps every sample of trees of `capacity` with the given sizes
/// `(entries, fraction removed)`, plus the empty tree.
fn run(capacity: usize, sizes: &[(usize, f64)]) {
    let started = Instant::now();
    let codes = load_codes();
    let mut rng = SmallRng::seed_from_u64(0x7a3e_0000 + capacity as u64);
    let mut stats = Stats { samples: 0, bytes: 0, checks: 0, failures: Vec::new(), failed: 0 };
    let mut kinds = BTreeSet::new();
    for &(n, remove) in [(0, 0.0)].iter().chain(sizes) {
        let (tree, keys) = build_tree(&mut rng, capacity, n, remove, MAX_VALUE_LEN);
        let label =
            format!("C={capacity} n={n} removed={remove} → {} entries, {} chunks", keys.len(), tree.chunk_count());
        for s in samples_for(&mut rng, &tree, &keys) {
            kinds.insert(format!("{:?}", s.kind));
            kinds.extend(shape(&s));
            sweep(&codes, &mut stats, &label, &s, &mut rng);
        }
    }
    for want in [
        "Existence",
        "Absence",
        "Range",
        "ChunkProof",
        "Envelope",
        "absence: no neighbour",
        "absence: left only",
        "absence: right only",
        "absence: both, one chunk",
        "absence: both, across chunks",
        "range: empty tree",
        "range: multi-segment",
        "range: limit-truncated",
        "range: empty result",
        "range: complete, ends at a chunk end",
    ] {
        assert!(kinds.contains(want), "C={capacity}: no sample of shape `{want}` was swept ({kinds:?})");
    }
    eprintln!(
        "tamper C={capacity}: {} samples, {} bytes, {} tampered verifications in {:?}",
        stats.samples,
        stats.bytes,
        stats.checks,
        started.elapsed()
    );
    if stats.failed > 0 {
        panic!(
            "C={capacity}: {} failure(s), first {}:\n{}",
            stats.failed,
            stats.failures.len(),
            stats.failures.join("\n")
        );
    }
}

#[test]
fn tamper_capacity_2() {
    run(2, &[(1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0), (50, 0.0), (300, 0.4), (2000, 0.0), (2000, 0.6)]);
}

#[test]
fn tamper_capacity_3() {
    run(3, &[(1, 0.0), (3, 0.0), (4, 0.0), (7, 0.0), (500, 0.3), (1500, 0.0)]);
}

#[test]
fn tamper_capacity_4() {
    run(4, &[(1, 0.0), (5, 0.0), (10, 0.0), (400, 0.5), (1000, 0.0), (2000, 0.3)]);
}

#[test]
fn tamper_capacity_16() {
    run(16, &[(1, 0.0), (16, 0.0), (17, 0.0), (200, 0.0), (800, 0.3), (2000, 0.0), (2000, 0.5)]);
}

#[test]
fn tamper_capacity_64() {
    run(64, &[(1, 0.0), (64, 0.0), (65, 0.0), (300, 0.0), (1000, 0.5), (2000, 0.0), (2000, 0.4)]);
}
