#!/usr/bin/env bash
# `npm run typecheck`: `tsc --noEmit` over every TypeScript project: each
# package, the demo, tests/ and its browser and end-to-end suites (every
# packages/*/tsconfig.json, tests/tsconfig.json, tests/*/tsconfig.json and bench/tsconfig.json, so
# a new package is checked as soon as it has a tsconfig.json). Vitest and
# Vite strip types without checking them; this is where they are checked.
# Needs the builds whose types the projects import: @bpavl/wasm's pkg/ and
# @bpavl/light-client's dist/ (scripts/test.sh builds both first).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

failed=()
for config in packages/*/tsconfig.json tests/tsconfig.json tests/*/tsconfig.json bench/tsconfig.json; do
  project="$(dirname "$config")"
  # --no: the pinned workspace typescript, never a fetched one; --: the
  # rest is for tsc (npx would take -p as its own --package).
  npx --no -- tsc -p "$project" --noEmit || failed+=("$project")
done
if (( ${#failed[@]} > 0 )); then
  echo "typecheck: type errors in ${failed[*]}" >&2
  exit 1
fi
