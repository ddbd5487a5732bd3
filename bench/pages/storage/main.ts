// IndexedDB (through @bpavl/storage/indexeddb, as the store uses it) against
// OPFS (opfs-worker.ts) on the same shapes; publishes
// `window.__storageBench` = { indexeddb, opfs } or { error }.
import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { BLOB, BLOBS, LIST, SMALL, TXN_BLOBS, UPDATE_LISTS, UPDATE_SMALL, key, same, shuffled, value, type EngineResult } from './workload.ts';

declare global {
  interface Window {
    __storageBench?: { indexeddb?: EngineResult; opfs?: EngineResult; error?: string };
  }
}

async function indexedDb(): Promise<EngineResult> {
  const backend = await openIndexedDbBackend({ name: 'storage-bench', tables: ['blobs', 'small'] });
  let t0 = performance.now();
  for (let first = 0; first < BLOBS; first += TXN_BLOBS) {
    const puts = [];
    for (let i = first; i < Math.min(BLOBS, first + TXN_BLOBS); i++) puts.push(['blobs', key(0, i), value(i, BLOB)] as const);
    await backend.write({ puts });
  }
  const bulk = (BLOBS * BLOB) / 1e6 / ((performance.now() - t0) / 1000);

  const puts = [];
  for (let i = 0; i < UPDATE_SMALL; i++) puts.push(['small', key(1, i), value(i, SMALL)] as const);
  for (let i = 0; i < UPDATE_LISTS; i++) puts.push(['small', key(2, i), value(i, LIST)] as const);
  t0 = performance.now();
  await backend.write({ puts });
  const update = (performance.now() - t0) / 1000;

  t0 = performance.now();
  for (const i of shuffled(BLOBS)) {
    if (!same(await backend.get('blobs', key(0, i)), value(i, BLOB))) throw new Error(`IndexedDB: blob ${i} read back wrong`);
  }
  const reads = BLOBS / ((performance.now() - t0) / 1000);
  await backend.close();
  await new Promise((resolve) => (indexedDB.deleteDatabase('storage-bench').onsuccess = resolve));
  return { bulk_mb_s: bulk, update_commit_s: update, blob_reads_per_s: reads };
}

function opfs(): Promise<EngineResult> {
  const worker = new Worker(new URL('./opfs-worker.ts', import.meta.url), { type: 'module' });
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => (data.error ? reject(new Error(data.error)) : resolve(data.result));
    worker.onerror = (e) => reject(new Error(e.message));
  }).finally(() => worker.terminate()) as Promise<EngineResult>;
}

const status = document.querySelector<HTMLElement>('#status')!;
try {
  window.__storageBench = { indexeddb: await indexedDb(), opfs: await opfs() };
} catch (e) {
  window.__storageBench = { error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
}
document.querySelector('#summary')!.textContent = JSON.stringify(window.__storageBench, null, 2);
status.dataset.state = 'done';

