//! `catchup.json`: the catch-up pieces (`spec/catchup.md`): subtrees
//! (`0x0E`), leaves (`0x0F`) and entries, each checked against what the
//! client trusts (`verify_subtree`, `verify_leaves`, `verify_entries`).

use bpavl_core::codec::put_varint;
use bpavl_core::hash::Hash;
use bpavl_core::{positions_bitmap, verify_entries, verify_leaves, verify_subtree, TreePath, VerifiedSubtree};
use bpavl_testkit::fields::noncanonical;
use serde_json::Value;

use crate::cases::{cat, flip_last, h, n, obj, s, VectorFile};
use crate::trees::{Built, Trees};

const MAX: usize = 8 << 20;

/// A path given as its turns (`true`: right).
fn path_of(turns: &[bool]) -> TreePath {
    turns.iter().fold(TreePath::top(), |p, &r| p.child(r))
}

/// The hash the client knows for the inner node or chunk at `path` (the
/// parent's child hash), read from the tree's own subtrees.
fn hash_at(b: &Built, path: &TreePath) -> Hash {
    let turns = path.turns();
    let parent = path_of(&turns[..turns.len() - 1]);
    let sub = verify_subtree(&parent, &anchor(b, &parent), 1, b.capacity, &subtree(b, &parent, 1)).unwrap();
    let node = &sub.nodes[0].1;
    if *turns.last().unwrap() {
        node.right
    } else {
        node.left
    }
}

fn anchor(b: &Built, path: &TreePath) -> Hash {
    if path.depth() == 0 {
        b.root()
    } else {
        hash_at(b, path)
    }
}

fn subtree(b: &Built, path: &TreePath, levels: u8) -> Vec<u8> {
    b.tree.head().export_subtree(path, levels, MAX).unwrap()
}

fn nodes_json(sub: &VerifiedSubtree) -> Value {
    sub.nodes
        .iter()
        .map(|(p, w, proven)| {
            obj(vec![
                ("path", h(&p.to_bytes())),
                ("height", n(w.height as u64)),
                ("chunk_count", n(w.chunks)),
                ("entry_count", n(w.entries)),
                ("left_is_chunk", Value::Bool(w.left_is_chunk)),
                ("right_is_chunk", Value::Bool(w.right_is_chunk)),
                ("left", h(&w.left)),
                ("right", h(&w.right)),
                ("key_copy", h(&w.key_copy)),
                ("hash", h(&w.hash())),
                ("kinds_proven", Value::Bool(*proven)),
            ])
        })
        .collect()
}

