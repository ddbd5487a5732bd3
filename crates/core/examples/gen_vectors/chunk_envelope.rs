//! `chunk_envelope.json`: chunk envelopes (`0x05`) and `verify_chunk`.

use bpavl_core::hash::Hash;
use bpavl_core::{verify_chunk, ChunkEnvelope, Folded};
use bpavl_testkit::fields::{self, bytes_field, noncanonical, varint};
use serde_json::Value;

use crate::cases::{cat, h, header_cases, kv, n, obj, path_cases, s, VectorFile, ALL_DECODE, PATH_CODES};
use crate::forged;
use crate::trees::Trees;

pub fn chunk_envelope(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "chunk_envelope",
        "Chunk envelopes (format 0x05): verify_chunk(root, index, envelope). Valid cases return the capacity, key_height, the tree's totals (chunks, entries) and the chunk's entries (chunk_entries); invalid cases fail with code.",
        "spec/chunk-format.md, Encoding (0x05) and Verification",
    );
    let valid = |f: &mut VectorFile, tree: Value, env: &ChunkEnvelope, want: Folded| {
        let bytes = env.encode();
        let got = verify_chunk(&want.root, want.index, &bytes).unwrap();
        let got_entries: Vec<_> = got.entries().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(
            (got.index(), got.chunk_count(), got.entry_count(), got.capacity(), got.key_height(), &got_entries),
            (want.index, want.chunk_count, want.entry_count, env.capacity, want.key_height, &env.entries)
        );
        f.valid.push(obj(vec![
            ("tree", tree),
            ("root", h(&want.root)),
            ("index", n(want.index)),
            ("envelope", h(&bytes)),
            ("capacity", n(env.capacity as u64)),
            ("key_height", n(want.key_height as u64)),
            ("chunk_count", n(want.chunk_count)),
            ("entry_count", n(want.entry_count)),
            ("chunk_entries", kv(&env.entries)),
        ]));
    };
    for b in [&t.one, &t.five, &t.c3, &t.c4, &t.c16, &t.c256, &t.c4096, &t.limits] {
        for i in 0..b.chunk_count() {
            let env = b.tree.head().export_chunk(i).unwrap();
            assert_eq!(env.encode(), b.tree.head().export_chunk_bytes(i).unwrap());
            let g = b.chunk_start(i as usize);
            assert_eq!(env.entries, b.entries[g..g + b.shape[i as usize].1], "the chunk cuts the sorted entries");
            valid(&mut f, s(b.name), &env, b.folded(i));
        }
    }
    let (deep, folded) = forged::long_path();
    valid(&mut f, Value::Null, &deep, folded);
    let c4 = &t.c4;
    let root = c4.root();
    let idx = (1..c4.chunk_count())
        .find(|&i| c4.shape[i as usize].1 == 4 && c4.shape[i as usize].0 >= 2)
        .expect("a full chunk with key-height >= 2");
    let env = c4.tree.head().export_chunk(idx).unwrap();
    let e = fields::envelope(&env);
    let kh = env.key_height;
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, index: u64, bytes: &[u8], code: &'static str| {
        let r = verify_chunk(root, index, bytes);
        f.invalid(
            why,
            r.map(|v| v.index()),
            code,
            vec![("root", h(root)), ("index", n(index)), ("envelope", h(bytes))],
        );
    };
    for (why, bytes, code) in header_cases(&e, 0x05, 4) {
        inv(&mut f, &why, &root, idx, &bytes, code);
    }
    inv(&mut f, "key_height 49", &root, idx, &e.with("key_height", &[49]), "HEIGHT_INVALID");
    inv(&mut f, "key_height 0xff", &root, idx, &e.with("key_height", &[0xff]), "HEIGHT_INVALID");
    inv(&mut f, "input ends after the key_height", &root, idx, &e.upto("M"), "TRUNCATED");
    inv(&mut f, "M = 0", &root, idx, &e.with("M", &[0]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, idx, &e.with("M", &[5]), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M with a redundant zero group", &root, idx, &e.with("M", &noncanonical(4)), "VARINT_NON_CANONICAL");
    inv(&mut f, "first key of length 0", &root, idx, &e.with("key0", &[0]), "KEY_EMPTY");
    inv(
        &mut f,
        "second key of length 1025, bytes present",
        &root,
        idx,
        &e.with("key1", &bytes_field(&[0x6b; 1025])),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "key length varint with 8 continuation bytes",
        &root,
        idx,
        &e.with("key1", &[0xff; 8]),
        "VARINT_OVERFLOW",
    );
    inv(
        &mut f,
        "input ends inside the third key",
        &root,
        idx,
        &cat(&[&e.upto("key2"), &e.get("key2")[..3]]),
        "TRUNCATED",
    );
    inv(
        &mut f,
        "third value of length 65537",
        &root,
        idx,
        &cat(&[&e.upto("value2"), &varint(65537)]),
        "VALUE_TOO_LONG",
    );
    inv(
        &mut f,
        "value length with a redundant zero group",
        &root,
        idx,
        &e.with("value0", &cat(&[&noncanonical(e.get("value0")[0] as u64), &e.get("value0")[1..]])),
        "VARINT_NON_CANONICAL",
    );
    let swapped = {
        let mut x = env.clone();
        x.entries.swap(1, 2);
        x.encode()
    };
    inv(&mut f, "second and third entries swapped", &root, idx, &swapped, "KEYS_NOT_SORTED");
    let dup = e.with("key1", e.get("key0"));
    inv(&mut f, "second key equal to the first", &root, idx, &dup, "KEYS_NOT_SORTED");
    let dup_long_value = cat(&[&e.upto("key1"), e.get("key0"), &varint(65537)]);
    inv(
        &mut f,
        "second key equal to the first, then a value of length 65537: the key order is checked before the value",
        &root,
        idx,
        &dup_long_value,
        "KEYS_NOT_SORTED",
    );
    let mut under = env.clone();
    under.entries.truncate(1);
    inv(
        &mut f,
        "only the first entry kept (M = 1 < ceil(C/2)), path unchanged",
        &root,
        idx,
        &under.encode(),
        "CHUNK_FILL",
    );
    for (why, bytes, code) in path_cases(&e, "", &env.path, 4) {
        inv(&mut f, &why, &root, idx, &bytes, code);
    }
    // Decodes, but does not hash to the root.
    inv(&mut f, "a value corrupted", &root, idx, &e.with("value1", &bytes_field(b"value-x")), "ROOT_MISMATCH");
    let mut k3 = env.entries[3].0.clone();
    k3.push(b'x');
    inv(&mut f, "the last key changed (still sorted)", &root, idx, &e.with("key3", &bytes_field(&k3)), "ROOT_MISMATCH");
    let mut fewer = env.clone();
    fewer.entries.pop();
    inv(&mut f, "last entry dropped (M = 3, still >= ceil(C/2))", &root, idx, &fewer.encode(), "ROOT_MISMATCH");
    inv(
        &mut f,
        "the same chunk from the previous version of the tree",
        &root,
        idx,
        &t.c4_prev.tree.head().export_chunk(idx).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(
        &mut f,
        "a chunk of another tree",
        &root,
        idx,
        &t.c16.tree.head().export_chunk(1).unwrap().encode(),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "valid envelope checked against another tree's root", &t.c16.root(), idx, &e.bytes(), "ROOT_MISMATCH");
    inv(
        &mut f,
        "corrupted value and wrong index: the root is checked first",
        &root,
        idx + 1,
        &e.with("value1", &bytes_field(b"value-x")),
        "ROOT_MISMATCH",
    );
    inv(&mut f, "valid chunk, expected index one higher", &root, idx + 1, &e.bytes(), "CHUNK_INDEX_MISMATCH");
    inv(&mut f, "valid chunk, expected index one lower", &root, idx - 1, &e.bytes(), "CHUNK_INDEX_MISMATCH");
    inv(
        &mut f,
        "chunk 0, expected index 1",
        &root,
        1,
        &c4.tree.head().export_chunk(0).unwrap().encode(),
        "CHUNK_INDEX_MISMATCH",
    );
    inv(&mut f, "valid chunk, expected index 2^32", &root, 1 << 32, &e.bytes(), "CHUNK_INDEX_MISMATCH");
    inv(
        &mut f,
        "wrong index and wrong key_height: the index is checked first",
        &root,
        idx + 1,
        &e.with("key_height", &[kh + 1]),
        "CHUNK_INDEX_MISMATCH",
    );
    inv(
        &mut f,
        "key_height byte one higher, nothing else changed",
        &root,
        idx,
        &e.with("key_height", &[kh + 1]),
        "KEY_HEIGHT_MISMATCH",
    );
    inv(
        &mut f,
        "key_height byte one lower, nothing else changed",
        &root,
        idx,
        &e.with("key_height", &[kh - 1]),
        "KEY_HEIGHT_MISMATCH",
    );
    inv(
        &mut f,
        "key_height byte 48, nothing else changed",
        &root,
        idx,
        &e.with("key_height", &[48]),
        "KEY_HEIGHT_MISMATCH",
    );
    let first = fields::envelope(&c4.tree.head().export_chunk(0).unwrap());
    inv(
        &mut f,
        "chunk 0 with key_height 1 instead of 0",
        &root,
        0,
        &first.with("key_height", &[1]),
        "KEY_HEIGHT_MISMATCH",
    );
    let single = fields::envelope(&t.one.tree.head().export_chunk(0).unwrap());
    inv(
        &mut f,
        "single-chunk tree, key_height 1 instead of 0",
        &t.one.root(),
        0,
        &single.with("key_height", &[1]),
        "KEY_HEIGHT_MISMATCH",
    );

    // An odd capacity, where ceil(C/2) and floor(C/2) differ.
    let c3 = &t.c3;
    let mut under3 = c3.tree.head().export_chunk(1).unwrap();
    under3.entries.truncate(1);
    inv(
        &mut f,
        "capacity 3: only the first entry kept (M = 1 = floor(C/2)), path unchanged: the fill is ceil(C/2) = 2",
        &c3.root(),
        1,
        &under3.encode(),
        "CHUNK_FILL",
    );
    // Check orders.
    inv(
        &mut f,
        "only the first entry kept (M = 1 < ceil(C/2)) and path length 49: the path length is checked before the fill",
        &root,
        idx,
        &fields::envelope(&under).with("path_len", &varint(49)),
        "PATH_TOO_LONG",
    );
    inv(
        &mut f,
        "key_height 49 and M = 0: the key-height is checked before M",
        &root,
        idx,
        &e.with_all(&[("key_height", &[49]), ("M", &[0])]),
        "HEIGHT_INVALID",
    );

    f.require(&[
        ALL_DECODE,
        PATH_CODES,
        &[
            "KEY_EMPTY",
            "KEY_TOO_LONG",
            "VALUE_TOO_LONG",
            "KEYS_NOT_SORTED",
            "CHUNK_INDEX_MISMATCH",
            "KEY_HEIGHT_MISMATCH",
        ],
    ]);
    f
}
