/**
 * The chunk envelope (`0x05`) of `spec/chunk-format.md`: decoding with every
 * canonical-form check ("Encoding"), and `verifyChunk` ("Verification"):
 * decode, hash the entries, build the in-chunk tree, fold the chunk path,
 * then `ROOT_MISMATCH`, `CHUNK_INDEX_MISMATCH`, `KEY_HEIGHT_MISMATCH`.
 *
 * The hot path is nearly pure hashing: one flat buffer of `M · 32` bytes for
 * the entry hashes, the in-chunk tree built in place bottom-up, entries
 * returned as views into the envelope (no copies), one reusable SHA-256.
 * @module
 */

import { compareBytes, equalBytes, Reader } from './codec.js';
import { FORMAT_CHUNK_ENVELOPE, HASH_LEN, MAX_HEIGHT } from './constants.js';
import { fail, isProofError, ProofError } from './errors.js';
import { chunkHashInto, entryHashInto } from './hash.js';
import { chunkRootInPlace } from './inchunk.js';
import { bytesArg, indexArg, rootArg } from './input.js';
import { decodePath, foldPath, type PathStep } from './path.js';
import type { KeyValue } from './proofs.js';

/**
 * A decoded chunk envelope, not verified: plain data, with keys, values and
 * sibling hashes as views into the envelope bytes.
 *
 * @example
 * ```ts
 * const { capacity, keyHeight, entries, path } = decodeChunkEnvelope(bytes);
 * ```
 */
export interface ChunkEnvelope {
  /** The tree's chunk capacity `C`. */
  readonly capacity: number;
  /** The key-height the envelope claims (checked against the path by `verifyChunk`). */
  readonly keyHeight: number;
  /** The chunk's `[key, value]` entries in key order (strictly increasing keys). */
  readonly entries: KeyValue[];
  /** The chunk path, bottom-up. */
  readonly path: PathStep[];
}

/**
 * A chunk that verified against a trusted root; every field is
 * authenticated by it. The field names are those of `@bpavl/wasm`'s
 * `VerifiedChunk` (and of the Rust core's accessors).
 *
 * @example
 * ```ts
 * const chunk: VerifiedChunk = verifyChunk(root, 3, bytes);
 * for (const [key, value] of chunk.entries) store(key, value);
 * ```
 */
export interface VerifiedChunk {
  /** The chunk's index (equal to the index asked for). */
  readonly index: number;
  /** Total chunks in the tree. */
  readonly chunkCount: number;
  /** Total entries in the tree. */
  readonly entryCount: number;
  /** The tree's chunk capacity `C`. */
  readonly capacity: number;
  /** Height of the inner node holding this chunk's smallest key (0 for chunk 0). */
  readonly keyHeight: number;
  /** This chunk's `[key, value]` entries in key order, as views into the envelope bytes. */
  readonly entries: KeyValue[];
}

/**
 * The part of an initialized `@bpavl/wasm` module the fast path uses, typed
 * structurally so that this module never imports WASM. Its `verifyChunk`
 * must throw an `Error` whose `name` is `'ProofError'` and whose `code` is
 * from `spec/errors.md`.
 *
 * @example
 * ```ts
 * import * as wasm from '@bpavl/wasm';
 * const fast: WasmChunkVerifier = wasm;
 * ```
 */
export interface WasmChunkVerifier {
  verifyChunk(
    root: Uint8Array,
    index: number,
    bytes: Uint8Array,
  ): {
    readonly index: number;
    readonly chunkCount: number;
    readonly entryCount: number;
    readonly capacity: number;
    readonly keyHeight: number;
    free?(): void;
  };
}

/**
 * Options of {@link verifyChunk}.
 *
 * @example
 * ```ts
 * const opts: VerifyChunkOptions = { wasm: await import('@bpavl/wasm') };
 * ```
 */
export interface VerifyChunkOptions {
  /**
   * Verify the hashes in WebAssembly instead of with noble (the caller
   * imports and initializes `@bpavl/wasm` and passes the module). The result
   * and the error codes are the same.
   */
  readonly wasm?: WasmChunkVerifier | undefined;
}

