// The storage adapter suite (packages/storage/test/adapter-suite.ts) on the
// IndexedDB backend in a browser page, loading @bpavl/storage/indexeddb as an
// app would. Each case gets a database of its own, deleted afterwards; the
// page publishes `window.__storageResults` and sets #status to "done". It
// also hands the backend to the spec as `window.__openIndexedDbBackend`, for
// the checks that take two tabs.
import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { adapterCases } from '../../../packages/storage/test/adapter-suite.ts';
import { type CaseResults, markDone, runCases } from '../cases-page.ts';

/** What the page publishes. */
export type StorageResults = CaseResults;

declare global {
  interface Window {
    __storageResults?: StorageResults;
    __openIndexedDbBackend?: typeof openIndexedDbBackend;
  }
}

window.__openIndexedDbBackend = openIndexedDbBackend;

window.__storageResults = await runCases(
  adapterCases.map((c) => ({ name: c.name, run: (database: string) => c.run({ open: (options) => openIndexedDbBackend({ ...options, name: database }) }) })),
  'adapter-suite',
);
markDone();
