// The state store's model run (packages/store/test/model.ts) on the
// IndexedDB backend in a browser page, loading @bpavl/storage/indexeddb and
// the store as an app would. Each run gets a database of its own, deleted
// afterwards; the page publishes `window.__storeResults` and sets #status
// to "done".
import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { openState, TABLES } from '../../../packages/store/src/index.ts';
import { runModel } from '../../../packages/store/test/model.ts';
import { type CaseResults, markDone, runCases } from '../cases-page.ts';
import { MODEL_RUNS, runName } from './runs.ts';

declare global {
  interface Window {
    __storeResults?: CaseResults;
  }
}

const cases = MODEL_RUNS.map((run) => ({
  name: runName(run),
  run: (database: string) =>
    runModel(
      { open: async (options = {}) => openState({ backend: await openIndexedDbBackend({ name: database, tables: TABLES, readOnly: false }), ...options }) },
      run.capacity,
      run.seed,
      run.steps,
      run.domain,
      run.caches,
    ),
}));

window.__storeResults = await runCases(cases, 'store-model');
markDone();
