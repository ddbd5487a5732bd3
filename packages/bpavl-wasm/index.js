// @bpavl/wasm: bpavl-core compiled to WebAssembly (see README.md).
// The bindings are generated into ./pkg by wasm-pack (--target web); this
// entry only adds a loader that works unchanged in Node and in bundlers.

import initWasm, { initSync as initWasmSync } from './pkg/bpavl_wasm.js';

export {
  Tree,
  Snapshot,
  VerifiedChunk,
  Rebuilder,
  verifyExistence,
  verifyExistenceBatch,
  verifyAbsence,
  verifyRange,
  verifyMultiproof,
  multiproofFromProofs,
  verifyChunkProof,
  verifyChunk,
  Loader,
  StoredHead,
  CatchUp,
  verifySubtree,
  verifyLeaves,
  verifyEntries,
  StoreSync,
  StoreBulkLoad,
  Pages,
  PagedRange,
  decodeVersionRecord,
  entryValue,
  heldValue,
  encodeStoreRecord,
  decodeStoreRecord,
  checkKey,
} from './pkg/bpavl_wasm.js';

let loading;

/**
 * Loads the WebAssembly module; call (and await) once before anything else.
 * Idempotent: later calls return the same promise. Without `input`, the
 * module is read from the file next to this one: with `node:fs` when this
 * file has a `file:` URL (Node, Deno, Bun), else fetched (browsers; bundlers
 * such as Vite see the `new URL(..., import.meta.url)` and emit the asset).
 */
export function init(input) {
  loading ??= load(input).then(
    () => undefined,
    (e) => {
      loading = undefined;
      throw e;
    },
  );
  return loading;
}

async function load(input) {
  if (input === undefined) {
    const url = new URL('./pkg/bpavl_wasm_bg.wasm', import.meta.url);
    if (url.protocol === 'file:') {
      // Compiled here and instantiated with initSync: the generated loader
      // tests `typeof Request` and `typeof Response`, and in Node the first
      // touch of either loads undici, about 60 ms of an open.
      initWasmSync({ module: await WebAssembly.compile(await readFileUrl(url)) });
      return;
    }
    input = url;
  }
  await initWasm({ module_or_path: input });
}

async function readFileUrl(url) {
  // A computed specifier, so that bundlers leave the import alone: it only
  // runs where this file was loaded from disk.
  const fs = 'node:fs/promises';
  const { readFile } = await import(/* @vite-ignore */ /* webpackIgnore: true */ fs);
  return readFile(url);
}

/** Instantiates the module synchronously from its bytes (or a compiled `WebAssembly.Module`). */
export function initSync(module) {
  initWasmSync({ module });
}
