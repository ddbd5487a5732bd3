//! `summary`: builds the workload tree and prints what it looks like —
//! root, sizes of proofs and chunk envelopes — checking proofs and one chunk
//! round trip on the way. This is what `npm start` runs.

use bpavl_core::{verify_chunk, Hash, Tree};

use crate::common::{self, check_absence, check_existence, proof_hashes, sample_indices};
use crate::timing::time;
use crate::workload::Workload;

/// Existence proofs measured.
const PROOF_SAMPLE: usize = 1_000;

pub fn run(n: usize, capacity: usize) {
    let w = Workload::generate(n);
    assert!(!w.is_empty(), "summary needs --n ≥ 1");
    let ((tree, commit), build_s) = time(|| common::build(&w, capacity));
    let root = commit.root;
    common::check_len(&tree, &w);
    println!("bpavl: {n} entries of the standard workload (32-byte keys, 512-byte values), capacity {capacity}");
    println!("  root      {}", hex::encode(root));
    println!("  entries   {}   chunks {}   built in {:.1} ms", tree.len(), tree.chunk_count(), build_s * 1e3);
    existence_proofs(&tree, &root, &w);
    absence_proof(&tree, &root, &w);
    envelopes(&tree);
    chunk_round_trip(&tree, &root);
}

/// Sizes of a sample of existence proofs; each is verified.
fn existence_proofs(tree: &Tree, root: &Hash, w: &Workload) {
    let sample = sample_indices(w.len(), PROOF_SAMPLE);
    let (mut bytes, mut hashes) = (Vec::new(), Vec::new());
    for &i in &sample {
        let proof = common::prove(tree, w, i);
        let encoded = proof.encode();
        check_existence(root, w, i, &encoded);
        bytes.push(encoded.len());
        hashes.push(proof_hashes(&proof));
    }
    println!(
        "  existence proofs ({} keys, all verified): {} bytes, {} hashes",
        sample.len(),
        stats(&bytes),
        stats(&hashes)
    );
}

/// One absence proof, verified.
fn absence_proof(tree: &Tree, root: &Hash, w: &Workload) {
    let key = w.absent_keys()[0];
    let proof = common::prove_absent(tree, &key);
    check_absence(root, &key, &proof);
    println!("  absence proof (1 key, verified): {} bytes", proof.len());
}

/// Sizes of every chunk envelope.
fn envelopes(tree: &Tree) {
    let sizes: Vec<usize> = common::export_all(tree).iter().map(Vec::len).collect();
    let total: usize = sizes.iter().sum();
    println!(
        "  chunk envelopes ({}): {} bytes; {:.1} MiB in all",
        sizes.len(),
        stats(&sizes),
        total as f64 / 1048576.0
    );
}

/// Exports the middle chunk, verifies it against the root alone and checks
/// that its entries are the tree's.
fn chunk_round_trip(tree: &Tree, root: &Hash) {
    let index = tree.chunk_count() / 2;
    let envelope = common::export(tree, index);
    let chunk = verify_chunk(root, index, &envelope).unwrap_or_else(|e| panic!("chunk {index} does not verify: {e}"));
    assert_eq!(chunk.index(), index, "verified chunk has the wrong index");
    assert_eq!(chunk.entry_count(), tree.len(), "verified chunk has the wrong entry total");
    let structured = tree.head().export_chunk(index).unwrap_or_else(|e| panic!("export of chunk {index} failed: {e}"));
    assert_eq!(structured.encode(), envelope, "export_chunk().encode() and export_chunk_bytes() differ");
    for (k, v) in chunk.entries() {
        assert_eq!(tree.get(k), Some(v), "chunk {index} holds an entry the tree does not");
    }
    println!(
        "  chunk {index} round trip: {} bytes exported, verified against the root, {} entries match the tree",
        envelope.len(),
        chunk.len()
    );
}

/// `avg X (min … max)`.
fn stats(xs: &[usize]) -> String {
    let min = xs.iter().min().copied().unwrap_or(0);
    let max = xs.iter().max().copied().unwrap_or(0);
    let avg = xs.iter().sum::<usize>() as f64 / xs.len().max(1) as f64;
    format!("avg {avg:.1} ({min} … {max})")
}
