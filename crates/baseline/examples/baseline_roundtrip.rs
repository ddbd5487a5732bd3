//! Builds the standard workload in a Baseline tree, exports it into chunks
//! and imports them back, printing times, sizes and whether the roots match.
//!
//! ```sh
//! cargo run --release -p bpavl-baseline --example baseline_roundtrip -- --n 100000 --chunk-bytes 102400
//! ```
//!
//! The workload is the one in `crates/bench/src/workload.rs`:
//! `key_i = SHA-256(u64be(i))`, `value_i = u64be(i) ‖ first 504 bytes of
//! B_0 ‖ … ‖ B_15` with `B_j = SHA-256(key_i ‖ u8(j))`, inserted in
//! ascending `i`.

use std::time::Instant;

use bpavl_baseline::{BaselineTree, Importer, DEFAULT_CHUNK_BYTES};
use sha2::{Digest, Sha256};

/// `(key_i, value_i)` of the standard workload.
fn entry(i: u64) -> ([u8; 32], [u8; 512]) {
    let key: [u8; 32] = Sha256::digest(i.to_be_bytes()).into();
    let mut value = [0u8; 512];
    value[..8].copy_from_slice(&i.to_be_bytes());
    let mut block = [0u8; 33];
    block[..32].copy_from_slice(&key);
    for (j, dst) in value[8..].chunks_mut(32).enumerate() {
        block[32] = j as u8;
        dst.copy_from_slice(&Sha256::digest(block)[..dst.len()]);
    }
    (key, value)
}

/// The value following `flag` on the command line, or `default`.
fn arg(flag: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == flag) {
        Some(at) => args.get(at + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{flag} needs a number")),
        None => default,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() {
    let n = arg("--n", 100_000);
    let chunk_bytes = arg("--chunk-bytes", DEFAULT_CHUNK_BYTES);
    let entries: Vec<_> = (0..n as u64).map(entry).collect();

    let start = Instant::now();
    let mut tree = BaselineTree::new();
    for (key, value) in &entries {
        tree.insert(key, value).expect("workload entries are within the limits");
    }
    let root = tree.commit();
    let build = start.elapsed();

    let start = Instant::now();
    let chunks = tree.export_chunks(chunk_bytes);
    let export = start.elapsed();
    let bytes: usize = chunks.iter().map(Vec::len).sum();

    let start = Instant::now();
    let mut importer = Importer::new();
    for chunk in &chunks {
        importer.add_chunk(chunk).expect("an honest chunk imports");
    }
    let imported = importer.finish().expect("an honest export completes");
    let import = start.elapsed();

    println!("entries        {n}");
    println!("build + commit {:.3} s", build.as_secs_f64());
    println!("export         {:.3} s", export.as_secs_f64());
    println!("export bytes   {bytes} ({:.1} MiB)", bytes as f64 / (1 << 20) as f64);
    println!("chunks         {} of at most {chunk_bytes} bytes", chunks.len());
    println!("import         {:.3} s", import.as_secs_f64());
    println!("root           {}", hex(&root));
    println!("imported root  {}", hex(&imported));
    println!("roots equal    {}", root == imported);
    assert_eq!(root, imported, "the imported tree differs");
}
