#!/usr/bin/env bash
# `npm start [-- ARGS]`: bootstrap, then the demo (scripts/demo.mjs): builds
# what is missing, starts the demo network on 127.0.0.1 (8 peers, 2 of them
# lying, 100,000 entries) and serves the demo page; Ctrl-C stops it all.
# `npm start -- --help` lists the options. The tree summary that `npm start`
# used to print is `npm run summary`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh
exec node scripts/demo.mjs "$@"
