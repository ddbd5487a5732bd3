// The shared vector suite against @bpavl/wasm, with chunk envelopes going
// through this package's WASM fast path (`wasmVerifier` uses
// `verifyChunk(root, i, bytes, { wasm })`).
// Needs the WASM build (packages/bpavl-wasm/pkg, `npm run build -w packages/bpavl-wasm`).
import * as wasm from '@bpavl/wasm';
import { wasmVerifier } from '../src/verify.js';
import { runVectorSuite } from './vectors.shared.js';

await wasm.init();

runVectorSuite('wasm (light-client fast path for chunks)', wasmVerifier(wasm));
