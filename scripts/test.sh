#!/usr/bin/env bash
# `npm test`: bootstrap, Rust tests, test-vector freshness, then the TypeScript
# suites that exist so far. Stops at the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

stage=bootstrap
tmp="$(mktemp -d)"
trap 'rc=$?; rm -rf "$tmp"; (( rc == 0 )) || echo "test.sh: FAILED during $stage (exit $rc)" >&2' EXIT

source scripts/bootstrap.sh

# Release: the property tests are too slow in debug.
stage="cargo test"
cargo test --workspace --release

stage="vector freshness"
cargo run --release -q -p bpavl-core --example gen_vectors -- --out "$tmp"
# head: a stale vector set can produce a huge diff; the first lines are enough.
if ! diff -r spec/vectors "$tmp" | head -n 50; then
  echo "spec/vectors is stale: run npm run vectors" >&2
  exit 1
fi

ran="cargo test, vectors"
if [[ -d packages/bpavl-wasm ]]; then
  stage="wasm build"
  npm run build -w @bpavl/wasm
fi

if [[ -f vitest.config.ts ]]; then
  stage=vitest
  npx --no vitest run  # --no: use the pinned workspace vitest, never fetch one
  ran+=", vitest"
fi

if [[ -f playwright.config.ts ]]; then
  stage="browser tests"
  # HOOK(browser tests): run the Playwright suite here against Debian's
  # chromium (installed by bootstrap). Failing until wired, so that adding
  # playwright.config.ts can never silently skip the browser tests.
  echo "playwright.config.ts exists but browser tests are not wired into scripts/test.sh yet" >&2
  exit 1
fi

echo "test.sh: all passed in ${SECONDS}s ($ran)"
