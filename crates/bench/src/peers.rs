//! `peers`: the standard workload, measured the same way as for IAVL, JMT and
//! @ethereumjs/mpt. Every measured operation is checked.

use std::hint::black_box;

use serde_json::json;

use crate::common::{self, check_absence, check_existence, check_get, check_get_identity};
use crate::timing::{measure_rate, peak_rss_mib, time, Rate};
use crate::workload::Workload;

pub fn run(n: usize, capacity: usize) {
    eprintln!("peers: generating workload, n = {n}, capacity = {capacity}");
    let w = Workload::generate(n);
    assert!(!w.is_empty(), "peers needs --n ≥ 1");
    let workload_sha256 = hex::encode(w.sha256());
    let lookups = w.lookup_indices();
    let proved: Vec<usize> = w.proved_indices().collect();
    let absent = w.absent_keys();

    let ((tree, commit), build_s) = time(|| common::build(&w, capacity));
    let root = commit.root;
    common::check_len(&tree, &w);
    report_secs("build (insert all + commit)", build_s);

    for &i in &lookups {
        check_get(&tree, &w, i);
    }
    let ((), get) = measure_rate(lookups.len(), || {
        for &i in &lookups {
            check_get_identity(black_box(&tree), &w, black_box(i));
        }
    });
    report_rate("get", &get);

    let (proofs, prove) = measure_rate(proved.len(), || {
        proved.iter().map(|&i| common::prove(&tree, &w, black_box(i)).encode()).collect::<Vec<_>>()
    });
    report_rate("prove existence", &prove);
    let ((), verify) = measure_rate(proved.len(), || {
        for (&i, p) in proved.iter().zip(&proofs) {
            check_existence(&root, &w, black_box(i), black_box(p));
        }
    });
    report_rate("verify existence", &verify);

    let (absent_proofs, absent_prove) = measure_rate(absent.len(), || {
        absent.iter().map(|k| common::prove_absent(&tree, black_box(k))).collect::<Vec<_>>()
    });
    report_rate("prove absence", &absent_prove);
    let ((), absent_verify) = measure_rate(absent.len(), || {
        for (k, p) in absent.iter().zip(&absent_proofs) {
            check_absence(&root, black_box(k), black_box(p));
        }
    });
    report_rate("verify absence", &absent_verify);

    let (envelopes, export_s) = time(|| common::export_all(&tree));
    report_secs("export all chunks", export_s);
    let state_bytes: usize = envelopes.iter().map(Vec::len).sum();
    drop(tree);
    let (rebuilt, import_s) = time(|| common::import_all(&commit, &envelopes));
    report_secs("import (verify + rebuild)", import_s);
    common::check_len(&rebuilt, &w);

    let result = json!({
        "n": n,
        "capacity": capacity,
        "workload_sha256": workload_sha256,
        "root_hex": hex::encode(root),
        "build_s": build_s,
        "get_ops_per_s": get.per_s(),
        "prove_per_s": prove.per_s(),
        "proof_bytes_avg": avg_len(&proofs),
        "verify_per_s": verify.per_s(),
        "absent_prove_per_s": absent_prove.per_s(),
        "absent_proof_bytes_avg": avg_len(&absent_proofs),
        "absent_verify_per_s": absent_verify.per_s(),
        "export_s": export_s,
        "import_s": import_s,
        "state_bytes": state_bytes,
        "chunks": envelopes.len(),
        "peak_rss_mib": peak_rss_mib(),
    });
    println!("{result}");
}

fn avg_len(items: &[Vec<u8>]) -> f64 {
    items.iter().map(Vec::len).sum::<usize>() as f64 / items.len() as f64
}

fn report_secs(what: &str, secs: f64) {
    eprintln!("  {what:<28} {:>10.1} ms", secs * 1e3);
}

fn report_rate(what: &str, rate: &Rate) {
    eprintln!("  {what:<28} {:>10.0} /s  ({} ops, {} passes, {:.3} s)", rate.per_s(), rate.ops, rate.passes, rate.secs);
}