pub fn catchup(t: &Trees) -> Value {
    let mut f = VectorFile::new(
        "catchup",
        "Catch-up pieces (spec/catchup.md). subtree: verify_subtree(path, anchor, levels, capacity, answer), anchor being the trusted root for the top path (depth 0) and the position's hash (its parent's child hash) below it, capacity the client's; valid cases list the nodes in the order they came, each with its path and whether its kinds are proven (catchup.md, \"Kinds\"). leaves: verify_leaves(chunk_hash, capacity, answer) gives the entry hashes. entries: verify_entries(leaves, bitmap, answer) gives [position, key, value] triples. Paths are encoded tree paths (hex). Invalid cases fail with code.",
        "spec/catchup.md",
    );
    let mut sub_valid = Vec::new();
    let mut sub_invalid = Vec::new();
    let mut leaves_valid = Vec::new();
    let mut leaves_invalid = Vec::new();
    let mut entries_valid = Vec::new();
    let mut entries_invalid = Vec::new();

    // Subtrees: the top at several depths, a position below it, and a cut answer.
    let c4 = &t.c4;
    let deep = path_of(&[false]);
    for (b, path, levels) in [
        (c4, TreePath::top(), 1),
        (c4, TreePath::top(), 2),
        (c4, TreePath::top(), 48),
        (c4, deep.clone(), 3),
        (&t.c3, TreePath::top(), 4),
    ] {
        let answer = subtree(b, &path, levels);
        let got = verify_subtree(&path, &anchor(b, &path), levels, b.capacity, &answer).unwrap();
        sub_valid.push(obj(vec![
            ("tree", s(b.name)),
            ("path", h(&path.to_bytes())),
            ("anchor", h(&anchor(b, &path))),
            ("levels", n(levels as u64)),
            ("capacity", n(b.capacity as u64)),
            ("answer", h(&answer)),
            ("capacity_carried", n(got.capacity as u64)),
            ("nodes", nodes_json(&got)),
        ]));
    }
    // A peer may cut its answer after any node: a prefix of the pre-order.
    let full = subtree(c4, &TreePath::top(), 48);
    let cut = c4.tree.head().export_subtree(&TreePath::top(), 48, 400).unwrap();
    assert!(cut.len() < full.len() && full.starts_with(&cut));
    let got = verify_subtree(&TreePath::top(), &c4.root(), 48, 4, &cut).unwrap();
    sub_valid.push(obj(vec![
        ("tree", s(c4.name)),
        ("path", h(&TreePath::top().to_bytes())),
        ("anchor", h(&c4.root())),
        ("levels", n(48)),
        ("capacity", n(4)),
        ("answer", h(&cut)),
        ("capacity_carried", n(4)),
        ("nodes", nodes_json(&got)),
    ]));

    let top = TreePath::top();
    let root = c4.root();
    let one_level = subtree(c4, &top, 1);
    let two = subtree(c4, &top, 2);
    let below = subtree(c4, &deep, 3);
    let below_anchor = hash_at(c4, &deep);
    // Offsets in a one-node answer: format, capacity (1 byte at C = 4), height, two counts, kinds, the hashes, the key copy.
    let counts_len = {
        let w = &verify_subtree(&top, &root, 1, 4, &one_level).unwrap().nodes[0].1;
        let mut v = Vec::new();
        put_varint(&mut v, w.chunks);
        put_varint(&mut v, w.entries);
        v.len()
    };
    let kinds_at = 3 + counts_len;
    let left_at = kinds_at + 1;
    let key_at = left_at + 64;
    let with = |b: &[u8], at: usize, byte: u8| {
        let mut b = b.to_vec();
        b[at] = byte;
        b
    };
    let mut sub_case = |f: &mut VectorFile,
                        why: &str,
                        path: &TreePath,
                        anchor: &Hash,
                        levels: u8,
                        capacity: usize,
                        answer: &[u8],
                        code: &'static str| {
        let r = verify_subtree(path, anchor, levels, capacity, answer);
        let fields = vec![
            ("path", h(&path.to_bytes())),
            ("anchor", h(anchor)),
            ("levels", n(levels as u64)),
            ("capacity", n(capacity as u64)),
            ("answer", h(answer)),
        ];
        f.invalid(why, r, code, fields);
        sub_invalid.push(f.invalid.pop().unwrap());
    };
    sub_case(&mut f, "empty input", &top, &root, 1, 4, &[], "TRUNCATED");
    sub_case(&mut f, "format byte 0x0F (leaves)", &top, &root, 1, 4, &with(&one_level, 0, 0x0f), "FORMAT_UNSUPPORTED");
    sub_case(&mut f, "capacity 1", &top, &root, 1, 4, &with(&one_level, 1, 1), "CAPACITY_INVALID");
    sub_case(
        &mut f,
        "capacity with a redundant zero group",
        &top,
        &root,
        1,
        4,
        &cat(&[&[0x0e], &noncanonical(4), &one_level[2..]]),
        "VARINT_NON_CANONICAL",
    );
    sub_case(&mut f, "no node after the capacity", &top, &root, 1, 4, &one_level[..2], "TRUNCATED");
    sub_case(&mut f, "height 0", &top, &root, 1, 4, &with(&one_level, 2, 0), "HEIGHT_INVALID");
    sub_case(&mut f, "height 49", &top, &root, 1, 4, &with(&one_level, 2, 49), "HEIGHT_INVALID");
    sub_case(&mut f, "kinds with bit 2 set", &top, &root, 1, 4, &with(&one_level, kinds_at, 4), "FLAGS_INVALID");
    sub_case(&mut f, "input ends inside the right hash", &top, &root, 1, 4, &one_level[..key_at - 1], "TRUNCATED");
    sub_case(&mut f, "an empty key copy", &top, &root, 1, 4, &cat(&[&one_level[..key_at], &[0]]), "KEY_EMPTY");
    sub_case(
        &mut f,
        "the left hash flipped: the top does not hash to the root",
        &top,
        &root,
        1,
        4,
        &with(&one_level, left_at, one_level[left_at] ^ 1),
        "NODE_MISMATCH",
    );
    sub_case(
        &mut f,
        "the top checked against another tree's root",
        &top,
        &t.c16.root(),
        1,
        4,
        &one_level,
        "NODE_MISMATCH",
    );
    sub_case(
        &mut f,
        "the top of the tree's previous version",
        &top,
        &root,
        2,
        4,
        &subtree(&t.c4_prev, &top, 2),
        "NODE_MISMATCH",
    );
    let second_left = verify_subtree(&top, &root, 2, 4, &two).unwrap().nodes[1].1.left;
    let at = one_level.len() + two[one_level.len()..].windows(32).position(|w| w == second_left).unwrap();
    sub_case(
        &mut f,
        "the second node's left hash flipped: it does not hash to the top's child hash",
        &top,
        &root,
        2,
        4,
        &with(&two, at, two[at] ^ 1),
        "NODE_MISMATCH",
    );
    sub_case(&mut f, "one node more than the levels asked (1) allow", &top, &root, 1, 4, &two, "TRAILING_BYTES");
    sub_case(
        &mut f,
        "a zero byte after the whole pre-order",
        &top,
        &root,
        48,
        4,
        &cat(&[&full, &[0]]),
        "TRAILING_BYTES",
    );
    sub_case(
        &mut f,
        "below the top, an answer that carries another capacity (5)",
        &deep,
        &below_anchor,
        3,
        4,
        &with(&below, 1, 5),
        "NODE_MISMATCH",
    );
    sub_case(
        &mut f,
        "below the top, checked against the sibling's hash",
        &deep,
        &hash_at(c4, &path_of(&[true])),
        3,
        4,
        &below,
        "NODE_MISMATCH",
    );
    // Kinds (catchup.md, "Kinds"): what a node's height and chunk count allow, and for
    // height 2 with 3 chunks, proven only by its inner child read after it.
    let nodes = verify_subtree(&top, &root, 48, 4, &full).unwrap().nodes;
    let first = |want: fn(&bpavl_core::WireNode) -> bool| nodes.iter().find(|(_, w, _)| want(w)).unwrap().0.clone();
    let one = first(|w| w.height == 1);
    let split = first(|w| w.height == 2 && w.chunks == 3);
    let kinds_offset = |b: &Built, p: &TreePath| {
        let w = &verify_subtree(p, &anchor(b, p), 1, 4, &subtree(b, p, 1)).unwrap().nodes[0].1;
        let mut v = Vec::new();
        put_varint(&mut v, w.chunks);
        put_varint(&mut v, w.entries);
        3 + v.len()
    };
    for (path, levels) in [(split.clone(), 1), (split.clone(), 2)] {
        let answer = subtree(c4, &path, levels);
        let got = verify_subtree(&path, &anchor(c4, &path), levels, 4, &answer).unwrap();
        assert_eq!(got.nodes[0].2, levels == 2);
        sub_valid.push(obj(vec![
            ("tree", s(c4.name)),
            ("path", h(&path.to_bytes())),
            ("anchor", h(&anchor(c4, &path))),
            ("levels", n(levels as u64)),
            ("capacity", n(4)),
            ("answer", h(&answer)),
            ("capacity_carried", n(4)),
            ("nodes", nodes_json(&got)),
        ]));
    }
    // Its parent asked 2 levels: the node is on the last level, its kinds unproven.
    let parent = path_of(&split.turns()[..split.depth() - 1]);
    let answer = subtree(c4, &parent, 2);
    let got = verify_subtree(&parent, &anchor(c4, &parent), 2, 4, &answer).unwrap();
    assert!(got.nodes.iter().any(|(p, _, proven)| *p == split && !proven));
    sub_valid.push(obj(vec![
        ("tree", s(c4.name)),
        ("path", h(&parent.to_bytes())),
        ("anchor", h(&anchor(c4, &parent))),
        ("levels", n(2)),
        ("capacity", n(4)),
        ("answer", h(&answer)),
        ("capacity_carried", n(4)),
        ("nodes", nodes_json(&got)),
    ]));
    let split_one = subtree(c4, &split, 1);
    let split_two = subtree(c4, &split, 2);
    let split_at = kinds_offset(c4, &split);
    let swapped = split_one[split_at] ^ 3;
    let one_at = kinds_offset(c4, &one);
    let top_at = kinds_offset(c4, &top);
    // A lie that only the inner child would show: asked 1 level, it checks, its kinds unproven.
    let lie = with(&split_one, split_at, swapped);
    let got = verify_subtree(&split, &anchor(c4, &split), 1, 4, &lie).unwrap();
    assert!(!got.nodes[0].2);
    sub_valid.push(obj(vec![
        ("tree", s(c4.name)),
        ("path", h(&split.to_bytes())),
        ("anchor", h(&anchor(c4, &split))),
        ("levels", n(1)),
        ("capacity", n(4)),
        ("answer", h(&lie)),
        ("capacity_carried", n(4)),
        ("nodes", nodes_json(&got)),
    ]));
    for (why, path, levels, answer, code) in [
        ("the top (height 3 or more) says its left child is a chunk", &top, 1, with(&one_level, top_at, 1), "KINDS_MISMATCH"),
        ("a node of height 1 says its children are inner nodes", &one, 1, with(&subtree(c4, &one, 1), one_at, 0), "KINDS_MISMATCH"),
        ("a node of height 2 and 3 chunks says both children are chunks", &split, 1, with(&split_one, split_at, 3), "KINDS_MISMATCH"),
        ("a node of height 2 and 3 chunks says no child is a chunk", &split, 1, with(&split_one, split_at, 0), "KINDS_MISMATCH"),
        ("a node of height 2 and 3 chunks, asked 2 levels, cut before its inner child", &split, 2, split_one.clone(), "TRUNCATED"),
        ("a node of height 2 and 3 chunks with its kinds swapped, asked 2 levels, cut before the child they claim", &split, 2, with(&split_one, split_at, swapped), "TRUNCATED"),
        ("a node of height 2 and 3 chunks with its kinds swapped: its inner child does not hash to the side they claim", &split, 2, with(&split_two, split_at, swapped), "NODE_MISMATCH"),
    ] {
        sub_case(&mut f, why, path, &anchor(c4, path), levels, 4, &answer, code);
    }

    // The top's capacity is the root's: a top answer checks whatever the client holds.
    let at_top = verify_subtree(&top, &root, 1, 16, &one_level).unwrap();
    assert_eq!(at_top.capacity, 4);
    sub_valid.push(obj(vec![
        ("tree", s(c4.name)),
        ("path", h(&top.to_bytes())),
        ("anchor", h(&root)),
        ("levels", n(1)),
        ("capacity", n(16)),
        ("answer", h(&one_level)),
        ("capacity_carried", n(4)),
        ("nodes", nodes_json(&at_top)),
    ]));

    // Leaves of a chunk below the top.
    // The second chunk: right of the leftmost's parent, then left down to a chunk.
    let snap = c4.tree.head();
    let mut chunk_path = path_of(&[false]);
    while snap.export_leaves(&chunk_path.child(false)).is_err() {
        chunk_path = chunk_path.child(false);
    }
    chunk_path = chunk_path.child(true);
    while snap.export_leaves(&chunk_path).is_err() {
        chunk_path = chunk_path.child(false);
    }
    let leaves_bytes = snap.export_leaves(&chunk_path).unwrap();
    let chunk = hash_at(c4, &chunk_path);
    let leaves = verify_leaves(&chunk, 4, &leaves_bytes).unwrap();
    leaves_valid.push(obj(vec![
        ("tree", s(c4.name)),
        ("path", h(&chunk_path.to_bytes())),
        ("chunk_hash", h(&chunk)),
        ("capacity", n(4)),
        ("answer", h(&leaves_bytes)),
        ("leaves", leaves.iter().map(|l| h(l)).collect()),
    ]));
    let mut leaves_case =
        |f: &mut VectorFile, why: &str, chunk: &Hash, capacity: usize, answer: &[u8], code: &'static str| {
            let r = verify_leaves(chunk, capacity, answer);
            f.invalid(
                why,
                r,
                code,
                vec![("chunk_hash", h(chunk)), ("capacity", n(capacity as u64)), ("answer", h(answer))],
            );
            leaves_invalid.push(f.invalid.pop().unwrap());
        };
    leaves_case(&mut f, "empty input", &chunk, 4, &[], "TRUNCATED");
    leaves_case(
        &mut f,
        "format byte 0x0E (subtree)",
        &chunk,
        4,
        &cat(&[&[0x0e], &leaves_bytes[1..]]),
        "FORMAT_UNSUPPORTED",
    );
    leaves_case(&mut f, "M = 0", &chunk, 4, &[0x0f, 0], "CHUNK_SIZE_INVALID");
    leaves_case(&mut f, "M = C + 1", &chunk, 4, &cat(&[&[0x0f, 5], &[0u8; 160]]), "CHUNK_SIZE_INVALID");
    leaves_case(
        &mut f,
        "M with a redundant zero group",
        &chunk,
        4,
        &cat(&[&[0x0f], &noncanonical(leaves.len() as u64), &leaves_bytes[2..]]),
        "VARINT_NON_CANONICAL",
    );
    leaves_case(&mut f, "last byte missing", &chunk, 4, &leaves_bytes[..leaves_bytes.len() - 1], "TRUNCATED");
    leaves_case(&mut f, "a zero byte appended", &chunk, 4, &cat(&[&leaves_bytes, &[0]]), "TRAILING_BYTES");
    leaves_case(&mut f, "the last entry hash flipped", &chunk, 4, &flip_last(&leaves_bytes), "LEAVES_MISMATCH");
    leaves_case(
        &mut f,
        "checked against its sibling's chunk hash",
        &hash_at(c4, &sibling(&chunk_path)),
        4,
        &leaves_bytes,
        "LEAVES_MISMATCH",
    );

    // Entries: every other position of that chunk.
    let m = leaves.len();
    let positions: Vec<usize> = (0..m).step_by(2).collect();
    let bitmap = positions_bitmap(&positions, m);
    let answer = snap.export_entries(&chunk_path, &bitmap, MAX).unwrap();
    let got = verify_entries(&leaves, &bitmap, &answer).unwrap();
    let all_leaves: Value = leaves.iter().map(|l| h(l)).collect();
    entries_valid.push(obj(vec![
        ("leaves", all_leaves.clone()),
        ("bitmap", h(&bitmap)),
        ("answer", h(&answer)),
        ("entries", got.iter().map(|(p, k, v)| Value::Array(vec![n(*p as u64), h(k), h(v)])).collect()),
    ]));
    // The first of them only: a peer may cut its answer.
    let one = cat(&[&[1], &answer[1..1 + entry_len(&answer[1..])]]);
    let got = verify_entries(&leaves, &bitmap, &one).unwrap();
    entries_valid.push(obj(vec![
        ("leaves", all_leaves.clone()),
        ("bitmap", h(&bitmap)),
        ("answer", h(&one)),
        ("entries", got.iter().map(|(p, k, v)| Value::Array(vec![n(*p as u64), h(k), h(v)])).collect()),
    ]));
    let mut entries_case = |f: &mut VectorFile, why: &str, bitmap: &[u8], answer: &[u8], code: &'static str| {
        let r = verify_entries(&leaves, bitmap, answer);
        f.invalid(why, r, code, vec![("leaves", all_leaves.clone()), ("bitmap", h(bitmap)), ("answer", h(answer))]);
        entries_invalid.push(f.invalid.pop().unwrap());
    };
    entries_case(&mut f, "empty input", &bitmap, &[], "TRUNCATED");
    entries_case(&mut f, "k = 0", &bitmap, &cat(&[&[0], &answer[1..]]), "COUNT_INVALID");
    entries_case(
        &mut f,
        "k above the positions asked",
        &bitmap,
        &cat(&[&[positions.len() as u8 + 1], &answer[1..]]),
        "COUNT_INVALID",
    );
    let mut wide = Vec::new();
    put_varint(&mut wide, (1 << 32) + 1);
    entries_case(
        &mut f,
        "k = 2^32 + 1, above the positions asked (a reader that casts k to 32 bits first reads 1)",
        &bitmap,
        &cat(&[&wide, &answer[1..]]),
        "COUNT_INVALID",
    );
    entries_case(
        &mut f,
        "k with a redundant zero group",
        &bitmap,
        &cat(&[&noncanonical(positions.len() as u64), &answer[1..]]),
        "VARINT_NON_CANONICAL",
    );
    entries_case(&mut f, "the last value byte flipped", &bitmap, &flip_last(&answer), "ENTRY_MISMATCH");
    entries_case(
        &mut f,
        "the entries answered for the other positions",
        &positions_bitmap(&(1..m).step_by(2).collect::<Vec<_>>(), m),
        &answer,
        "ENTRY_MISMATCH",
    );
    entries_case(&mut f, "last byte missing", &bitmap, &answer[..answer.len() - 1], "TRUNCATED");
    entries_case(&mut f, "a zero byte appended", &bitmap, &cat(&[&answer, &[0]]), "TRAILING_BYTES");
    entries_case(&mut f, "an empty key", &bitmap, &cat(&[&[1], &[0, 0]]), "KEY_EMPTY");
    entries_case(&mut f, "a bitmap of another length than the chunk's", &[0x01, 0x00], &answer, "POSITION_INVALID");
    entries_case(&mut f, "a bitmap that asks for no position", &vec![0; m.div_ceil(8)], &answer, "POSITION_INVALID");

    f.require(&[&[
        "TRUNCATED",
        "TRAILING_BYTES",
        "FORMAT_UNSUPPORTED",
        "VARINT_NON_CANONICAL",
        "CAPACITY_INVALID",
        "CHUNK_SIZE_INVALID",
        "HEIGHT_INVALID",
        "FLAGS_INVALID",
        "KEY_EMPTY",
        "COUNT_INVALID",
        "POSITION_INVALID",
        "NODE_MISMATCH",
        "LEAVES_MISMATCH",
        "ENTRY_MISMATCH",
    ]]);
    let part = |valid: Vec<Value>, invalid: Vec<Value>| {
        obj(vec![("valid", Value::Array(valid)), ("invalid", Value::Array(invalid))])
    };
    obj(vec![
        ("description", s(f.description)),
        ("spec", s(f.spec)),
        ("subtree", part(sub_valid, sub_invalid)),
        ("leaves", part(leaves_valid, leaves_invalid)),
        ("entries", part(entries_valid, entries_invalid)),
    ])
}

fn sibling(path: &TreePath) -> TreePath {
    let turns = path.turns();
    let parent = path_of(&turns[..turns.len() - 1]);
    parent.child(!turns[turns.len() - 1])
}

/// Bytes of one `key ‖ value` at the start of `b` (one-byte lengths).
fn entry_len(b: &[u8]) -> usize {
    let k = b[0] as usize;
    let v = b[1 + k] as usize;
    assert!(k < 128 && v < 128, "one-byte lengths");
    2 + k + v
}
