//! `multiproof.json`: multiproofs (`0x0D`). The format is recursive, so
//! invalid cases are made by editing the decoded proof and encoding it
//! again, or by editing bytes whose offset is fixed (the header, the top tag).

use bpavl_core::hash::Hash;
use bpavl_core::{verify_multiproof, MultiNode, Multiproof};
use bpavl_testkit::fields::noncanonical;
use serde_json::Value;

use crate::cases::{cat, h, n, obj, s, VectorFile, ALL_DECODE};
use crate::trees::{Built, Trees};

fn hex_list(keys: &[Vec<u8>]) -> Value {
    Value::Array(keys.iter().map(|k| h(k)).collect())
}

fn refs(keys: &[Vec<u8>]) -> Vec<&[u8]> {
    keys.iter().map(Vec::as_slice).collect()
}

/// The first revealed chunk in pre-order, and the open node right above it.
fn first_revealed(node: &mut MultiNode) -> Option<&mut MultiNode> {
    match node {
        MultiNode::Revealed(_) => Some(node),
        MultiNode::Open { left, right, .. } => first_revealed(left).or_else(|| first_revealed(right)),
        MultiNode::Opaque { .. } => None,
    }
}

fn top(p: &mut Multiproof) -> &mut MultiNode {
    p.top.as_mut().expect("non-empty")
}

fn first_opaque(node: &mut MultiNode) -> Option<&mut MultiNode> {
    match node {
        MultiNode::Opaque { .. } => Some(node),
        MultiNode::Open { left, right, .. } => first_opaque(left).or_else(|| first_opaque(right)),
        MultiNode::Revealed(_) => None,
    }
}

