// The storage adapter suite (packages/storage/test/adapter-suite.ts) on the
// IndexedDB backend in a browser page, loading @bpavl/storage/indexeddb as an
// app would. Each case gets a database of its own, deleted afterwards; the
// page publishes `window.__storageResults` and sets #status to "done". It
// also hands the backend to the spec as `window.__openIndexedDbBackend`, for
// the checks that take two tabs.
import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { adapterCases } from '../../../packages/storage/test/adapter-suite.ts';

export interface StorageResults {
  passed: string[];
  failures: Array<{ name: string; error: string }>;
  ms: number;
}

declare global {
  interface Window {
    __storageResults?: StorageResults;
    __openIndexedDbBackend?: typeof openIndexedDbBackend;
  }
}

window.__openIndexedDbBackend = openIndexedDbBackend;

async function deleteDatabase(name: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const req = indexedDB.deleteDatabase(name);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
  });
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const results: StorageResults = { passed: [], failures: [], ms: 0 };
  for (const [i, c] of adapterCases.entries()) {
    const name = `adapter-suite-${i}`;
    try {
      await c.run({ open: (options) => openIndexedDbBackend({ ...options, name }) });
      results.passed.push(c.name);
    } catch (e) {
      results.failures.push({ name: c.name, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    } finally {
      await deleteDatabase(name);
    }
  }
  results.ms = performance.now() - t0;
  window.__storageResults = results;
  document.querySelector('#summary')!.textContent = JSON.stringify(results, null, 2);
  const status = document.querySelector<HTMLElement>('#status')!;
  status.dataset.state = 'done';
  status.textContent = 'done';
}

void main();
