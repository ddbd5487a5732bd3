// The shared vector suite against the pure TypeScript verifier.
import {
  verifyAbsence,
  verifyChunk,
  verifyChunkProof,
  verifyExistence,
  verifyRange,
} from '../src/verify.js';
import { runVectorSuite, type VerifierImpl } from './vectors.shared.js';

export const tsImpl: VerifierImpl = {
  verifyExistence,
  verifyAbsence(root, key, proof) {
    const { left, right } = verifyAbsence(root, key, proof);
    return { leftKey: left?.key ?? null, rightKey: right?.key ?? null };
  },
  verifyRange,
  verifyChunkProof,
  verifyChunk,
};

runVectorSuite('ts', tsImpl);
