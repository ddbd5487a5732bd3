//! `absence.json`: absence proofs (`0x02`).

use bpavl_core::hash::Hash;
use bpavl_core::{verify_absence, AbsenceProof, Neighbour};
use bpavl_testkit::fields::{self, bytes_field, noncanonical, varint};

use crate::cases::{cat, flip_last, h, header_cases, obj, oh, path_cases, s, VectorFile, ALL_DECODE, PATH_CODES};
use crate::trees::{Built, Trees};

pub fn absence(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "absence",
        "Absence proofs (format 0x02): verify_absence(root, key, proof). Valid cases succeed (left_key / right_key name the neighbours the proof carries, for information); invalid cases fail with code.",
        "spec/proof-format.md, Absence proof (0x02)",
    );
    let valid = |f: &mut VectorFile, b: &Built, key: &[u8], about: &str| {
        let pr = b.tree.head().prove_absence(key).unwrap();
        let proof = pr.encode();
        verify_absence(&b.root(), key, &proof).unwrap();
        // Naive neighbours from the sorted entries.
        let left = b.entries.iter().rev().find(|(k, _)| k.as_slice() < key).map(|e| e.0.clone());
        let right = b.entries.iter().find(|(k, _)| k.as_slice() > key).map(|e| e.0.clone());
        assert_eq!(pr.left.as_ref().map(|x| x.key.clone()), left);
        assert_eq!(pr.right.as_ref().map(|x| x.key.clone()), right);
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("key", h(key)),
            ("proof", h(&proof)),
            ("left_key", oh(left.as_deref())),
            ("right_key", oh(right.as_deref())),
        ]));
    };
    let c4 = &t.c4;
    valid(&mut f, &t.empty, b"anything", "empty tree: no neighbours");
    valid(&mut f, &t.one, b"a", "single entry, key below it: right neighbour only");
    valid(&mut f, &t.one, b"z", "single entry, key above it: left neighbour only");
    valid(&mut f, &t.five, b"bb", "capacity 2, between two entries");
    valid(&mut f, &t.c3, b"c", "capacity 3, a removed key");
    valid(&mut f, c4, b"a", "below the first entry: right neighbour only");
    valid(&mut f, c4, b"key", "a proper prefix of every key: right neighbour only");
    valid(&mut f, c4, b"z", "above the last entry: left neighbour only");
    valid(&mut f, c4, b"key119", "just above the last entry key118: left neighbour only");
    valid(&mut f, c4, b"key061", "between two entries");
    for i in [2usize, 7] {
        let g = c4.chunk_start(i);
        let mut k = c4.key(g - 1);
        k.push(b'0');
        valid(&mut f, c4, &k, &format!("between the last entry of chunk {} and the first of chunk {i}", i - 1));
    }
    valid(&mut f, &t.c16, b"prefi", "between \"pref\" and \"prefix\"");
    valid(&mut f, &t.c16, b"prefix\x00\x00", "just above \"prefix\\0\"");
    valid(&mut f, &t.c16, &[0x00, 0x00], "just above the first key 0x00");
    valid(&mut f, &t.c16, &[0xff; 1000], "a prefix of the 1024-byte last key");
    valid(&mut f, &t.c256, b"w00300x", "capacity 256");
    valid(&mut f, &t.c4096, b"k2047x", "capacity 4096: between the two chunks");

    // Invalid cases around c4_sixty.
    let root = c4.root();
    // Entries g, g + 1, g + 2 in one full chunk.
    let ci = (2..c4.shape.len()).find(|&i| c4.shape[i].1 == 4).expect("a full chunk");
    let g = c4.chunk_start(ci) + 1;
    let mut key = c4.key(g);
    key.push(b'!'); // absent, between entries g and g + 1
    let pr = c4.tree.head().prove_absence(&key).unwrap();
    let e = fields::absence(&pr);
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, key: &[u8], proof: &[u8], code: &'static str| {
        let r = verify_absence(root, key, proof);
        f.invalid(why, r, code, vec![("root", h(root)), ("key", h(key)), ("proof", h(proof))]);
    };
    for (why, bytes, code) in header_cases(&e, 0x02, 4) {
        inv(&mut f, &why, &root, &key, &bytes, code);
    }
    inv(&mut f, "empty key", &root, b"", &e.bytes(), "KEY_EMPTY");
    inv(&mut f, "empty key and an empty proof: the key is checked first", &root, b"", &[], "KEY_EMPTY");
    inv(&mut f, "key of 1025 bytes", &root, &[0x6b; 1025], &e.bytes(), "KEY_TOO_LONG");
    // Flags.
    inv(&mut f, "flags bit 2 set", &root, &key, &e.with("flags", &[0x07]), "FLAGS_INVALID");
    inv(&mut f, "flags bit 7 set", &root, &key, &e.with("flags", &[0x83]), "FLAGS_INVALID");
    inv(&mut f, "flags 0xff", &root, &key, &e.with("flags", &[0xff]), "FLAGS_INVALID");
    inv(&mut f, "input ends after the flags", &root, &key, &e.upto("left.key"), "TRUNCATED");
    inv(
        &mut f,
        "flags say left only, but both neighbours follow",
        &root,
        &key,
        &e.with("flags", &[0x01]),
        "TRAILING_BYTES",
    );
    inv(&mut f, "flags say both, but only the left neighbour follows", &root, &key, &e.upto("right.key"), "TRUNCATED");
    inv(
        &mut f,
        "flags say none (the tree is not empty)",
        &root,
        &key,
        &cat(&[&e.upto("flags"), &[0]]),
        "ROOT_MISMATCH",
    );
    // Neighbour fields.
    inv(&mut f, "left neighbour key length 0", &root, &key, &e.with("left.key", &[0]), "KEY_EMPTY");
    inv(
        &mut f,
        "left neighbour key length 1025",
        &root,
        &key,
        &e.upto("left.key").into_iter().chain(varint(1025)).collect::<Vec<_>>(),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "right neighbour key length 1025, bytes present",
        &root,
        &key,
        &e.with("right.key", &bytes_field(&[0x6b; 1025])),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "left neighbour key length beyond the input",
        &root,
        &key,
        &cat(&[&e.upto("left.key"), &varint(1000), b"key"]),
        "TRUNCATED",
    );
    inv(
        &mut f,
        "left neighbour value length 65537",
        &root,
        &key,
        &cat(&[&e.upto("left.value"), &varint(65537)]),
        "VALUE_TOO_LONG",
    );
    inv(
        &mut f,
        "right neighbour value length with a redundant zero group",
        &root,
        &key,
        &e.with("right.value", &cat(&[&noncanonical(e.get("right.value")[0] as u64), &e.get("right.value")[1..]])),
        "VARINT_NON_CANONICAL",
    );
    let m = pr.left.as_ref().unwrap().witness.chunk_entries as u64;
    inv(&mut f, "left neighbour M = 0", &root, &key, &e.with("left.M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "right neighbour M = C + 1", &root, &key, &e.with("right.M", &[5]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "left neighbour pos = M", &root, &key, &e.with("left.pos", &varint(m)), "POSITION_INVALID");
    inv(&mut f, "right neighbour pos = M + 1", &root, &key, &e.with("right.pos", &varint(m + 1)), "POSITION_INVALID");
    let mut under = pr.clone();
    let w = &mut under.right.as_mut().unwrap().witness;
    w.chunk_entries = 1;
    w.position = 0;
    w.inchunk.clear();
    inv(&mut f, "right neighbour M = 1 < ceil(C/2) with a non-empty path", &root, &key, &under.encode(), "CHUNK_FILL");
    for (why, bytes, code) in path_cases(&e, "left.", &pr.left.as_ref().unwrap().witness.path, 4) {
        inv(&mut f, &why, &root, &key, &bytes, code);
    }
    for (why, bytes, code) in path_cases(&e, "right.", &pr.right.as_ref().unwrap().witness.path, 4) {
        inv(&mut f, &why, &root, &key, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(
        &mut f,
        "left neighbour value corrupted",
        &root,
        &key,
        &e.with("left.value", &bytes_field(b"value-x")),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "right neighbour key changed (still above the key)",
        &root,
        &key,
        &e.with("right.key", &bytes_field(b"key999")),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "left neighbour in-chunk hash corrupted",
        &root,
        &key,
        &e.with("left.hashes", &flip_last(e.get("left.hashes"))),
        "ROOT_MISMATCH",
    );
    let prev = t.c4_prev.tree.head().prove_absence(&key).unwrap().encode();
    inv(&mut f, "proof from the previous version of the tree", &root, &key, &prev, "ROOT_MISMATCH");
    inv(&mut f, "valid proof checked against another tree's root", &t.c16.root(), &key, &e.bytes(), "ROOT_MISMATCH");
    let empty3 = AbsenceProof { capacity: 3, left: None, right: None }.encode();
    inv(
        &mut f,
        "empty proof of capacity 3 against the capacity-2 empty root",
        &t.empty.root(),
        b"k",
        &empty3,
        "ROOT_MISMATCH",
    );
    let bad_right =
        AbsenceProof { right: Some(Neighbour { value: b"bad".to_vec(), ..pr.right.clone().unwrap() }), ..pr.clone() };
    inv(
        &mut f,
        "left neighbour valid, right neighbour value corrupted",
        &root,
        &key,
        &bad_right.encode(),
        "ROOT_MISMATCH",
    );
    // Neighbours that verify, but do not prove absence.
    let both = |l: usize, r: usize| {
        AbsenceProof { capacity: 4, left: Some(c4.neighbour(l)), right: Some(c4.neighbour(r)) }.encode()
    };
    let left_only = |l: usize| AbsenceProof { capacity: 4, left: Some(c4.neighbour(l)), right: None }.encode();
    let right_only = |r: usize| AbsenceProof { capacity: 4, left: None, right: Some(c4.neighbour(r)) }.encode();
    inv(
        &mut f,
        "present key between non-adjacent neighbours (same chunk)",
        &root,
        &c4.key(g + 1),
        &both(g, g + 2),
        "ABSENCE_INVALID",
    );
    let b7 = c4.chunk_start(7);
    inv(
        &mut f,
        "present key between non-adjacent neighbours (across chunks)",
        &root,
        &c4.key(b7),
        &both(b7 - 1, b7 + 1),
        "ABSENCE_INVALID",
    );
    // A key just above the entry at global index g, absent from c4_sixty.
    let above = |g: usize| {
        let mut k = c4.key(g);
        k.push(b'0');
        k
    };
    let k2 = above(b7);
    inv(
        &mut f,
        "absent key between neighbours two chunks apart",
        &root,
        &k2,
        &both(b7 - 1, b7 + c4.shape[7].1),
        "ABSENCE_INVALID",
    );
    inv(&mut f, "key below the left neighbour", &root, b"key000", &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "key above the right neighbour", &root, b"z", &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "key equal to the left neighbour", &root, &c4.key(g), &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "key equal to the right neighbour", &root, &c4.key(g + 1), &e.bytes(), "ABSENCE_INVALID");
    inv(&mut f, "neighbours swapped", &root, &key, &both(g + 1, g), "ABSENCE_INVALID");
    inv(&mut f, "left neighbour only, but it is not the last entry", &root, &key, &left_only(g), "ABSENCE_INVALID");
    inv(
        &mut f,
        "right neighbour only, but it is not the first entry",
        &root,
        &key,
        &right_only(g + 1),
        "ABSENCE_INVALID",
    );
    let kb = above(b7 - 1); // between chunks 6 and 7
    inv(
        &mut f,
        "left neighbour only, last entry of a chunk that is not the last",
        &root,
        &kb,
        &left_only(b7 - 1),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "right neighbour only, first entry of a chunk that is not the first",
        &root,
        &kb,
        &right_only(b7),
        "ABSENCE_INVALID",
    );
    // Each position rule of the edges and of adjacency alone: the chunk is
    // right, the position is not (or the other way round).
    let last = c4.entries.len() - 1;
    inv(
        &mut f,
        "left neighbour only, in the last chunk but at pos M - 2 (not the last entry)",
        &root,
        &above(last - 1),
        &left_only(last - 1),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "right neighbour only, in chunk 0 but at pos 1 (not the first entry)",
        &root,
        &above(0),
        &right_only(1),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "across chunks: left at pos M - 2 of chunk 6, right at pos 0 of chunk 7 (only the left position is wrong)",
        &root,
        &above(b7 - 2),
        &both(b7 - 2, b7),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "across chunks: left at pos M - 1 of chunk 6, right at pos 1 of chunk 7 (only the right position is wrong)",
        &root,
        &above(b7 - 1),
        &both(b7 - 1, b7 + 1),
        "ABSENCE_INVALID",
    );
    // Check orders.
    inv(
        &mut f,
        "right neighbour M = 1 < ceil(C/2) and path length 49: the path length is checked before the fill",
        &root,
        &key,
        &fields::absence(&under).with("right.path_len", &varint(49)),
        "PATH_TOO_LONG",
    );

    f.require(&[
        ALL_DECODE,
        PATH_CODES,
        &["POSITION_INVALID", "KEY_EMPTY", "KEY_TOO_LONG", "VALUE_TOO_LONG", "FLAGS_INVALID", "ABSENCE_INVALID"],
    ]);
    f
}
