/**
 * `@bpavl/light-client/verify`: the pure TypeScript verifier of every format
 * in `spec/` (proof-format.md, chunk-format.md), with `@noble/hashes` as its
 * only dependency. It imports neither WASM nor any network code; the WASM
 * fast path of `verifyChunk` is a module object the caller passes in.
 *
 * @example
 * ```ts
 * import { verifyExistence, verifyChunk, ProofError } from '@bpavl/light-client/verify';
 * const { chunkIndex } = verifyExistence(root, key, value, proof);
 * const chunk = verifyChunk(root, 0, envelope);
 * // or through the one Verifier interface, pure TS or WASM:
 * const v: Verifier = wasm ? wasmVerifier(wasm) : tsVerifier;
 * ```
 * @module
 */

export { ProofError, isProofError, PROOF_ERROR_CODES, type ProofErrorCode } from './errors.js';
export {
  verifyExistence,
  verifyAbsence,
  verifyRange,
  verifyChunkProof,
  type KeyValue,
  type EntryPosition,
  type Neighbour,
  type AbsenceResult,
  type RangeResult,
  type ChunkPosition,
} from './proofs.js';
export { verifyMultiproof, type MultiproofResult } from './multiproof.js';
export {
  verifyChunk,
  decodeChunkEnvelope,
  type ChunkEnvelope,
  type VerifiedChunk,
  type VerifyChunkOptions,
  type WasmChunkVerifier,
} from './envelope.js';
export { tsVerifier, wasmVerifier, type Verifier, type ExistenceItem, type WasmVerifierModule } from './verifier.js';
export type { PathStep } from './path.js';
export { emptyRoot, entryHash } from './hash.js';
export { decodeVarint, encodeVarint } from './codec.js';
