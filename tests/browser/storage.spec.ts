// The storage adapter suite on the IndexedDB backend in real headless
// Chromium: tests/browser/storage is built with Vite (no config, no plugins)
// against the built @bpavl/storage (its browser entry, as an app bundles it),
// served from 127.0.0.1, and runs every case of
// packages/storage/test/adapter-suite.ts, the suite the memory and Node
// backends run in vitest. Then two tabs of one origin: one writer at a time
// across tabs, a reader beside it, and what was written after a reload.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adapterCases } from '../../packages/storage/test/adapter-suite.ts';
import { buildPage, repoRoot } from './build.mjs';
import { serve } from './serve.mjs';
import type { StorageBackend } from '../../packages/storage/src/port.ts';
import type { StorageResults } from './storage/main.ts';

/** A tab's window, holding the backends it opened under names of the test's choosing. */
type Tab = Record<string, StorageBackend>;

let outDir: string;
let server: Awaited<ReturnType<typeof serve>>;

test.beforeAll(async () => {
  test.setTimeout(120_000);
  execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/storage'], { cwd: repoRoot, stdio: ['ignore', process.stderr, process.stderr] });
  outDir = mkdtempSync(join(tmpdir(), 'bpavl-browser-storage-'));
  await buildPage(new URL('./storage/', import.meta.url), outDir);
  server = await serve(outDir);
});

test.afterAll(async () => {
  await server?.close();
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

test('the storage adapter suite passes on IndexedDB in Chromium', async ({ page }) => {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
  });
  await page.goto(server.url);
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'done', { timeout: 90_000 });
  const results = (await page.evaluate(() => window.__storageResults)) as StorageResults;
  expect(results.failures).toEqual([]);
  expect(results.passed).toEqual(adapterCases.map((c) => c.name));
  expect(problems).toEqual([]);
  test.info().annotations.push({ type: 'storage', description: `${results.passed.length} cases in ${Math.round(results.ms)} ms` });
});

test('two tabs: the second writer is refused, a reader reads beside the writer, a reload keeps what was written', async ({ context }) => {
  const [a, b] = [await context.newPage(), await context.newPage()];
  for (const page of [a, b]) {
    await page.goto(server.url);
    await expect(page.locator('#status')).toHaveAttribute('data-state', 'done', { timeout: 90_000 });
  }
  // Each tab keeps its backends on `window` between evaluations.
  const open = (page: typeof a, as: string, readOnly: boolean) =>
    page.evaluate(
      async ({ as, readOnly }) => {
        try {
          (window as unknown as Tab)[as] = await window.__openIndexedDbBackend!({ name: 'two-tabs', tables: ['t'], readOnly });
          return 'opened';
        } catch (e) {
          return (e as { code?: string }).code ?? String(e);
        }
      },
      { as, readOnly },
    );
  const write = (page: typeof a, as: string, n: number) =>
    page.evaluate(
      ({ as, n }) => (window as unknown as Tab)[as].write({ puts: [['t', Uint8Array.of(n), Uint8Array.of(n, n)]] }),
      { as, n },
    );
  const read = (page: typeof a, as: string, n: number) =>
    page.evaluate(
      async ({ as, n }) => {
        const v = await (window as unknown as Tab)[as].get('t', Uint8Array.of(n));
        return v && Array.from(v);
      },
      { as, n },
    );

  expect(await open(a, 'writer', false)).toBe('opened');
  await write(a, 'writer', 1);
  expect(await open(b, 'writer', false)).toBe('STORE_LOCKED');
  expect(await open(b, 'reader', true)).toBe('opened');
  expect(await read(b, 'reader', 1)).toEqual([1, 1]);
  await write(a, 'writer', 2);
  expect(await read(b, 'reader', 2)).toEqual([2, 2]);

  await a.reload(); // the writer's tab goes away, and its Web Lock with it
  await expect(a.locator('#status')).toHaveAttribute('data-state', 'done', { timeout: 90_000 });
  expect(await open(b, 'writer', false)).toBe('opened');
  await write(b, 'writer', 3);
  expect(await open(a, 'reader', true)).toBe('opened');
  expect([await read(a, 'reader', 1), await read(a, 'reader', 2), await read(a, 'reader', 3)]).toEqual([[1, 1], [2, 2], [3, 3]]);
});

