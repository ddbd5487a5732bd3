//! `chunk_proof.json`: chunk proofs (`0x04`).

use bpavl_core::hash::Hash;
use bpavl_core::{verify_chunk_proof, ChunkProof, Folded};
use bpavl_testkit::fields::{self, noncanonical, varint};
use serde_json::Value;

use crate::cases::{cat, flip_last, h, header_cases, n, obj, path_cases, s, VectorFile, ALL_DECODE, PATH_CODES};
use crate::forged;
use crate::trees::Trees;

pub fn chunk_proof(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "chunk_proof",
        "Chunk proofs (format 0x04): verify_chunk_proof(root, proof). Valid cases return the chunk's index, the tree's totals (chunks, entries) and the chunk's key_height; invalid cases fail with code.",
        "spec/proof-format.md, Chunk proof (0x04)",
    );
    let valid = |f: &mut VectorFile, tree: Value, root: &Hash, proof: &[u8], want: Folded| {
        assert_eq!(verify_chunk_proof(root, proof).unwrap(), Folded { root: *root, ..want });
        f.valid.push(obj(vec![
            ("tree", tree),
            ("root", h(root)),
            ("proof", h(proof)),
            ("index", n(want.index)),
            ("chunk_count", n(want.chunk_count)),
            ("entry_count", n(want.entry_count)),
            ("key_height", n(want.key_height as u64)),
        ]));
    };
    for b in [&t.one, &t.five, &t.c3, &t.c4, &t.c256, &t.c4096, &t.limits] {
        for i in 0..b.chunk_count() {
            let proof = b.tree.head().prove_chunk(i).unwrap().encode();
            valid(&mut f, s(b.name), &b.root(), &proof, b.folded(i));
        }
    }
    let (deep, folded) = forged::long_path();
    valid(&mut f, Value::Null, &folded.root, &forged::chunk_proof(&deep).encode(), folded);
    let c4 = &t.c4;
    let root = c4.root();
    let pr = c4.tree.head().prove_chunk(6).unwrap();
    let e = fields::chunk_proof(&pr);
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, proof: &[u8], code: &'static str| {
        let r = verify_chunk_proof(root, proof);
        f.invalid(why, r, code, vec![("root", h(root)), ("proof", h(proof))]);
    };
    for (why, bytes, code) in header_cases(&e, 0x04, 4) {
        inv(&mut f, &why, &root, &bytes, code);
    }
    inv(&mut f, "M = 0", &root, &e.with("M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, &e.with("M", &[5]), "CHUNK_SIZE_INVALID");
    inv(
        &mut f,
        "M with a redundant zero group",
        &root,
        &e.with("M", &noncanonical(pr.chunk_entries as u64)),
        "VARINT_NON_CANONICAL",
    );
    inv(
        &mut f,
        "input ends inside the chunk root",
        &root,
        &cat(&[&e.upto("chunk_root"), &pr.chunk_root[..31]]),
        "TRUNCATED",
    );
    inv(&mut f, "M = 1 < ceil(C/2) with a non-empty path", &root, &e.with("M", &[1]), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "", &pr.path, 4) {
        inv(&mut f, &why, &root, &bytes, code);
    }
    inv(&mut f, "chunk root corrupted", &root, &e.with("chunk_root", &flip_last(&pr.chunk_root)), "ROOT_MISMATCH");
    let other_m = if pr.chunk_entries == 4 { 3 } else { 4 };
    inv(&mut f, "M changed (still between ceil(C/2) and C)", &root, &e.with("M", &[other_m]), "ROOT_MISMATCH");
    inv(
        &mut f,
        "proof from the previous version of the tree",
        &root,
        &t.c4_prev.tree.head().prove_chunk(6).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "valid proof checked against another tree's root", &t.c16.root(), &e.bytes(), "ROOT_MISMATCH");
    let single = t.one.tree.head().prove_chunk(0).unwrap();
    inv(
        &mut f,
        "single-chunk proof with the capacity changed",
        &t.one.root(),
        &ChunkProof { capacity: 3, ..single }.encode(),
        "ROOT_MISMATCH",
    );

    // An odd capacity, where ceil(C/2) and floor(C/2) differ.
    let c3 = &t.c3;
    let e3 = fields::chunk_proof(&c3.tree.head().prove_chunk(1).unwrap());
    inv(
        &mut f,
        "capacity 3: M = 1 (= floor(C/2)) with a non-empty path: the fill is ceil(C/2) = 2",
        &c3.root(),
        &e3.with("M", &[1]),
        "CHUNK_FILL",
    );
    inv(
        &mut f,
        "capacity 3: first sibling of 1 chunk with 1 entry (= floor(C/2)): the lower bound is ceil(C/2) entries per chunk",
        &c3.root(),
        &e3.with_all(&[("step0.chunks", &[1]), ("step0.entries", &[1])]),
        "COUNT_INVALID",
    );
    // Check orders.
    inv(
        &mut f,
        "M = 1 < ceil(C/2) and path length 49: the path length is checked before the fill",
        &root,
        &e.with_all(&[("M", &[1]), ("path_len", &varint(49))]),
        "PATH_TOO_LONG",
    );

    f.require(&[ALL_DECODE, PATH_CODES]);
    f
}
