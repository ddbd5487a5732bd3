//! Writes the test vectors in `spec/vectors/` (see its README.md), one
//! module per file:
//!
//! ```sh
//! cargo run --release -q -p bpavl-core --example gen_vectors -- --out spec/vectors
//! ```
//!
//! Output is byte-for-byte deterministic: fixed seeds, no hash-map
//! iteration, no timestamps; JSON objects keep their insertion order.
//! Encodings are split into fields by the test kit (`bpavl_testkit::fields`),
//! so an invalid case patches one named field. Every case is checked against
//! the core before it is written: a valid case must verify with exactly the
//! recorded outputs (which are also recomputed naively from the sorted
//! entries), and an invalid case must fail with exactly the recorded code. A
//! wrong expectation panics here and never reaches the files.

mod absence;
mod bulk_load;
mod cases;
mod catchup;
mod chunk_envelope;
mod chunk_proof;
mod existence;
mod forged;
mod json;
mod multiproof;
mod range;
mod rebuild;
mod store_records;
mod trees;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use cases::{obj, s};
use trees::build_trees;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(PathBuf::from),
            other => {
                eprintln!("gen_vectors: unknown argument {other:?}\nusage: gen_vectors --out DIR");
                std::process::exit(2);
            }
        }
    }
    let Some(out) = out else {
        eprintln!("usage: gen_vectors --out DIR");
        std::process::exit(2);
    };
    fs::create_dir_all(&out).expect("create the output directory");

    let t = build_trees();
    let trees = [&t.empty, &t.one, &t.five, &t.c3, &t.c4, &t.c16, &t.c256, &t.c4096, &t.limits];
    let trees_json = obj(vec![
        (
            "description",
            s("Trees built by replaying ops (insert key value / remove key, hex) on Tree::new(capacity), then committing once. root, chunks, entries and height describe the committed tree; final_entries are its entries in key order; chunk_list gives, per chunk in index order, its key_height and entry count, from which the AVL shape is rebuilt (spec/chunk-format.md, Rebuild)."),
        ),
        ("spec", s("spec/hashing.md; spec/chunk-format.md, Rebuild")),
        ("trees", Value::Array(trees.iter().map(|b| b.json()).collect())),
    ]);
    write(&out, "trees.json", &trees_json);
    for file in [
        existence::existence(&t),
        absence::absence(&t),
        range::range(&t),
        multiproof::multiproof(&t),
        chunk_proof::chunk_proof(&t),
        chunk_envelope::chunk_envelope(&t),
        rebuild::rebuild(&t),
        bulk_load::bulk_load(),
    ] {
        let name = format!("{}.json", file.name);
        write(&out, &name, &file.json());
    }
    write(&out, "catchup.json", &catchup::catchup(&t));
    write(&out, "store_records.json", &store_records::store_records());
}

fn write(dir: &Path, name: &str, j: &Value) {
    let text = json::to_text(j);
    fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("write {name}: {e}"));
}
