#!/usr/bin/env bash
# Idempotent toolchain bootstrap for bpavl. Installs only what is missing,
# prints one line per install, and is silent (and fast) when nothing is to do.
#
#   source scripts/bootstrap.sh         bootstrap, then switch PATH in the calling shell
#   bash scripts/bootstrap.sh           bootstrap only
#   bash scripts/bootstrap.sh CMD ARGS  bootstrap, then exec CMD in the bootstrapped env
#
# The "PATH switch": system node may be older than 22, in which case Node 24 is
# installed from the npm registry into .tools/node, and that bin dir is put
# first on PATH. npm itself stays the system one; its `#!/usr/bin/env node`
# shebang then picks up Node 24 too.

BPAVL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BPAVL_NODE_BIN="$BPAVL_ROOT/.tools/node/node_modules/.bin"

# Prepend a dir to PATH unless it is already there (safe to repeat).
bpavl_path_prepend() {
  [[ ":$PATH:" == *":$1:"* ]] || export PATH="$1:$PATH"
}

bpavl_env() {
  # `cargo install`ed tools (wasm-bindgen, wasm-pack) land here.
  bpavl_path_prepend "${CARGO_HOME:-$HOME/.cargo}/bin"
  if [[ -x "$BPAVL_NODE_BIN/node" ]]; then bpavl_path_prepend "$BPAVL_NODE_BIN"; fi
}

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
  # Sourced: do the work in a child bash so strict mode and helpers don't leak
  # into the caller, then apply the PATH switch here.
  bash "${BASH_SOURCE[0]}" || return
  bpavl_env
  return 0
fi

set -euo pipefail
cd "$BPAVL_ROOT"
bpavl_env

# One bootstrap at a time: two concurrent `npm ci` runs delete each other's
# node_modules. The lock is released when this process exits.
mkdir -p .tools
exec 9>.tools/bootstrap.lock
flock 9

# run_install WHAT CMD...: announce, run CMD with its output captured, and
# only show that output if CMD fails.
run_install() {
  local what=$1 log
  shift
  echo "bootstrap: installing $what" >&2
  log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "bootstrap: FAILED to install $what ($*)" >&2
    exit 1
  fi
  rm -f "$log"
}

node_major() {
  local v
  v="$(node --version 2>/dev/null || echo v0)"
  v="${v#v}"
  echo "${v%%.*}"
}

# 1. Node >= 22.
if (( $(node_major) < 22 )); then
  command -v npm >/dev/null || { echo "bootstrap: npm is required to install Node 24" >&2; exit 1; }
  run_install "node 24 (into .tools/node)" \
    npm install --prefix "$BPAVL_ROOT/.tools/node" --no-save --no-package-lock --no-audit --no-fund node@24
  bpavl_env
  if (( $(node_major) < 22 )); then
    echo "bootstrap: node is still $(node --version) after installing node@24 into .tools/node" >&2
    exit 1
  fi
fi

# 2. Rust wasm target.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  run_install "rust target wasm32-unknown-unknown" rustup target add wasm32-unknown-unknown
fi

# 2b. rustfmt and clippy, for the gate in `npm test`.
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$component"; then
    run_install "rust component $component" rustup component add "$component"
  fi
done

# 3. wasm-bindgen CLI, which must match the wasm-bindgen crate in Cargo.lock exactly.
#    Cargo.lock puts `version = ...` on the line right after `name = ...`.
if [[ -f Cargo.lock ]]; then
  wb_version="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)"
  if [[ -n "$wb_version" && "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $wb_version" ]]; then
    run_install "wasm-bindgen-cli $wb_version" cargo install wasm-bindgen-cli --version "=$wb_version"
  fi
fi

# 4. wasm-pack, only once there is a wasm package to build.
if [[ -d packages/bpavl-wasm ]] && ! command -v wasm-pack >/dev/null; then
  run_install "wasm-pack" cargo install wasm-pack
fi

# 5. Chromium for browser tests, only once there are browser tests.
if [[ -d tests/e2e || -f playwright.config.ts ]] && ! command -v chromium >/dev/null; then
  run_install "chromium (apt)" \
    bash -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium'
fi

# 6. npm dependencies. The stamp lives inside node_modules so that deleting
#    node_modules (or `npm ci` recreating it) invalidates it; it is refreshed
#    whenever package.json or package-lock.json is newer.
stamp=node_modules/.bpavl-bootstrap-stamp
if [[ ! -f $stamp || package.json -nt $stamp || package-lock.json -nt $stamp ]]; then
  if [[ -f package-lock.json ]]; then
    run_install "npm dependencies (npm ci)" npm ci --no-audit --no-fund
  else
    run_install "npm dependencies (npm install)" npm install --no-audit --no-fund
  fi
  mkdir -p node_modules
  touch "$stamp"
fi

if (( $# > 0 )); then exec "$@"; fi
