//! `paper`: the B+AVL paper's measurements over chunk capacities — the
//! existence-proof length in hashes, and the space efficiency
//! `chunks ÷ ⌈entries / C⌉` sampled along the insertion.

use serde_json::json;

use crate::common::{self, check_existence, min_median_max, proof_hashes, sample_indices};
use crate::workload::Workload;

/// Chunk capacities measured.
pub const CAPACITIES: [usize; 5] = [16, 64, 256, 1024, 4096];
/// Keys whose existence proofs are measured.
const PROOF_SAMPLE: usize = 10_000;
/// Points along the insertion at which space efficiency is sampled.
const SPACE_SAMPLES: usize = 100;

struct Row {
    capacity: usize,
    chunks: u64,
    hashes: (usize, usize, usize),
    space_eff: (f64, f64),
}

pub fn run(n: usize) {
    eprintln!("paper: generating workload, n = {n}");
    let w = Workload::generate(n);
    assert!(!w.is_empty(), "paper needs --n ≥ 1");
    let rows: Vec<Row> = CAPACITIES
        .iter()
        .map(|&c| {
            eprintln!("paper: capacity {c}");
            measure(&w, c)
        })
        .collect();
    print_table(n, &rows);
    let json_rows: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "capacity": r.capacity,
                "chunks": r.chunks,
                "proof_hashes_min": r.hashes.0,
                "proof_hashes_median": r.hashes.1,
                "proof_hashes_max": r.hashes.2,
                "space_eff_mean": r.space_eff.0,
                "space_eff_std": r.space_eff.1,
            })
        })
        .collect();
    println!("{}", json!({ "n": n, "paper": json_rows }));
}

/// Builds one tree of capacity `capacity` (dropped on return) and measures it.
fn measure(w: &Workload, capacity: usize) -> Row {
    let mut tree = common::new_tree(capacity);
    let mut effs = Vec::with_capacity(SPACE_SAMPLES);
    let mut done = 0;
    for end in sample_points(w.len()) {
        common::insert_range(&mut tree, w, done..end);
        done = end;
        effs.push(tree.chunk_count() as f64 / end.div_ceil(capacity) as f64);
    }
    common::check_len(&tree, w);
    let root = tree.commit().root;

    let mut hashes: Vec<usize> = sample_indices(w.len(), PROOF_SAMPLE)
        .into_iter()
        .map(|i| {
            let proof = common::prove(&tree, w, i);
            check_existence(&root, w, i, &proof.encode());
            proof_hashes(&proof)
        })
        .collect();
    Row { capacity, chunks: tree.chunk_count(), hashes: min_median_max(&mut hashes), space_eff: mean_std(&effs) }
}

/// Entry counts `⌈n·k / SPACE_SAMPLES⌉` for `k = 1 … SPACE_SAMPLES`, without repeats.
fn sample_points(n: usize) -> Vec<usize> {
    let mut points: Vec<usize> = (1..=SPACE_SAMPLES).map(|k| (n * k).div_ceil(SPACE_SAMPLES)).collect();
    points.dedup();
    points
}

/// Mean and (population) standard deviation.
fn mean_std(xs: &[f64]) -> (f64, f64) {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
    (mean, var.sqrt())
}

fn print_table(n: usize, rows: &[Row]) {
    println!("B+AVL over the standard workload, n = {n} entries (32-byte keys, 512-byte values)");
    println!(
        "proof = existence-proof length in hashes over {} sampled keys; space eff. = chunks ÷ ⌈entries/C⌉ at {} points along the insertion",
        PROOF_SAMPLE.min(n),
        sample_points(n).len()
    );
    println!("{:>6} {:>9} {:>6} {:>8} {:>6} {:>16}", "C", "chunks", "min", "median", "max", "space eff.");
    for r in rows {
        println!(
            "{:>6} {:>9} {:>6} {:>8} {:>6} {:>9.3} ± {:.3}",
            r.capacity, r.chunks, r.hashes.0, r.hashes.1, r.hashes.2, r.space_eff.0, r.space_eff.1
        );
    }
    println!("(the paper's Table II reports a space efficiency of about 1.42–1.44 for reference)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_points_cover_the_insertion() {
        let p = sample_points(1000);
        assert_eq!(p.len(), 100);
        assert_eq!((p[0], p[99]), (10, 1000));
        assert_eq!(sample_points(3), vec![1, 2, 3]);
        assert_eq!(sample_points(150)[..3], [2, 3, 5]);
    }

    #[test]
    fn mean_std_of_constant_and_spread() {
        assert_eq!(mean_std(&[2.0, 2.0]), (2.0, 0.0));
        assert_eq!(mean_std(&[1.0, 3.0]), (2.0, 1.0));
    }
}
