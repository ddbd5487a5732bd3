// The golden-vector suite (spec/vectors) in a browser page, loading the
// packages as an app would: package imports, `await init()`, no Vite plugins.
// Runs every case of packages/light-client/test/vectors.cases.ts against the
// pure-TS verifier and against @bpavl/wasm, both through the `Verifier`
// interface of @bpavl/light-client/verify, then
// publishes `window.__results` and sets #status to "done" (or "error").
import { tsVerifier, wasmVerifier } from '@bpavl/light-client/verify';
import * as wasm from '@bpavl/wasm';
import { assertDeepEqual, vectorCases, type VectorSet } from '../../../packages/light-client/test/vectors.cases.js';
import absence from '../../../spec/vectors/absence.json';
import chunk_envelope from '../../../spec/vectors/chunk_envelope.json';
import chunk_proof from '../../../spec/vectors/chunk_proof.json';
import existence from '../../../spec/vectors/existence.json';
import multiproof from '../../../spec/vectors/multiproof.json';
import range from '../../../spec/vectors/range.json';

export interface Failure {
  impl: string;
  file: string;
  name: string;
  error: string;
}

export interface Results {
  passed: number;
  failed: number;
  /** Per implementation: tests run, passed and failed. */
  byImpl: Record<string, { total: number; passed: number; failed: number }>;
  failures: Failure[];
  ms: number;
  userAgent: string;
  error?: string;
}

declare global {
  interface Window {
    __results?: Results;
  }
}

const vectors: VectorSet = { existence, absence, range, chunk_proof, chunk_envelope, multiproof };

const tsImpl = tsVerifier;
const wasmImpl = wasmVerifier(wasm);

const status = document.querySelector<HTMLElement>('#status')!;
const summary = document.querySelector<HTMLElement>('#summary')!;

function finish(results: Results, state: 'done' | 'error'): void {
  window.__results = results;
  summary.textContent = JSON.stringify({ ...results, failures: results.failures.slice(0, 20) }, null, 2);
  status.dataset.state = state;
  status.textContent = state;
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const results: Results = { passed: 0, failed: 0, byImpl: {}, failures: [], ms: 0, userAgent: navigator.userAgent };
  try {
    await wasm.init();
    for (const [impl, verifier] of [['ts', tsImpl], ['wasm', wasmImpl]] as const) {
      const counts = { total: 0, passed: 0, failed: 0 };
      results.byImpl[impl] = counts;
      for (const c of vectorCases(vectors, verifier)) {
        counts.total++;
        try {
          c.run(assertDeepEqual);
          counts.passed++;
          results.passed++;
        } catch (e) {
          counts.failed++;
          results.failed++;
          results.failures.push({ impl, file: c.file, name: c.name, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
        }
      }
    }
    results.ms = performance.now() - t0;
    finish(results, 'done');
  } catch (e) {
    results.error = e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : String(e);
    results.ms = performance.now() - t0;
    finish(results, 'error');
  }
}

void main();
