/**
 * The two verifiers in the vector suite's shape ({@link VerifierImpl}), built
 * from the modules the caller imports: the vitest suites pass `../src/verify.js`,
 * the browser page the packages (`@bpavl/light-client/verify`, `@bpavl/wasm`).
 */
import type { VerifierImpl } from './vectors.cases.js';
import type * as verify from '../src/verify.js';
import type * as wasmModule from '@bpavl/wasm';

type TsVerify = Pick<typeof verify, 'verifyExistence' | 'verifyAbsence' | 'verifyRange' | 'verifyChunkProof' | 'verifyChunk'>;

/** The pure-TS verifier. */
export function tsVerifier(lc: TsVerify): VerifierImpl {
  return {
    verifyExistence: lc.verifyExistence,
    verifyAbsence(root, key, proof) {
      const { left, right } = lc.verifyAbsence(root, key, proof);
      return { leftKey: left?.key ?? null, rightKey: right?.key ?? null };
    },
    verifyRange: lc.verifyRange,
    verifyChunkProof: lc.verifyChunkProof,
    verifyChunk: lc.verifyChunk,
  };
}

/** @bpavl/wasm, with chunk envelopes through the light client's WASM fast path (`lc.verifyChunk(…, { wasm })`). */
export function wasmVerifier(wasm: typeof wasmModule, lc: Pick<TsVerify, 'verifyChunk'>): VerifierImpl {
  return {
    verifyExistence: wasm.verifyExistence,
    verifyAbsence(root, key, proof) {
      wasm.verifyAbsence(root, key, proof);
      return undefined; // the WASM verifier does not report the neighbours
    },
    verifyRange: wasm.verifyRange,
    verifyChunkProof: wasm.verifyChunkProof,
    verifyChunk: (root, index, envelope) => lc.verifyChunk(root, index, envelope, { wasm }),
  };
}
