#!/usr/bin/env bash
# `npm start [-- ARGS]`: bootstrap, then print a summary of a freshly built tree
# (root, proof sizes, chunk count). A later issue turns this into the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh
exec cargo run --release -q -p bpavl-bench -- summary "$@"
