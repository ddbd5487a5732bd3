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
use std::time::Instant;

use bpavl_core::{verify_absence, verify_existence, verify_range, AbsenceProof, ExistenceProof, RangeProof, Tree};
use bpavl_testkit::codes::{load_codes, Codes};
use bpavl_testkit::guard::{guarded, Outcome};
use bpavl_testkit::rng::SplitMix64;
use bpavl_testkit::sample::{decode_as, rebuild_add, verify_as, Ctx, Kind, Sample};
use rand::Rng;

mod common;
use common::build_tree;

/// The longest random value in this test's trees.
const MAX_VALUE_LEN: usize = 16;

/// `(description, start, end, limit)`.
type Query = (String, Vec<u8>, Option<Vec<u8>>, usize);

fn succ(k: &[u8]) -> Vec<u8> {
    let mut k = k.to_vec();
    k.push(0);
    k
}

/// Valid encodings of every kind for `tree`, covering the edge cases.
fn samples_for(rng: &mut SplitMix64, tree: &Tree, keys: &[Vec<u8>]) -> Vec<Sample> {
    let root = tree.head().root();
    let mut out = Vec::new();
    let n = keys.len();
    let mut push = |what: String, ctx, bytes| out.push(Sample::new(what, root, ctx, bytes));

    // Absence: no neighbour (empty tree), right only, left only, both in one
    // chunk, both across a chunk boundary.
    let mut absent =
        vec![("below min (right only)".to_string(), vec![0x00]), ("above max (left only)".to_string(), vec![0xff; 13])];
    if n > 0 {
        absent.push(("between keys".into(), succ(&keys[rng.gen_range(0..n)])));
        let chunks = tree.chunk_count();
        if chunks > 1 {
            let i = rng.gen_range(0..chunks - 1);
            let last = tree.head().export_chunk(i).unwrap().entries.last().unwrap().0.clone();
            absent.push((format!("across chunks {i}|{}", i + 1), succ(&last)));
        }
    }
    for (what, key) in absent {
        if tree.get(&key).is_none() {
            let bytes = tree.head().prove_absence(&key).unwrap().encode();
            push(format!("absence {what}"), Ctx::Absence { key }, bytes);
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
            let entries = tree.head().export_chunk(ci).unwrap().entries;
            let start = entries[entries.len().saturating_sub(2)].0.clone();
            let limit = (c + 2).min(9);
            queries.push((format!("multi-segment from chunk {ci}, limit {limit}"), start, None, limit));
            // Start at a chunk's first key: the left neighbour is in the previous chunk.
            let first = tree.head().export_chunk(ci + 1).unwrap().entries[0].0.clone();
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
        let bytes = tree.head().prove_range(&start, end.as_deref(), limit).unwrap().encode();
        push(format!("range {what}"), Ctx::Range { start, end, limit }, bytes);
    }

    if n > 0 {
        let mut ex = vec![keys[0].clone(), keys[n - 1].clone()];
        ex.extend((0..3).map(|_| keys[rng.gen_range(0..n)].clone()));
        ex.sort();
        ex.dedup();
        for key in ex {
            let value = tree.get(&key).unwrap().to_vec();
            let bytes = tree.head().prove_existence(&key).unwrap().encode();
            push("existence".into(), Ctx::Existence { key, value }, bytes);
        }
        let chunks = tree.chunk_count();
        for i in [0, chunks / 2, chunks - 1, rng.gen_range(0..chunks)].into_iter().collect::<BTreeSet<_>>() {
            let bytes = tree.head().prove_chunk(i).unwrap().encode();
            push(format!("chunk proof {i}"), Ctx::ChunkProof, bytes);
            let bytes = tree.head().export_chunk_bytes(i).unwrap();
            push(format!("envelope {i}"), Ctx::Envelope { index: i }, bytes);
        }
    }
    for s in &out {
        verify_as(s, &s.bytes).unwrap_or_else(|c| panic!("valid sample `{}` does not verify: {c}", s.what));
    }
    out
}

// ---------------------------------------------------------------------------
// The sweep.

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
            let shown =
                if input.len() <= 400 { hex::encode(input) } else { format!("{}…", hex::encode(&input[..400])) };
            self.failures.push(format!(
                "[{tree}: {} ({} bytes)] byte {pos} ^= {mask:#04x}: {msg}\n    tampered = {shown}",
                s.what,
                s.bytes.len()
            ));
        }
    }
}

fn sweep(codes: &Codes, stats: &mut Stats, tree: &str, s: &Sample, rng: &mut SplitMix64) {
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
            match guarded(|| verify_as(s, &t)) {
                Outcome::Panic(p) => stats.fail(s, tree, pos, mask, &t, format!("PANIC: {p}")),
                Outcome::Ok => stats.fail(s, tree, pos, mask, &t, "TAMPERED BYTES VERIFIED".into()),
                Outcome::Err(c) => {
                    if !codes.is_verifier_code(c) {
                        stats.fail(s, tree, pos, mask, &t, format!("{c} is not in spec/errors.md"));
                    }
                    match guarded(|| decode_as(s.kind, &t)) {
                        Outcome::Panic(p) => stats.fail(s, tree, pos, mask, &t, format!("decode PANIC: {p}")),
                        Outcome::Err(d) if d != c => stats.fail(
                            s,
                            tree,
                            pos,
                            mask,
                            &t,
                            format!("verifier says {c}, decoder says {d} (first failing check must win)"),
                        ),
                        Outcome::Ok if codes.decoding.contains(c) => {
                            stats.fail(s, tree, pos, mask, &t, format!("decodes, yet the verifier reports {c}"))
                        }
                        _ => {}
                    }
                    if s.kind == Kind::Envelope && mask == r {
                        match guarded(|| rebuild_add(s, &t)) {
                            Outcome::Err(rc) if rc == c => {}
                            other => stats.fail(
                                s,
                                tree,
                                pos,
                                mask,
                                &t,
                                format!("Rebuilder::add gave {}, verify_chunk {c}", other.describe()),
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
    let mut rng = SplitMix64::new(0x7a3e_0000 + capacity as u64);
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
