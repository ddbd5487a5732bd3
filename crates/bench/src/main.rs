//! `bpavl-bench`: benchmarks and summaries of bpavl-core over the standard workload.

mod args;
mod common;
mod paper;
mod par;
mod peers;
mod store_writes;
mod summary;
mod timing;
mod workload;

use std::process::ExitCode;

use args::Flags;
use bpavl_core::limits::DEFAULT_CAPACITY;

const USAGE: &str = "\
usage: bpavl-bench <command> [options]

commands:
  peers   [--n N] [--chunk C]   the standard peer workload; last stdout line is a JSON object
                                (N defaults to 100000, C to 256)
  paper   [--n N]               proof lengths and space efficiency for C = 16 … 4096;
                                last stdout line is a JSON object (N defaults to 1000000)
  summary [--n N] [--chunk C]   a readable summary of the workload tree (N defaults to 100000)
  store-writes [--n N] [--chunk C]
                                records a state store writes for the import and for 10,000 random
                                updates; last stdout line is a JSON object (N defaults to 1000000)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help" || a == "help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let Some((command, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match command.as_str() {
        "peers" => Flags::parse(rest, &[("n", 100_000), ("chunk", DEFAULT_CAPACITY)])
            .map(|f| peers::run(f.get("n"), f.get("chunk"))),
        "paper" => Flags::parse(rest, &[("n", 1_000_000)]).map(|f| paper::run(f.get("n"))),
        "summary" => Flags::parse(rest, &[("n", 100_000), ("chunk", DEFAULT_CAPACITY)])
            .map(|f| summary::run(f.get("n"), f.get("chunk"))),
        "store-writes" => Flags::parse(rest, &[("n", 1_000_000), ("chunk", DEFAULT_CAPACITY)])
            .map(|f| store_writes::run(f.get("n"), f.get("chunk"))),
        other => Err(format!("unknown command `{other}`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("bpavl-bench: {msg}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