test('what is not a store of ours: another application’s database, no database at all, a connection that holds on, records of other types', async ({ page }) => {
  test.setTimeout(120_000);
  await page.goto(server.url);
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'done', { timeout: 90_000 });
  const outcome = await page.evaluate(async () => {
    const open = window.__openIndexedDbBackend!;
    const code = async (action: () => Promise<unknown>) => {
      try {
        await action();
        return 'ok';
      } catch (e) {
        return (e as { code?: string }).code ?? `${(e as Error).name}: ${(e as Error).message}`;
      }
    };
    const req = <T,>(r: IDBRequest<T>) => new Promise<T>((ok, fail) => ((r.onsuccess = () => ok(r.result)), (r.onerror = () => fail(r.error))));
    /** A database made by another application: its stores, made at `version`. */
    const foreign = async (name: string, version: number, stores: Array<[string, IDBObjectStoreParameters?]>) => {
      const r = indexedDB.open(name, version);
      r.onupgradeneeded = () => stores.forEach(([s, p]) => r.result.createObjectStore(s, p));
      (await req(r)).close();
    };
    const versionOf = async (name: string) => (await indexedDB.databases()).find((d) => d.name === name)?.version;
    const out: Record<string, unknown> = {};

    await foreign('other-app', 3, [['users'], ['settings']]);
    out.otherWriter = await code(() => open({ name: 'other-app', tables: ['nodes', 'meta'] }));
    out.otherReader = await code(() => open({ name: 'other-app', tables: ['nodes', 'meta'], readOnly: true }));
    out.otherVersion = await versionOf('other-app');
    await foreign('other-keypath', 1, [['meta', { keyPath: 'id' }]]);
    out.keyPathWriter = await code(() => open({ name: 'other-keypath', tables: ['nodes', 'meta'] }));
    out.keyPathVersion = await versionOf('other-keypath');

    out.neverMadeReader = await code(() => open({ name: 'never-made', tables: ['nodes'], readOnly: true }));
    out.neverMadeListed = (await indexedDB.databases()).some((d) => d.name === 'never-made');

    // A store made by an earlier version of the backend (no mark) is still ours.
    await foreign('unmarked', 1, [['nodes'], ['meta']]);
    const unmarked = await open({ name: 'unmarked', tables: ['nodes', 'meta'] });
    await unmarked.write({ puts: [['nodes', Uint8Array.of(1), Uint8Array.of(2)]] });
    out.unmarked = Array.from((await unmarked.get('nodes', Uint8Array.of(1)))!);
    await unmarked.close();

    // A connection of another kind that ignores `versionchange` blocks a writer's upgrade: refused, not hung.
    const first = await open({ name: 'held-on', tables: ['nodes'] });
    await first.close();
    const holder = await req(indexedDB.open('held-on'));
    const started = performance.now();
    out.blockedWriter = await code(() => open({ name: 'held-on', tables: ['nodes', 'meta'] }));
    out.blockedWithin = performance.now() - started < 15_000;
    holder.close();
    out.afterBlocked = await code(async () => (await open({ name: 'held-on', tables: ['nodes', 'meta'] })).close());

    // Records that are not bytes, written around the backend.
    const store = await open({ name: 'raw-damage', tables: ['nodes'] });
    await store.write({ puts: [['nodes', Uint8Array.of(1), Uint8Array.of(1)]] });
    await store.close();
    const raw = await req(indexedDB.open('raw-damage'));
    const tx = raw.transaction('nodes', 'readwrite');
    tx.objectStore('nodes').put('text', Uint8Array.of(2));
    tx.objectStore('nodes').put(Uint8Array.of(3), 8);
    await new Promise((ok) => (tx.oncomplete = ok));
    raw.close();
    const reader = await open({ name: 'raw-damage', tables: ['nodes'], readOnly: true });
    out.stringValue = await code(() => reader.get('nodes', Uint8Array.of(2)));
    out.stringValueMany = await code(() => reader.getMany('nodes', [Uint8Array.of(1), Uint8Array.of(2)]));
    out.numberKeyScan = await code(async () => {
      for await (const _ of reader.scan('nodes')) void _;
    });
    out.goodValue = Array.from((await reader.get('nodes', Uint8Array.of(1)))!);
    await reader.close();
    for (const name of ['other-app', 'other-keypath', 'unmarked', 'held-on', 'raw-damage']) indexedDB.deleteDatabase(name);
    return out;
  });
  expect(outcome).toEqual({
    otherWriter: 'STORE_NOT_A_DATABASE',
    otherReader: 'STORE_NOT_A_DATABASE',
    otherVersion: 3,
    keyPathWriter: 'STORE_NOT_A_DATABASE',
    keyPathVersion: 1,
    neverMadeReader: 'STORE_NOT_A_DATABASE',
    neverMadeListed: false,
    unmarked: [2],
    blockedWriter: 'STORE_LOCKED',
    blockedWithin: true,
    afterBlocked: 'ok',
    stringValue: 'STORE_CORRUPT',
    stringValueMany: 'STORE_CORRUPT',
    numberKeyScan: 'STORE_CORRUPT',
    goodValue: [1],
  });
});
