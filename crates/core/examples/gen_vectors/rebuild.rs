//! `rebuild.json`: the rebuilder (`spec/chunk-format.md`, Rebuild), fed
//! envelopes in a given order and finished.

use bpavl_core::hash::Hash;
use bpavl_core::{RebuildError, Rebuilder};
use serde_json::Value;

use crate::cases::{h, n, obj, s, VectorFile};
use crate::forged;
use crate::trees::{Built, Trees};

/// The version every case finishes as.
const VERSION: u64 = 1;

/// `(index, envelope)` in the order they are added.
type Adds = Vec<(u64, Vec<u8>)>;

fn adds_json(adds: &Adds, new: Option<&[bool]>) -> Value {
    let rows = adds.iter().enumerate().map(|(i, (index, envelope))| {
        let mut row = vec![("index", n(*index)), ("envelope", h(envelope))];
        if let Some(new) = new {
            row.push(("new", Value::Bool(new[i])));
        }
        obj(row)
    });
    Value::Array(rows.collect())
}

/// Adds every envelope, then finishes: `(what each add returned, the
/// finished tree)`, or the position of the add that failed (None: `finish`
/// failed) and its error.
fn run(root: &Hash, adds: &Adds) -> Result<(Vec<bool>, bpavl_core::Tree), (Option<usize>, RebuildError)> {
    let mut r = Rebuilder::new(*root);
    let mut new = Vec::new();
    for (i, (index, envelope)) in adds.iter().enumerate() {
        new.push(r.add(*index, envelope).map_err(|e| (Some(i), e))?);
    }
    Ok((new, r.finish(VERSION).map_err(|e| (None, e))?))
}

pub fn rebuild(t: &Trees) -> VectorFile {
    let mut f = VectorFile::new(
        "rebuild",
        "Rebuilds (spec/chunk-format.md, Rebuild): new Rebuilder(root), add(index, envelope) for each of adds in order, then finish(version). Valid cases: each add returns new, finish returns a tree with root, chunks and entries; invalid cases: the add at position at fails with code, or (at null) every add succeeds and finish fails with code.",
        "spec/chunk-format.md, Rebuild",
    );
    let chunks_of = |b: &Built, order: &[u64]| -> Adds {
        order.iter().map(|&i| (i, b.tree.head().export_chunk_bytes(i).unwrap())).collect()
    };
    let valid = |f: &mut VectorFile, b: &Built, adds: Adds, about: &str| {
        let (new, tree) = run(&b.root(), &adds).unwrap_or_else(|e| panic!("rebuild {about}: {e:?}"));
        let entries: Vec<_> = tree.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(
            (tree.head().root(), tree.chunk_count(), &entries),
            (b.root(), b.chunk_count(), &b.entries),
            "{about}"
        );
        f.valid.push(obj(vec![
            ("description", s(about)),
            ("tree", s(b.name)),
            ("root", h(&b.root())),
            ("version", n(VERSION)),
            ("adds", adds_json(&adds, Some(&new))),
            ("chunk_count", n(b.chunk_count())),
            ("entry_count", n(b.entry_count())),
        ]));
    };
    let c4 = &t.c4;
    let all: Vec<u64> = (0..c4.chunk_count()).collect();
    valid(&mut f, &t.one, chunks_of(&t.one, &[0]), "single chunk");
    valid(&mut f, c4, chunks_of(c4, &all.iter().rev().copied().collect::<Vec<_>>()), "every chunk, last first");
    let mut twice: Vec<u64> = (0..t.c3.chunk_count()).collect();
    twice.insert(3, 0);
    valid(&mut f, &t.c3, chunks_of(&t.c3, &twice), "capacity 3, chunk 0 added twice (the second add returns false)");

    let inv = |f: &mut VectorFile, why: &str, root: &Hash, adds: Adds, at: Option<usize>, code: &'static str| {
        let got = run(root, &adds).map(drop).map_err(|(pos, e)| {
            assert_eq!(pos, at, "{why}: failed at another add");
            e
        });
        f.invalid(
            why,
            got,
            code,
            vec![
                ("root", h(root)),
                ("version", n(VERSION)),
                ("adds", adds_json(&adds, None)),
                ("at", at.map_or(Value::Null, |a| n(a as u64))),
            ],
        );
    };
    let root = c4.root();
    inv(&mut f, "no chunk added", &root, vec![], None, "REBUILD_INCOMPLETE");
    let missing: Vec<u64> = all.iter().copied().filter(|&i| i != 7).collect();
    inv(&mut f, "every chunk but chunk 7", &root, chunks_of(c4, &missing), None, "REBUILD_INCOMPLETE");
    let mut wrong = chunks_of(c4, &[0, 1, 2]);
    wrong[2].0 = 3;
    inv(&mut f, "chunk 2 added as chunk 3", &root, wrong, Some(2), "CHUNK_INDEX_MISMATCH");
    let prev = vec![
        (0, c4.tree.head().export_chunk_bytes(0).unwrap()),
        (1, t.c4_prev.tree.head().export_chunk_bytes(1).unwrap()),
    ];
    inv(&mut f, "chunk 1 of the previous version of the tree", &root, prev, Some(1), "ROOT_MISMATCH");
    let (pair, forged_root) = forged::bad_shape();
    let pair: Adds = pair.iter().enumerate().map(|(i, e)| (i as u64, e.encode())).collect();
    inv(
        &mut f,
        "bad shape: two chunks whose paths verify (a step may rise by 2) under an inner node of height 2 over two chunks (height 0): finish rebuilds it and finds the height is not 1 + max(child heights)",
        &forged_root,
        pair,
        None,
        "ROOT_MISMATCH",
    );

    f.require(&[&["REBUILD_INCOMPLETE", "ROOT_MISMATCH", "CHUNK_INDEX_MISMATCH"]]);
    f
}
