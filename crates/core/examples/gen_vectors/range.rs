//! `range.json`: range proofs (`0x03`).

use bpavl_core::hash::Hash;
use bpavl_core::{verify_range, Segment};
use bpavl_testkit::fields::{self, bytes_field, noncanonical, varint};
use serde_json::Value;

use crate::cases::{
    cat, flip_last, h, header_cases, kv, n, obj, oh, path_cases, s, VectorFile, ALL_DECODE, PATH_CODES,
};
use crate::trees::{Built, Trees};

/// What a range query returns, computed naively from the sorted entries.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

pub fn naive_range(b: &Built, start: &[u8], end: Option<&[u8]>, limit: usize) -> (Entries, bool, Option<Vec<u8>>) {
    let mut matching = b.entries.iter().filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e));
    let results: Vec<_> = matching.by_ref().take(limit).cloned().collect();
    let next = matching.next().map(|e| e.0.clone());
    (results, next.is_none(), next)
}

pub fn range(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "range",
        "Range proofs (format 0x03): verify_range(root, start, end, limit, proof); end null means unbounded. Valid cases return results (key/value pairs), complete, and resume_key (null when complete); invalid cases fail with code.",
        "spec/proof-format.md, Range proof (0x03)",
    );
    let valid = |f: &mut VectorFile, b: &Built, start: &[u8], end: Option<&[u8]>, limit: usize, about: &str| {
        let proof = b.tree.head().prove_range(start, end, limit).unwrap().encode();
        let got = verify_range(&b.root(), start, end, limit, &proof).unwrap();
        let (results, complete, resume) = naive_range(b, start, end, limit);
        assert_eq!((&got.entries, got.complete, &got.resume_key), (&results, complete, &resume), "{about}");
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("start", h(start)),
            ("end", oh(end)),
            ("limit", n(limit as u64)),
            ("proof", h(&proof)),
            ("results", kv(&results)),
            ("complete", Value::Bool(complete)),
            ("resume_key", oh(resume.as_deref())),
        ]));
    };
    let c4 = &t.c4;
    valid(&mut f, &t.empty, b"", None, 1, "empty tree: no segments, complete");
    valid(&mut f, &t.one, b"", None, 10, "single entry, whole tree");
    valid(&mut f, &t.five, b"b", Some(b"d"), 10, "capacity 2, two results");
    valid(&mut f, &t.c3, b"", None, 100, "capacity 3, whole tree after removals");
    valid(&mut f, c4, b"", None, 65536, "whole tree, largest limit");
    valid(&mut f, c4, b"", None, 10, "first 10 entries: incomplete, resume at the 11th");
    valid(
        &mut f,
        c4,
        b"key020",
        Some(b"key040"),
        100,
        "start is present: left neighbour key018, successor key040 >= end",
    );
    valid(&mut f, c4, b"key021", Some(b"key031"), 3, "absent start, limit reached: incomplete");
    valid(&mut f, c4, b"key021", Some(b"key023"), 5, "one result");
    valid(&mut f, c4, b"key0211", Some(b"key0215"), 5, "no results between two adjacent entries");
    valid(&mut f, c4, b"z", None, 5, "start above the last entry: only the left neighbour");
    valid(&mut f, c4, b"a", Some(b"b"), 5, "end below the first entry: only the successor");
    valid(&mut f, c4, b"key100", None, 65536, "tail of the tree, no successor");
    valid(&mut f, c4, b"key020", Some(b"key030"), 5, "exactly limit results, successor >= end: complete");
    valid(&mut f, c4, b"key110", None, 5, "exactly limit results up to the last entry: complete");
    valid(&mut f, c4, b"key013", Some(b"key091"), 1000, "spanning many chunks");
    valid(&mut f, c4, b"key", Some(b"key0"), 3, "no results, start below the first entry");
    let g = c4.chunk_start(4);
    valid(
        &mut f,
        c4,
        &c4.key(g),
        Some(&c4.key(g + 3)),
        10,
        "start is the first key of chunk 4: the left neighbour is in chunk 3",
    );
    let g = c4.chunk_start(8);
    valid(&mut f, c4, &c4.key(g - 2), None, 2, "results end at a chunk boundary, the successor starts the next chunk");
    valid(&mut f, &t.c16, b"", None, 65536, "capacity 16, whole tree");
    valid(&mut f, &t.c16, b"pre", Some(b"prefix\x01"), 10, "the prefix family");
    valid(&mut f, &t.c16, &[0xff], None, 65536, "every key from 0xff on, up to the 1024-byte last key");
    valid(&mut f, &t.c256, b"w00100", Some(b"w00400"), 300, "capacity 256: two-byte varints for M, lo and hi");
    valid(&mut f, &t.c4096, b"k2040", Some(b"k2060"), 100, "capacity 4096: a window across the two chunks");
    valid(&mut f, &t.limits, &[0x62; 1024], Some(&[0x6d; 1024]), 10, "1024-byte start and end (the longest bounds)");

    // Invalid cases around c4_sixty. The base query crosses chunks.
    let root = c4.root();
    let b5 = c4.chunk_start(5);
    let start = c4.key(b5 - 1); // left neighbour in chunk 4, results from chunk 4 on
    let end = c4.key(b5 + c4.shape[5].1 + 1); // results end at chunk 6's first entry, its second is the successor
    let limit = 1000;
    let pr = c4.tree.head().prove_range(&start, Some(&end), limit).unwrap();
    assert_eq!(pr.segments.len(), 3);
    let e = fields::range(&pr);
    let q = |start: &[u8], end: Option<&[u8]>, limit: usize, proof: &[u8], root: &Hash| -> Vec<(&'static str, Value)> {
        vec![("root", h(root)), ("start", h(start)), ("end", oh(end)), ("limit", n(limit as u64)), ("proof", h(proof))]
    };
    let inv = |f: &mut VectorFile, why: &str, proof: &[u8], code: &'static str| {
        let r = verify_range(&root, &start, Some(&end), limit, proof);
        f.invalid(why, r, code, q(&start, Some(&end), limit, proof, &root));
    };
    let invq = |f: &mut VectorFile,
                why: &str,
                root: &Hash,
                st: &[u8],
                en: Option<&[u8]>,
                lim: usize,
                proof: &[u8],
                code: &'static str| {
        let r = verify_range(root, st, en, lim, proof);
        f.invalid(why, r, code, q(st, en, lim, proof, root));
    };
    for (why, bytes, code) in header_cases(&e, 0x03, 4) {
        inv(&mut f, &why, &bytes, code);
    }
    // Query checks, before decoding.
    let b = e.bytes();
    invq(&mut f, "start of 1025 bytes", &root, &[0x6b; 1025], None, 10, &b, "KEY_TOO_LONG");
    invq(
        &mut f,
        "start of 1025 bytes and limit 0: start is checked first",
        &root,
        &[0x6b; 1025],
        None,
        0,
        &b,
        "KEY_TOO_LONG",
    );
    invq(&mut f, "end present and empty", &root, b"", Some(b""), 10, &b, "KEY_EMPTY");
    invq(&mut f, "end of 1025 bytes", &root, b"", Some(&[0x6b; 1025]), 10, &b, "KEY_TOO_LONG");
    invq(&mut f, "limit 0", &root, &start, Some(&end), 0, &b, "QUERY_INVALID");
    invq(&mut f, "limit 65537", &root, &start, Some(&end), 65537, &b, "QUERY_INVALID");
    invq(&mut f, "end equal to start", &root, &start, Some(&start), 10, &b, "QUERY_INVALID");
    invq(&mut f, "end below start", &root, &end, Some(&start), 10, &b, "QUERY_INVALID");
    invq(
        &mut f,
        "limit 0 and an empty proof: the query is checked first",
        &root,
        &start,
        Some(&end),
        0,
        &[],
        "QUERY_INVALID",
    );
    // Segment count.
    inv(
        &mut f,
        "segment count with a redundant zero group",
        &e.with("segments", &noncanonical(3)),
        "VARINT_NON_CANONICAL",
    );
    inv(
        &mut f,
        "segment count 2^53 - 1, nothing follows",
        &cat(&[&e.upto("segments"), &varint((1 << 53) - 1)]),
        "TRUNCATED",
    );
    inv(&mut f, "segment count one more than present", &e.with("segments", &[4]), "TRUNCATED");
    inv(&mut f, "segment count one less than present", &e.with("segments", &[2]), "TRAILING_BYTES");
    inv(&mut f, "segment count 0 (the tree is not empty)", &cat(&[&e.upto("segments"), &[0]]), "ROOT_MISMATCH");
    // Segment header.
    let m0 = pr.segments[0].chunk_entries as u64;
    let lo0 = pr.segments[0].lo as u64;
    inv(&mut f, "first segment M = 0", &e.with("seg0.M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "second segment M = C + 1", &e.with("seg1.M", &[5]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "first segment lo = M", &e.with("seg0.lo", &varint(m0)), "POSITION_INVALID");
    inv(&mut f, "first segment hi = lo", &e.with("seg0.hi", &varint(lo0)), "POSITION_INVALID");
    inv(&mut f, "first segment hi < lo", &e.with("seg0.hi", &varint(lo0.saturating_sub(1))), "POSITION_INVALID");
    inv(&mut f, "first segment hi = M + 1", &e.with("seg0.hi", &varint(m0 + 1)), "POSITION_INVALID");
    inv(&mut f, "second segment lo with 8 continuation bytes", &e.with("seg1.lo", &[0xff; 8]), "VARINT_OVERFLOW");
    // Entries.
    let s1 = &pr.segments[1];
    inv(
        &mut f,
        "second segment: first two keys swapped",
        &{
            let mut x = fields::range(&pr);
            let (a, bb) = (x.idx("seg1.key0"), x.idx("seg1.key1"));
            let tmp = x.0[a].bytes.clone();
            x.0[a].bytes = x.0[bb].bytes.clone();
            x.0[bb].bytes = tmp;
            x.bytes()
        },
        "KEYS_NOT_SORTED",
    );
    inv(
        &mut f,
        "second segment's first key equal to the first segment's last key",
        &e.with("seg1.key0", &bytes_field(&pr.segments[0].entries.last().unwrap().0)),
        "KEYS_NOT_SORTED",
    );
    inv(
        &mut f,
        "segments in reverse order",
        &{
            let mut rev = pr.clone();
            rev.segments.reverse();
            rev.encode()
        },
        "KEYS_NOT_SORTED",
    );
    inv(&mut f, "second segment: a key of length 0", &e.with("seg1.key1", &[0]), "KEY_EMPTY");
    inv(&mut f, "second segment: a key of length 1025", &cat(&[&e.upto("seg1.key1"), &varint(1025)]), "KEY_TOO_LONG");
    inv(
        &mut f,
        "second segment: a value of length 65537",
        &cat(&[&e.upto("seg1.value1"), &varint(65537)]),
        "VALUE_TOO_LONG",
    );
    inv(&mut f, "input ends inside a key", &cat(&[&e.upto("seg1.key1"), &e.get("seg1.key1")[..3]]), "TRUNCATED");
    let mut under = pr.clone();
    under.segments[1] =
        Segment { chunk_entries: 1, lo: 0, entries: s1.entries[..1].to_vec(), inchunk: vec![], path: s1.path.clone() };
    inv(&mut f, "second segment M = 1 < ceil(C/2) with a non-empty path", &under.encode(), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "seg1.", &s1.path, 4) {
        inv(&mut f, &why, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(&mut f, "a result's value corrupted", &e.with("seg1.value0", &bytes_field(b"value-x")), "ROOT_MISMATCH");
    inv(
        &mut f,
        "last segment's in-chunk hash corrupted",
        &e.with("seg2.hashes", &flip_last(e.get("seg2.hashes"))),
        "ROOT_MISMATCH",
    );
    let prev = t.c4_prev.tree.head().prove_range(&start, Some(&end), limit).unwrap().encode();
    inv(&mut f, "proof from the previous version of the tree", &prev, "ROOT_MISMATCH");
    invq(
        &mut f,
        "valid proof checked against another tree's root",
        &t.c16.root(),
        &start,
        Some(&end),
        limit,
        &e.bytes(),
        "ROOT_MISMATCH",
    );
    // Windows whose segments all verify, but are not what a prover builds.
    let (gs, ge) = (c4.index_of(&start), c4.index_of(&end)); // window is [gs - 1, ge]
    assert_eq!(pr, c4.window(gs - 1, ge + 1), "the window helper reproduces the prover");
    let w = |a: usize, b: usize| c4.window(a, b).encode();
    inv(
        &mut f,
        "left neighbour omitted: the window starts at start, not at the tree's first entry",
        &w(gs, ge + 1),
        "RANGE_INVALID",
    );
    inv(&mut f, "an extra entry before the left neighbour", &w(gs - 2, ge + 1), "RANGE_INVALID");
    inv(&mut f, "successor omitted: the window stops before the tree's last entry", &w(gs - 1, ge), "RANGE_INVALID");
    inv(&mut f, "an extra entry after the successor", &w(gs - 1, ge + 2), "RANGE_INVALID");
    inv(&mut f, "results stop early: the last result offered as the successor", &w(gs - 1, ge - 1), "RANGE_INVALID");
    let mut gap = pr.clone();
    gap.segments.remove(1);
    inv(&mut f, "gap: the middle segment (a whole chunk) removed", &gap.encode(), "RANGE_INVALID");
    let mut gap = pr.clone();
    let (i1, m1) = (5u64, c4.shape[5].1);
    gap.segments[1] = c4.segment(i1, 0, m1 - 1);
    inv(&mut f, "gap: the middle segment stops one entry before its chunk's end", &gap.encode(), "RANGE_INVALID");
    let mut gap = pr.clone();
    gap.segments[1] = c4.segment(i1, 1, m1);
    inv(&mut f, "gap: the middle segment starts at lo = 1", &gap.encode(), "RANGE_INVALID");
    let small = c4.tree.head().prove_range(&start, Some(&end), 5).unwrap().encode();
    invq(
        &mut f,
        "too many results: a proof for limit 5 checked with limit 3",
        &root,
        &start,
        Some(&end),
        3,
        &small,
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for limit 3 checked with limit 5 (the successor would be a 4th result)",
        &root,
        &start,
        Some(&end),
        5,
        &c4.tree.head().prove_range(&start, Some(&end), 3).unwrap().encode(),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for end key040 checked with unbounded end",
        &root,
        b"key020",
        None,
        100,
        &c4.tree.head().prove_range(b"key020", Some(b"key040"), 100).unwrap().encode(),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for start key020 checked with start key030",
        &root,
        b"key030",
        Some(b"key040"),
        100,
        &c4.tree.head().prove_range(b"key020", Some(b"key040"), 100).unwrap().encode(),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "a proof for start key030 checked with start key020",
        &root,
        b"key020",
        Some(b"key040"),
        100,
        &c4.tree.head().prove_range(b"key030", Some(b"key040"), 100).unwrap().encode(),
        "RANGE_INVALID",
    );
    // Each rule of the window's edges alone: the chunk is right, the
    // position is not (or the other way round).
    let n_all = c4.entries.len();
    let g1 = c4.chunk_start(1);
    invq(
        &mut f,
        "left neighbour omitted, the window begins at lo = 0 but in chunk 1 (only the chunk-0 rule catches it)",
        &root,
        &c4.key(g1),
        Some(&c4.key(g1 + 2)),
        100,
        &w(g1, g1 + 3),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "left neighbour omitted, the window begins in chunk 0 but at lo = 1 (only the lo = 0 rule catches it)",
        &root,
        &c4.key(1),
        Some(&c4.key(3)),
        100,
        &w(1, 4),
        "RANGE_INVALID",
    );
    invq(
        &mut f,
        "last entry omitted, unbounded end: the window ends in the last chunk but at hi = M - 1 (only the hi = M rule catches it)",
        &root,
        &c4.key(n_all - 3),
        None,
        100,
        &w(n_all - 4, n_all - 1),
        "RANGE_INVALID",
    );
    let gl = c4.chunk_start(c4.shape.len() - 1);
    invq(
        &mut f,
        "last chunk omitted, unbounded end: the window ends at hi = M but not in the last chunk (only the last-chunk rule catches it)",
        &root,
        &c4.key(gl - 3),
        None,
        100,
        &w(gl - 4, gl),
        "RANGE_INVALID",
    );
    // Check orders.
    invq(
        &mut f,
        "start of 1025 bytes and an empty end: start is checked before end",
        &root,
        &[0x6b; 1025],
        Some(b""),
        10,
        &b,
        "KEY_TOO_LONG",
    );
    invq(&mut f, "empty end and limit 0: end is checked before the limit", &root, b"", Some(b""), 0, &b, "KEY_EMPTY");
    inv(
        &mut f,
        "first segment lo = M, then the end of input: lo is checked before hi is read",
        &cat(&[&e.upto("seg0.lo"), &varint(m0)]),
        "POSITION_INVALID",
    );
    inv(
        &mut f,
        "second segment: second key equal to the first, then a value of length 65537: the key order is checked before the value",
        &cat(&[&e.upto("seg1.key1"), e.get("seg1.key0"), &varint(65537)]),
        "KEYS_NOT_SORTED",
    );
    inv(
        &mut f,
        "second segment M = 1 < ceil(C/2) and path length 49: the path length is checked before the fill",
        &fields::range(&under).with("seg1.path_len", &varint(49)),
        "PATH_TOO_LONG",
    );

    f.require(&[
        ALL_DECODE,
        PATH_CODES,
        &[
            "POSITION_INVALID",
            "KEY_EMPTY",
            "KEY_TOO_LONG",
            "VALUE_TOO_LONG",
            "KEYS_NOT_SORTED",
            "RANGE_INVALID",
            "QUERY_INVALID",
        ],
    ]);
    f
}