pub fn multiproof(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "multiproof",
        "Multiproofs (format 0x0D): verify_multiproof(root, keys, proof). Valid cases return values (per key: its value, or null when absent) and the tree's totals (chunk_count, entry_count); invalid cases fail with code.",
        "spec/proof-format.md, Multiproof (0x0D)",
    );
    let valid = |f: &mut VectorFile, b: &Built, keys: &[Vec<u8>], about: &str| {
        let proof = b.tree.head().prove_multi(&refs(keys)).unwrap().encode();
        let got = verify_multiproof(&b.root(), &refs(keys), &proof).unwrap();
        let naive: Vec<Option<Vec<u8>>> =
            keys.iter().map(|k| b.entries.iter().find(|(e, _)| e == k).map(|e| e.1.clone())).collect();
        assert_eq!(got.values, naive);
        assert_eq!((got.chunk_count, got.entry_count), (b.chunk_count(), b.entry_count()));
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("keys", hex_list(keys)),
            ("proof", h(&proof)),
            ("values", Value::Array(naive.iter().map(|v| v.as_deref().map_or(Value::Null, h)).collect())),
            ("chunk_count", n(b.chunk_count())),
            ("entry_count", n(b.entry_count())),
        ]));
    };
    let k = |x: &str| x.as_bytes().to_vec();
    let c4 = &t.c4;
    valid(&mut f, &t.empty, &[k("a"), k("b")], "empty tree: every key absent, no entry revealed");
    valid(&mut f, &t.one, &[k("only")], "single-chunk tree, the one key: the top is the revealed chunk");
    valid(&mut f, &t.one, &[k("a"), k("only"), k("z")], "single-chunk tree: below, at and above the one entry");
    valid(&mut f, &t.five, &[k("a"), k("bb"), k("e")], "capacity 2");
    valid(&mut f, c4, &[k("key010")], "one present key");
    valid(&mut f, c4, &[k("key011")], "one absent key: both neighbours revealed");
    valid(&mut f, c4, &[k("key010"), k("key011")], "a present key and an absent one sharing the revealed entry key010");
    valid(&mut f, c4, &[k("a"), k("z")], "below the first and above the last entry: the tree's two edges");
    valid(
        &mut f,
        c4,
        &[k("key000"), k("key020"), k("key021"), k("key070"), k("key117"), k("key118")],
        "six keys across the tree, sharing paths",
    );
    let every: Vec<Vec<u8>> = (0..120).map(|i| format!("key{i:03}").into_bytes()).collect();
    valid(&mut f, c4, &every, "every key from key000 to key119: every entry revealed, nothing opaque");
    valid(&mut f, &t.c16, &[k("pref"), k("prefi"), k("prefix")], "keys that are prefixes of each other");
    valid(&mut f, &t.c256, &[k("w00100"), k("w00300x"), k("w00600")], "capacity 256");
    valid(&mut f, &t.c4096, &[k("k0000"), k("k4096")], "capacity 4096: one key in each of the two chunks");
    let limits: Vec<Vec<u8>> = t.limits.entries.iter().map(|e| e.0.clone()).collect();
    valid(&mut f, &t.limits, &limits, "the longest key and value");

    // Invalid cases around a proof of four c4 keys.
    let root = c4.root();
    let asked = [k("key010"), k("key011"), k("key070"), k("z")];
    let keys = refs(&asked);
    let good = c4.tree.head().prove_multi(&keys).unwrap();
    let bytes = good.encode();
    let inv = |f: &mut VectorFile, why: &str, root: &Hash, keys: &[&[u8]], proof: &[u8], code: &'static str| {
        let r = verify_multiproof(root, keys, proof);
        let list: Vec<Value> = keys.iter().map(|k| h(k)).collect();
        f.invalid(why, r, code, vec![("root", h(root)), ("keys", Value::Array(list)), ("proof", h(proof))]);
    };
    let edit = |change: &dyn Fn(&mut Multiproof)| {
        let mut p = good.clone();
        change(&mut p);
        p.encode()
    };

    // Header and top tag (offsets: format 0, capacity 1, top tag 2).
    inv(&mut f, "empty proof", &root, &keys, &[], "TRUNCATED");
    inv(&mut f, "format byte 0x03 (a range proof)", &root, &keys, &cat(&[&[0x03], &bytes[1..]]), "FORMAT_UNSUPPORTED");
    inv(&mut f, "capacity 1", &root, &keys, &cat(&[&[0x0D, 0x01], &bytes[2..]]), "CAPACITY_INVALID");
    inv(&mut f, "capacity 4097", &root, &keys, &cat(&[&[0x0D, 0x81, 0x20], &bytes[2..]]), "CAPACITY_INVALID");
    inv(
        &mut f,
        "capacity varint with a redundant zero group",
        &root,
        &keys,
        &cat(&[&[0x0D], &noncanonical(4), &bytes[2..]]),
        "VARINT_NON_CANONICAL",
    );
    inv(
        &mut f,
        "capacity varint of 9 bytes",
        &root,
        &keys,
        &cat(&[&[0x0D], &[0x84, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]]),
        "VARINT_OVERFLOW",
    );
    inv(&mut f, "cut in the middle", &root, &keys, &bytes[..bytes.len() / 2], "TRUNCATED");
    inv(&mut f, "cut by one byte", &root, &keys, &bytes[..bytes.len() - 1], "TRUNCATED");
    inv(&mut f, "one byte too many", &root, &keys, &cat(&[&bytes, &[0]]), "TRAILING_BYTES");
    inv(
        &mut f,
        "top tag 0 (opaque at the top)",
        &root,
        &keys,
        &cat(&[&bytes[..2], &[0], &bytes[3..]]),
        "FLAGS_INVALID",
    );
    inv(&mut f, "top tag 4 (unknown)", &root, &keys, &cat(&[&bytes[..2], &[4], &bytes[3..]]), "FLAGS_INVALID");
    inv(
        &mut f,
        "top tag 3 (the empty tree) with the rest left over",
        &root,
        &keys,
        &cat(&[&bytes[..2], &[3], &bytes[3..]]),
        "TRAILING_BYTES",
    );
    inv(
        &mut f,
        "the empty tree's proof against this root",
        &root,
        &keys,
        &Multiproof { capacity: 4, top: None }.encode(),
        "ROOT_MISMATCH",
    );

    // Open nodes.
    inv(
        &mut f,
        "top height 0",
        &root,
        &keys,
        &edit(&|p| {
            if let MultiNode::Open { height, .. } = top(p) {
                *height = 0
            }
        }),
        "HEIGHT_INVALID",
    );
    inv(
        &mut f,
        "top height 49",
        &root,
        &keys,
        &edit(&|p| {
            if let MultiNode::Open { height, .. } = top(p) {
                *height = 49
            }
        }),
        "HEIGHT_INVALID",
    );
    // The top's left child (open) given the height `child(parent height)`.
    let left_child_height = |child: &dyn Fn(u8) -> u8| {
        edit(&|p| {
            let MultiNode::Open { height: parent, left, .. } = top(p) else { panic!("an open top") };
            let parent = *parent;
            if let MultiNode::Open { height, .. } = &mut **left {
                *height = child(parent)
            }
        })
    };
    inv(&mut f, "a child as high as its parent", &root, &keys, &left_child_height(&|h| h), "HEIGHT_INVALID");
    inv(&mut f, "a child 3 below its parent", &root, &keys, &left_child_height(&|h| h - 3), "HEIGHT_INVALID");
    inv(
        &mut f,
        "an unknown tag below the top",
        &root,
        &keys,
        &{
            let mut b = bytes.clone();
            // The top is open (tag 1, height), so its left child's tag is at 4.
            b[4] = 7;
            b
        },
        "FLAGS_INVALID",
    );
    inv(
        &mut f,
        "the empty-tree tag below the top",
        &root,
        &keys,
        &{
            let mut b = bytes.clone();
            b[4] = 3;
            b
        },
        "FLAGS_INVALID",
    );
    inv(
        &mut f,
        "a revealed chunk below an open node of height 3",
        &root,
        &keys,
        &edit(&|p| {
            // The top's left child is open, of height 3 (valid under the top's 5); its left subtree
            // becomes a revealed chunk, which breaks only the chunk's rule: a parent above height 2.
            let chunk = first_revealed(top(p)).expect("a revealed chunk").clone();
            let MultiNode::Open { height: 5, left, .. } = top(p) else { panic!("an open top of height 5") };
            let MultiNode::Open { height: 3, left, .. } = &mut **left else { panic!("an open left child of height 3") };
            **left = chunk;
        }),
        "HEIGHT_INVALID",
    );
    let one_key = c4.tree.head().prove_multi(&[b"key010".as_slice()]).unwrap();
    let both_opaque = {
        let mut p = one_key.clone();
        let node = first_revealed(p.top.as_mut().unwrap()).unwrap();
        let MultiNode::Revealed(c) = &*node else { panic!() };
        let m = c.chunk_entries as u64;
        *node = MultiNode::Opaque { chunks: 1, entries: m, hash: [7; 32] };
        p.encode()
    };
    inv(
        &mut f,
        "an open node whose children are both opaque",
        &root,
        &[b"key010".as_slice()],
        &both_opaque,
        "MULTIPROOF_INVALID",
    );

    // Opaque nodes.
    let opaque = |change: &dyn Fn(&mut u64, &mut u64, &mut Hash)| {
        edit(&|p| {
            if let Some(MultiNode::Opaque { chunks, entries, hash }) = first_opaque(top(p)) {
                change(chunks, entries, hash)
            }
        })
    };
    // Entries 0 too, so that chunks = 0 is the only rule broken (entries ≤ chunks·C holds).
    inv(
        &mut f,
        "opaque chunks 0 (and entries 0)",
        &root,
        &keys,
        &opaque(&|c, e, _| {
            *c = 0;
            *e = 0;
        }),
        "COUNT_INVALID",
    );
    inv(
        &mut f,
        "opaque entries below chunks * ceil(C/2)",
        &root,
        &keys,
        &opaque(&|c, e, _| *e = 2 * *c - 1),
        "COUNT_INVALID",
    );
    inv(&mut f, "opaque entries above chunks * C", &root, &keys, &opaque(&|c, e, _| *e = 4 * *c + 1), "COUNT_INVALID");
    inv(
        &mut f,
        "opaque totals above 2^32 - 1 chunks",
        &root,
        &keys,
        &opaque(&|c, e, _| {
            *c = 1 << 32;
            *e = 2 << 32;
        }),
        "COUNT_INVALID",
    );
    inv(&mut f, "opaque hash corrupted", &root, &keys, &opaque(&|_, _, hash| hash[31] ^= 1), "ROOT_MISMATCH");
    inv(
        &mut f,
        "opaque counts changed within their bounds",
        &root,
        &keys,
        &opaque(&|_, e, _| *e += 1),
        "ROOT_MISMATCH",
    );

    // Revealed chunks.
    let revealed = |change: &dyn Fn(&mut bpavl_core::RevealedChunk)| {
        edit(&|p| {
            if let Some(MultiNode::Revealed(c)) = first_revealed(top(p)) {
                change(c)
            }
        })
    };
    inv(&mut f, "M = 0", &root, &keys, &revealed(&|c| c.chunk_entries = 0), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = C + 1", &root, &keys, &revealed(&|c| c.chunk_entries = 5), "CHUNK_SIZE_INVALID");
    inv(&mut f, "M = 1 < ceil(C/2) below the top", &root, &keys, &revealed(&|c| c.chunk_entries = 1), "CHUNK_FILL");
    inv(
        &mut f,
        "no revealed entry in a revealed chunk",
        &root,
        &keys,
        &revealed(&|c| c.entries.clear()),
        "POSITION_INVALID",
    );
    inv(&mut f, "a position = M", &root, &keys, &revealed(&|c| c.entries[0].0 = c.chunk_entries), "POSITION_INVALID");
    inv(
        &mut f,
        "positions not increasing",
        &root,
        &keys,
        &revealed(&|c| {
            let first = c.entries[0].clone();
            c.entries.push(first);
        }),
        "POSITION_INVALID",
    );
    inv(&mut f, "a revealed key of length 0", &root, &keys, &revealed(&|c| c.entries[0].1.clear()), "KEY_EMPTY");
    inv(
        &mut f,
        "a revealed key of 1025 bytes",
        &root,
        &keys,
        &revealed(&|c| c.entries[0].1 = vec![0x6b; 1025]),
        "KEY_TOO_LONG",
    );
    inv(
        &mut f,
        "a revealed value of 65537 bytes",
        &root,
        &keys,
        &revealed(&|c| c.entries[0].2 = vec![0; 65537]),
        "VALUE_TOO_LONG",
    );
    inv(
        &mut f,
        "a revealed key above the next revealed key",
        &root,
        &keys,
        &revealed(&|c| c.entries[0].1 = b"key999".to_vec()),
        "KEYS_NOT_SORTED",
    );
    inv(&mut f, "a revealed value corrupted", &root, &keys, &revealed(&|c| c.entries[0].2.push(b'!')), "ROOT_MISMATCH");
    inv(&mut f, "an in-chunk hash corrupted", &root, &keys, &revealed(&|c| c.inchunk[0][0] ^= 1), "ROOT_MISMATCH");

    // The query.
    inv(&mut f, "no key", &root, &[], &bytes, "QUERY_INVALID");
    inv(&mut f, "an empty key", &root, &[b"".as_slice()], &bytes, "KEY_EMPTY");
    inv(&mut f, "a key of 1025 bytes", &root, &[[0x6b; 1025].as_slice()], &bytes, "KEY_TOO_LONG");
    inv(&mut f, "keys not increasing", &root, &[b"key070".as_slice(), b"key010"], &bytes, "KEYS_NOT_SORTED");
    inv(&mut f, "a repeated key", &root, &[b"key010".as_slice(), b"key010"], &bytes, "KEYS_NOT_SORTED");
    inv(&mut f, "another tree's root", &t.c16.root(), &keys, &bytes, "ROOT_MISMATCH");
    let prev = c4.tree.head().prove_multi(&keys).unwrap().encode();
    inv(&mut f, "checked against the previous version's root", &t.c4_prev.root(), &keys, &prev, "ROOT_MISMATCH");
    inv(
        &mut f,
        "an absent key whose right neighbour is not revealed (key012 is; key013 lies between key012 and key014)",
        &root,
        &[b"key010".as_slice(), b"key013", b"key070", b"z"],
        &bytes,
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "an absent key with only a left neighbour that is not the last entry",
        &root,
        &[b"key010".as_slice(), b"key0100"],
        &one_key.encode(),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "an absent key with only a right neighbour that is not the first entry",
        &root,
        &[b"key009".as_slice(), b"key010"],
        &one_key.encode(),
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "a present key asked as absent: key070 is revealed, but the query asks key069 and key071 around it",
        &root,
        &[b"key010".as_slice(), b"key011", b"key069", b"z"],
        &bytes,
        "ABSENCE_INVALID",
    );
    inv(
        &mut f,
        "a revealed entry no key needs (key070, when only key010, key011 and z are asked)",
        &root,
        &[b"key010".as_slice(), b"key011", b"z"],
        &bytes,
        "MULTIPROOF_INVALID",
    );

    f.require(&[
        ALL_DECODE,
        &[
            "HEIGHT_INVALID",
            "COUNT_INVALID",
            "FLAGS_INVALID",
            "CHUNK_SIZE_INVALID",
            "CHUNK_FILL",
            "POSITION_INVALID",
            "KEY_EMPTY",
            "KEY_TOO_LONG",
            "VALUE_TOO_LONG",
            "KEYS_NOT_SORTED",
            "ROOT_MISMATCH",
            "ABSENCE_INVALID",
            "QUERY_INVALID",
            "MULTIPROOF_INVALID",
        ],
    ]);
    f
}
