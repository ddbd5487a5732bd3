// The shared vector suite against @bpavl/wasm, with chunk envelopes going
// through this package's WASM fast path (`verifyChunk(root, i, bytes, { wasm })`).
// Needs the WASM build (packages/bpavl-wasm/pkg, `npm run build -w packages/bpavl-wasm`).
import * as wasm from '@bpavl/wasm';
import { verifyChunk } from '../src/verify.js';
import { runVectorSuite, type VerifierImpl } from './vectors.shared.js';

await wasm.init();

const wasmImpl: VerifierImpl = {
  verifyExistence: wasm.verifyExistence,
  verifyAbsence(root, key, proof) {
    wasm.verifyAbsence(root, key, proof);
    return undefined; // the WASM verifier does not report the neighbours
  },
  verifyRange: wasm.verifyRange,
  verifyChunkProof: wasm.verifyChunkProof,
  verifyChunk: (root, index, envelope) => verifyChunk(root, index, envelope, { wasm }),
};

runVectorSuite('wasm (light-client fast path for chunks)', wasmImpl);
