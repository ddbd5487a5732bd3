// The state store's model run (packages/store/test/model.ts) on the
// IndexedDB backend in a browser page, loading @bpavl/storage/indexeddb and
// the store as an app would. Each run gets a database of its own, deleted
// afterwards; the page publishes `window.__storeResults` and sets #status
// to "done".
import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { openState, TABLES } from '../../../packages/store/src/index.ts';
import { runModel } from '../../../packages/store/test/model.ts';
import { MODEL_RUNS, runName } from './runs.ts';

export interface StoreResults {
  passed: string[];
  failures: Array<{ name: string; error: string }>;
  ms: number;
}

declare global {
  interface Window {
    __storeResults?: StoreResults;
  }
}

async function deleteDatabase(name: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const req = indexedDB.deleteDatabase(name);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
  });
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const results: StoreResults = { passed: [], failures: [], ms: 0 };
  for (const [i, run] of MODEL_RUNS.entries()) {
    const name = `store-model-${i}`;
    const place = {
      open: async (options: { capacity?: number } = {}) =>
        openState({ backend: await openIndexedDbBackend({ name, tables: TABLES, readOnly: false }), ...options }),
    };
    try {
      await runModel(place, run.capacity, run.seed, run.steps, run.domain);
      results.passed.push(runName(run));
    } catch (e) {
      results.failures.push({ name: runName(run), error: e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : String(e) });
    } finally {
      await deleteDatabase(name);
    }
  }
  results.ms = performance.now() - t0;
  window.__storeResults = results;
  document.querySelector('#summary')!.textContent = JSON.stringify(results, null, 2);
  const status = document.querySelector<HTMLElement>('#status')!;
  status.dataset.state = 'done';
  status.textContent = 'done';
}

void main();
