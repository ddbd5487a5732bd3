/**
 * One shape for every verifier of `spec/proof-format.md` and
 * `spec/chunk-format.md`: {@link Verifier}, implemented by the pure
 * TypeScript verifier ({@link tsVerifier}) and by `@bpavl/wasm`
 * ({@link wasmVerifier}, from the module the caller imports, so that this
 * file never imports WASM). Both return the same results and throw
 * `ProofError`s with the same codes.
 *
 * @example
 * ```ts
 * import * as wasm from '@bpavl/wasm';
 * await wasm.init();
 * const v: Verifier = wasmVerifier(wasm); // or tsVerifier
 * const { left, right } = v.verifyAbsence(root, key, proof);
 * ```
 * @module
 */

import { verifyChunk, type VerifiedChunk, type WasmChunkVerifier } from './envelope.js';
import { isProofError, ProofError } from './errors.js';
import {
  verifyAbsence,
  verifyChunkProof,
  verifyExistence,
  verifyRange,
  type AbsenceResult,
  type ChunkPosition,
  type EntryPosition,
  type RangeResult,
} from './proofs.js';
import { verifyMultiproof, type MultiproofResult } from './multiproof.js';

/** One item of {@link Verifier.verifyExistenceBatch}. */
export interface ExistenceItem {
  readonly key: Uint8Array;
  readonly value: Uint8Array;
  readonly proof: Uint8Array;
}

/**
 * Every verifier, one signature each. Each method throws a `ProofError`
 * (`name` `'ProofError'`, `code` from `spec/errors.md`), a `TypeError` for
 * an argument of the wrong type, a `RangeError` for a number out of range.
 */
export interface Verifier {
  verifyExistence(root: Uint8Array, key: Uint8Array, value: Uint8Array, proof: Uint8Array): EntryPosition;
  /** One result per item, in order: its position, or the `ProofError` `verifyExistence` would throw (returned, not thrown). */
  verifyExistenceBatch(root: Uint8Array, items: readonly ExistenceItem[]): (EntryPosition | ProofError)[];
  verifyAbsence(root: Uint8Array, key: Uint8Array, proof: Uint8Array): AbsenceResult;
  verifyRange(
    root: Uint8Array,
    start: Uint8Array,
    end: Uint8Array | undefined,
    limit: number,
    proof: Uint8Array,
  ): RangeResult;
  verifyChunkProof(root: Uint8Array, proof: Uint8Array): ChunkPosition;
  verifyChunk(root: Uint8Array, index: number, envelope: Uint8Array): VerifiedChunk;
  verifyMultiproof(root: Uint8Array, keys: readonly Uint8Array[], proof: Uint8Array): MultiproofResult;
}

/**
 * The part of an initialized `@bpavl/wasm` module {@link wasmVerifier}
 * uses, typed structurally. Its errors carry `name` `'ProofError'` and a code.
 */
export interface WasmVerifierModule extends WasmChunkVerifier {
  verifyExistence(root: Uint8Array, key: Uint8Array, value: Uint8Array, proof: Uint8Array): EntryPosition;
  verifyExistenceBatch(root: Uint8Array, items: ExistenceItem[]): (EntryPosition | Error)[];
  verifyAbsence(root: Uint8Array, key: Uint8Array, proof: Uint8Array): AbsenceResult;
  verifyRange(root: Uint8Array, start: Uint8Array, end: Uint8Array | undefined, limit: number, proof: Uint8Array): RangeResult;
  verifyChunkProof(root: Uint8Array, proof: Uint8Array): ChunkPosition;
  verifyMultiproof(root: Uint8Array, keys: Uint8Array[], proof: Uint8Array): MultiproofResult;
}

/** The pure TypeScript verifier (`@noble/hashes`). */
export const tsVerifier: Verifier = {
  verifyExistence,
  verifyExistenceBatch(root, items) {
    return items.map(({ key, value, proof }) => {
      try {
        return verifyExistence(root, key, value, proof);
      } catch (err) {
        if (err instanceof ProofError) return err;
        throw err;
      }
    });
  },
  verifyAbsence,
  verifyRange,
  verifyChunkProof,
  verifyChunk: (root, index, envelope) => verifyChunk(root, index, envelope),
  verifyMultiproof,
};

/**
 * The verifier of an initialized `@bpavl/wasm` module. Chunk envelopes go
 * through the light client's WASM fast path, so `verifyChunk` returns the
 * same plain {@link VerifiedChunk} as {@link tsVerifier}; batch errors are
 * mapped to `ProofError`.
 */
export function wasmVerifier(wasm: WasmVerifierModule): Verifier {
  return {
    verifyExistence: (root, key, value, proof) => wasm.verifyExistence(root, key, value, proof),
    verifyExistenceBatch(root, items) {
      return wasm.verifyExistenceBatch(root, items as ExistenceItem[]).map((r) => {
        if (!(r instanceof Error)) return r;
        if (isProofError(r)) return new ProofError(r.code, r.message);
        throw r;
      });
    },
    verifyAbsence: (root, key, proof) => wasm.verifyAbsence(root, key, proof),
    verifyRange: (root, start, end, limit, proof) => wasm.verifyRange(root, start, end, limit, proof),
    verifyChunkProof: (root, proof) => wasm.verifyChunkProof(root, proof),
    verifyChunk: (root, index, envelope) => verifyChunk(root, index, envelope, { wasm }),
    verifyMultiproof: (root, keys, proof) => wasm.verifyMultiproof(root, keys as Uint8Array[], proof),
  };
}
