#!/usr/bin/env bash
# `npm test`: bootstrap, the Rust gate (rustfmt, clippy), Rust tests,
# test-vector freshness, the builds, the TypeScript gate (tsc), then the
# TypeScript suites. Stops at the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

stage=bootstrap
tmp="$(mktemp -d)"
trap 'rc=$?; rm -rf "$tmp"; (( rc == 0 )) || echo "test.sh: FAILED during $stage (exit $rc)" >&2' EXIT

source scripts/bootstrap.sh

# The gate: formatting and lints first, as they fail fastest.
stage="cargo fmt"
cargo fmt --check
stage="cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

# Release: the property tests are too slow in debug.
stage="cargo test"
cargo test --workspace --release

stage="vector freshness"
cargo run --release -q -p bpavl-core --example gen_vectors -- --out "$tmp"
# Only what the generator writes: README.md is written by hand.
# head: a stale vector set can produce a huge diff; the first lines are enough.
if ! diff -r --exclude=README.md --exclude=wire.json spec/vectors "$tmp" | head -n 50; then
  echo "spec/vectors is stale: run npm run vectors" >&2
  exit 1
fi

ran="rustfmt, clippy, cargo test, vectors"
if [[ -d packages/bpavl-wasm ]]; then
  stage="wasm build"
  npm run build -w @bpavl/wasm
fi
if [[ -d packages/baseline-wasm ]]; then
  stage="baseline wasm build"
  npm run build -w @bpavl/baseline-wasm
fi
if [[ -d packages/light-client ]]; then
  stage="light-client build"
  npm run build -w @bpavl/light-client
fi
if [[ -d packages/storage ]]; then
  stage="storage build"
  npm run build -w @bpavl/storage
fi
if [[ -d packages/peer ]]; then
  # Its dist/ types: tests/readme.test.ts type-checks the READMEs' snippets as a consumer's.
  stage="peer build"
  npm run build -w @bpavl/peer
fi

# After the builds: the projects import @bpavl/wasm's pkg/ and the light
# client's dist/ types.
stage="tsc"
bash scripts/typecheck.sh
ran+=", tsc"

if [[ -f vitest.config.ts ]]; then
  stage=vitest
  npx --no vitest run  # --no: use the pinned workspace vitest, never fetch one
  ran+=", vitest"
fi

if [[ -f playwright.config.ts ]]; then
  stage="browser tests"
  # tests/browser and tests/e2e (the demo against its own network from
  # scripts/demo.mjs) in Debian's chromium (installed by bootstrap; Playwright
  # never downloads a browser). Needs the WASM build above; Playwright's
  # global setup rebuilds the light client's dist/ and each suite builds its
  # page with Vite. --no: the pinned @playwright/test, never a fetched one.
  npx --no playwright test
  ran+=", playwright"
fi

echo "test.sh: all passed in ${SECONDS}s ($ran)"
