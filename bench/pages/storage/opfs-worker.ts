// OPFS through a synchronous access handle (dedicated workers only): records
// appended to one file, flushed once per transaction, found again through
// an in-memory index. The least a real OPFS backend would do (it would also
// need a crash-safe index), so a bound on what OPFS could reach.
import { BLOB, BLOBS, LIST, SMALL, TXN_BLOBS, UPDATE_LISTS, UPDATE_SMALL, same, shuffled, value, type EngineResult } from './workload.ts';

/** The worker-only part of a file handle (lib.webworker; this folder type-checks against lib.dom). */
interface SyncAccessHandle {
  write(bytes: Uint8Array, options: { at: number }): number;
  read(into: Uint8Array, options: { at: number }): number;
  flush(): void;
  close(): void;
}

async function run(): Promise<EngineResult> {
  const root = await navigator.storage.getDirectory();
  await root.removeEntry('bench', { recursive: true }).catch(() => undefined);
  const file = await (await root.getDirectoryHandle('bench', { create: true })).getFileHandle('data', { create: true });
  const handle = await (file as unknown as { createSyncAccessHandle(): Promise<SyncAccessHandle> }).createSyncAccessHandle();
  const index = new Map<number, [at: number, length: number]>();
  let end = 0;
  const put = (id: number, bytes: Uint8Array) => {
    handle.write(bytes, { at: end });
    index.set(id, [end, bytes.length]);
    end += bytes.length;
  };
  let t0 = performance.now();
  for (let first = 0; first < BLOBS; first += TXN_BLOBS) {
    for (let i = first; i < Math.min(BLOBS, first + TXN_BLOBS); i++) put(i, value(i, BLOB));
    handle.flush();
  }
  const bulk = (BLOBS * BLOB) / 1e6 / ((performance.now() - t0) / 1000);

  t0 = performance.now();
  for (let i = 0; i < UPDATE_SMALL; i++) put(1e6 + i, value(i, SMALL));
  for (let i = 0; i < UPDATE_LISTS; i++) put(2e6 + i, value(i, LIST));
  handle.flush();
  const update = (performance.now() - t0) / 1000;

  t0 = performance.now();
  for (const i of shuffled(BLOBS)) {
    const [at, length] = index.get(i)!;
    const got = new Uint8Array(length);
    handle.read(got, { at });
    if (!same(got, value(i, BLOB))) throw new Error(`OPFS: blob ${i} read back wrong`);
  }
  const reads = BLOBS / ((performance.now() - t0) / 1000);
  handle.close();
  await root.removeEntry('bench', { recursive: true });
  return { bulk_mb_s: bulk, update_commit_s: update, blob_reads_per_s: reads };
}

run().then(
  (result) => postMessage({ result }),
  (e: unknown) => postMessage({ error: String(e) }),
);