function decode(bytes: Uint8Array): ChunkEnvelope {
  const r = new Reader(bytes, FORMAT_CHUNK_ENVELOPE);
  const capacity = r.capacity();
  const keyHeight = r.u8();
  if (keyHeight > MAX_HEIGHT) fail('HEIGHT_INVALID');
  const m = r.chunkSize(capacity);
  // Every entry takes at least 3 bytes: the input bounds the allocation.
  const entries: KeyValue[] = [];
  let prev: Uint8Array | undefined;
  for (let i = 0; i < m; i++) {
    const key = r.key();
    if (prev !== undefined && compareBytes(key, prev) <= 0) fail('KEYS_NOT_SORTED');
    prev = key;
    entries.push([key, r.value()]);
  }
  const path = decodePath(r, capacity, m);
  r.finish();
  return { capacity, keyHeight, entries, path };
}

/**
 * Decodes a chunk envelope with every canonical-form check of
 * `spec/chunk-format.md`, in order, without hashing: useful to inspect an
 * envelope; use {@link verifyChunk} to trust one.
 *
 * @throws {TypeError} `bytes` is not a Uint8Array.
 * @throws {ProofError} the first failing decoding check.
 * @example
 * ```ts
 * const env = decodeChunkEnvelope(bytes);
 * env.entries.length; // M
 * ```
 */
export function decodeChunkEnvelope(bytes: Uint8Array): ChunkEnvelope {
  return decode(bytesArg(bytes, 'bytes'));
}

/**
 * Checks chunk envelope `bytes` as chunk `index` of the tree with root
 * `root`, trusting nothing else (`spec/chunk-format.md`, "Verification"), and
 * returns its authenticated contents. With `{ wasm }` the checks run in
 * `@bpavl/wasm`; results and codes are identical.
 *
 * @throws {TypeError} `root` or `bytes` is not a Uint8Array, or `index` not a number.
 * @throws {RangeError} `root` is not 32 bytes, or `index` is not a safe integer ≥ 0.
 * @throws {ProofError} a decoding code, then `ROOT_MISMATCH`, `CHUNK_INDEX_MISMATCH`, `KEY_HEIGHT_MISMATCH`.
 * @example
 * ```ts
 * const chunk = verifyChunk(root, 3, bytes);
 * chunk.chunkCount; // total chunks: fetch 0 … chunkCount − 1
 * chunk.entries;    // [[key, value], …]
 * ```
 */
export function verifyChunk(root: Uint8Array, index: number, bytes: Uint8Array, options?: VerifyChunkOptions): VerifiedChunk {
  root = rootArg(root);
  index = indexArg(index);
  bytes = bytesArg(bytes, 'bytes');
  const wasm = options?.wasm;
  if (wasm !== undefined) return verifyChunkWasm(wasm, root, index, bytes);

  const env = decode(bytes);
  const { capacity, entries } = env;
  const m = entries.length;
  const level = new Uint8Array(m * HASH_LEN);
  for (let i = 0; i < m; i++) {
    const e = entries[i]!;
    entryHashInto(e[0], e[1], level, i * HASH_LEN);
  }
  chunkRootInPlace(level, m);
  const h = level.subarray(0, HASH_LEN);
  chunkHashInto(m, level, 0, h, 0);
  const f = foldPath(env.path, capacity, m, h);
  if (!equalBytes(f.root, root)) fail('ROOT_MISMATCH');
  if (f.index !== index) fail('CHUNK_INDEX_MISMATCH');
  if (f.keyHeight !== env.keyHeight) fail('KEY_HEIGHT_MISMATCH');
  return { index, chunkCount: f.chunkCount, entryCount: f.entryCount, capacity, keyHeight: env.keyHeight, entries };
}

/** The fast path: WASM verifies, then a hash-free decode yields the entry views. */
function verifyChunkWasm(wasm: WasmChunkVerifier, root: Uint8Array, index: number, bytes: Uint8Array): VerifiedChunk {
  let v: ReturnType<WasmChunkVerifier['verifyChunk']>;
  try {
    v = wasm.verifyChunk(root, index, bytes);
  } catch (err) {
    // Re-throw the module's coded Error as this package's ProofError class.
    if (isProofError(err) && !(err instanceof ProofError)) throw new ProofError(err.code, err.message);
    throw err;
  }
  try {
    const { entries } = decode(bytes);
    return {
      index: v.index,
      chunkCount: v.chunkCount,
      entryCount: v.entryCount,
      capacity: v.capacity,
      keyHeight: v.keyHeight,
      entries,
    };
  } finally {
    v.free?.();
  }
}

