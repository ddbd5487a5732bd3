// @bpavl/wasm: bpavl-core compiled to WebAssembly (see README.md).

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
  type Commit,
  type EntryPosition,
  type Neighbour,
  type AbsenceResult,
  type ChunkPosition,
  type RangeResult,
  type MultiproofResult,
  type BpavlError,
  type WriteSet,
  type ChunkWrite,
  type RecordTable,
  type Lookup,
  type Proven,
  type ProvenAbsent,
  type PagedBytes,
  type VersionRecord,
  type CatchUpFetch,
  type CaughtUp,
  type VerifiedSubtree,
} from './pkg/bpavl_wasm.js';

/**
 * Loads the WebAssembly module; call (and await) once before anything else.
 * Idempotent: later calls return the same promise.
 *
 * Without `input` the module is read from `pkg/bpavl_wasm_bg.wasm` next to
 * this package's entry: from disk in Node (`node:fs`), fetched in browsers
 * (bundlers such as Vite emit it as an asset). Pass `input` (a URL, a
 * `Response`, the bytes or a compiled module) to load it from elsewhere.
 *
 * ```js
 * import { init, Tree } from '@bpavl/wasm';
 * await init();
 * const tree = new Tree();
 * ```
 */
export function init(input?: URL | string | Response | Promise<Response> | BufferSource | WebAssembly.Module): Promise<void>;

/**
 * Instantiates the module synchronously from its bytes or a compiled
 * `WebAssembly.Module` (for callers that already hold them, e.g. a worker).
 * Does nothing if the module is already loaded.
 */
export function initSync(module: BufferSource | WebAssembly.Module): void;
