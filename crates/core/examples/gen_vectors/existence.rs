//! `existence.json`: existence proofs (`0x01`).

use bpavl_core::hash::Hash;
use bpavl_core::verify_existence;
use bpavl_testkit::fields::{self, noncanonical, varint};

use crate::cases::{cat, flip_last, h, header_cases, n, obj, path_cases, s, VectorFile, ALL_DECODE, PATH_CODES};
use crate::trees::{Built, Trees};

pub fn existence(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "existence",
        "Existence proofs (format 0x01): verify_existence(root, key, value, proof). Valid cases return chunk_index, position and the tree's totals (chunks, entries); invalid cases fail with code.",
        "spec/proof-format.md, Existence proof (0x01)",
    );
    let valid = |f: &mut VectorFile, b: &Built, key: &[u8], about: &str| {
        let value = b.value_of(key);
        let proof = b.tree.head().prove_existence(key).unwrap().encode();
        let got = verify_existence(&b.root(), key, &value, &proof).unwrap();
        let (ci, pos) = b.locate(b.index_of(key));
        assert_eq!(
            (got.chunk_index, got.position, got.chunk_count, got.entry_count),
            (ci, pos, b.chunk_count(), b.entry_count())
        );
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("key", h(key)),
            ("value", h(&value)),
            ("proof", h(&proof)),
            ("chunk_index", n(ci)),
            ("position", n(pos as u64)),
            ("chunk_count", n(b.chunk_count())),
            ("entry_count", n(b.entry_count())),
        ]));
    };
    let c4 = &t.c4;
    valid(&mut f, &t.one, b"only", "single-chunk tree: M = 1, no in-chunk hashes, empty path, empty value");
    valid(&mut f, &t.five, b"c", "capacity 2");
    valid(&mut f, &t.c3, &t.c3.key(0), "capacity 3, first entry after removals");
    valid(&mut f, c4, &c4.key(0), "first entry of the tree");
    valid(&mut f, c4, &c4.key(59), "last entry of the tree");
    valid(&mut f, c4, &c4.key(29), "an entry in the middle");
    for i in [1usize, 5, 9] {
        let g = c4.chunk_start(i);
        valid(&mut f, c4, &c4.key(g), &format!("first entry of chunk {i}"));
        valid(&mut f, c4, &c4.key(g + c4.shape[i].1 - 1), &format!("last entry of chunk {i}"));
    }
    let c16 = &t.c16;
    valid(&mut f, c16, &[0x00], "the key 0x00 with an empty value (first entry)");
    valid(&mut f, c16, &[0x42], "a 1-byte key");
    valid(&mut f, c16, &[0xff; 1024], "a 1024-byte key (last entry)");
    valid(&mut f, c16, b"prefix", "a key whose value has 1000 bytes");
    valid(&mut f, c16, b"pref", "a key that is a prefix of the next key, empty value");
    let c256 = &t.c256;
    let big = (1..c256.shape.len()).find(|&i| c256.shape[i].1 > 140).expect("a chunk above 140 entries");
    let g = c256.chunk_start(big) + 140;
    valid(&mut f, c256, &c256.key(g), "capacity 256, position 140: two-byte varints for C, M and pos");
    valid(&mut f, &t.limits, b"big", "a value of 65536 bytes (the longest)");
    let c4096 = &t.c4096;
    valid(&mut f, c4096, &c4096.key(4096), "capacity 4096 (the largest): the last entry of a two-chunk tree");

    // Invalid cases, built from one valid proof in c4_sixty.
    let root = c4.root();
    // Position 1 of a full chunk (every position of M = 4 has 2 in-chunk hashes).
    let ci = (5..c4.shape.len()).find(|&i| c4.shape[i].1 == 4).expect("a full chunk");
    let g = c4.chunk_start(ci) + 1;
    let key = c4.key(g);
    let value = c4.value_of(&key);
    let pr = c4.tree.head().prove_existence(&key).unwrap();
    let e = fields::existence(&pr);
    let m = pr.witness.chunk_entries as u64;
    let inv =
        |f: &mut VectorFile, why: &str, root: &Hash, key: &[u8], value: &[u8], proof: &[u8], code: &'static str| {
            let r = verify_existence(root, key, value, proof);
            let fields = vec![("root", h(root)), ("key", h(key)), ("value", h(value)), ("proof", h(proof))];
            f.invalid(why, r, code, fields);
        };
    for (why, bytes, code) in header_cases(&e, 0x01, 4) {
        inv(&mut f, &why, &root, &key, &value, &bytes, code);
    }
    // Inputs are checked before the proof is decoded.
    inv(&mut f, "empty key", &root, b"", &value, &e.bytes(), "KEY_EMPTY");
    inv(&mut f, "empty key and an empty proof: inputs are checked first", &root, b"", &value, &[], "KEY_EMPTY");
    inv(&mut f, "key of 1025 bytes", &root, &[0x6b; 1025], &value, &e.bytes(), "KEY_TOO_LONG");
    inv(&mut f, "value of 65537 bytes", &root, &key, &vec![0x76; 65537], &e.bytes(), "VALUE_TOO_LONG");
    // M and pos.
    inv(&mut f, "M = 0", &root, &key, &value, &e.with("M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, &key, &value, &e.with("M", &varint(5)), "CHUNK_SIZE_INVALID");
    inv(
        &mut f,
        "M with a redundant zero group",
        &root,
        &key,
        &value,
        &e.with("M", &noncanonical(m)),
        "VARINT_NON_CANONICAL",
    );
    inv(&mut f, "pos = M", &root, &key, &value, &e.with("pos", &varint(m)), "POSITION_INVALID");
    inv(&mut f, "pos = 2^53 - 1", &root, &key, &value, &e.with("pos", &varint((1 << 53) - 1)), "POSITION_INVALID");
    inv(
        &mut f,
        "pos varint with 8 continuation bytes",
        &root,
        &key,
        &value,
        &e.with("pos", &[0xff; 8]),
        "VARINT_OVERFLOW",
    );
    inv(
        &mut f,
        "input ends inside the in-chunk hashes",
        &root,
        &key,
        &value,
        &cat(&[&e.upto("hashes"), &e.get("hashes")[..40]]),
        "TRUNCATED",
    );
    let mut under = pr.clone();
    under.witness.chunk_entries = 1;
    under.witness.position = 0;
    under.witness.inchunk.clear();
    inv(&mut f, "M = 1 < ceil(C/2) with a non-empty path", &root, &key, &value, &under.encode(), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "", &pr.witness.path, 4) {
        inv(&mut f, &why, &root, &key, &value, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(&mut f, "wrong value", &root, &key, b"value-x", &e.bytes(), "ROOT_MISMATCH");
    inv(&mut f, "empty value instead of the real one", &root, &key, b"", &e.bytes(), "ROOT_MISMATCH");
    inv(
        &mut f,
        "proof of a neighbouring key",
        &root,
        &key,
        &value,
        &c4.tree.head().prove_existence(&c4.key(g + 1)).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "in-chunk hash corrupted",
        &root,
        &key,
        &value,
        &e.with("hashes", &flip_last(e.get("hashes"))),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "pos changed to another position in the chunk",
        &root,
        &key,
        &value,
        &e.with("pos", &varint((pr.witness.position as u64 + 1) % m)),
        "ROOT_MISMATCH",
    );
    let single = fields::existence(&t.one.tree.head().prove_existence(b"only").unwrap());
    inv(
        &mut f,
        "single-chunk tree, capacity changed from 2 to 3",
        &t.one.root(),
        b"only",
        b"",
        &single.with("capacity", &[3]),
        "ROOT_MISMATCH",
    );
    let prev = t.c4_prev.tree.head().prove_existence(&key).unwrap().encode();
    inv(&mut f, "proof from the previous version of the tree", &root, &key, &value, &prev, "ROOT_MISMATCH");
    inv(
        &mut f,
        "valid proof checked against another tree's root",
        &t.c16.root(),
        &key,
        &value,
        &e.bytes(),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "the empty root", &t.empty.root(), &key, &value, &e.bytes(), "ROOT_MISMATCH");
    // Check orders.
    inv(
        &mut f,
        "empty key and a value of 65537 bytes: the key is checked before the value",
        &root,
        b"",
        &vec![0x76; 65537],
        &e.bytes(),
        "KEY_EMPTY",
    );
    inv(
        &mut f,
        "M = 1 < ceil(C/2) and path length 49: the path length is checked before the fill",
        &root,
        &key,
        &value,
        &fields::existence(&under).with("path_len", &varint(49)),
        "PATH_TOO_LONG",
    );

    f.require(&[ALL_DECODE, PATH_CODES, &["POSITION_INVALID", "KEY_EMPTY", "KEY_TOO_LONG", "VALUE_TOO_LONG"]]);
    f
}
