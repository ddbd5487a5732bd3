// @bpavl/baseline-wasm: the B+AVL paper's Baseline (crates/baseline) in WebAssembly.

export { BaselineTree, Importer, defaultChunkBytes } from './pkg/bpavl_baseline_wasm.js';

/**
 * What every refused insert or failed import throws: `name` is
 * `'BaselineError'`, `code` the stable code of crates/baseline/README.md
 * (`TRUNCATED`, `KEYS_NOT_SORTED`, `REBUILD_INCOMPLETE`, …).
 */
export interface BaselineError extends Error {
  name: 'BaselineError';
  code: string;
}

/**
 * Loads the WebAssembly module; call (and await) once before anything else.
 * Idempotent. Without `input` the module is read from
 * `pkg/bpavl_baseline_wasm_bg.wasm` next to this package's entry.
 */
export function init(input?: URL | string | Response | Promise<Response> | BufferSource | WebAssembly.Module): Promise<void>;

/** Instantiates the module synchronously from its bytes or a compiled `WebAssembly.Module`. */
export function initSync(module: BufferSource | WebAssembly.Module): void;
