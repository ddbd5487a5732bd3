// The query client in real headless Chromium: tests/browser/query is built
// with Vite (no config, no plugins), served from 127.0.0.1, and gets and
// reads ranges from real `bpavl serve` peers on 127.0.0.1 (two honest, one
// lying), with @bpavl/wasm verifying. The answers must be the workload
// tree's, and the liar banned.
import { expect, test } from '@playwright/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPeers, stopPeers } from '../../bench/sync/peers.mjs';
import { workloadEntry } from '../../packages/peer/src/workload.ts';
import { buildPage } from './build.mjs';
import { serve } from './serve.mjs';

const ENTRIES = 3000;
const SEED = 3n;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
/** The workload's entries, in key order. */
const sorted = Array.from({ length: ENTRIES }, (_, i) => workloadEntry(SEED, i).map(hex) as [string, string]).sort(([a], [b]) =>
  a < b ? -1 : a > b ? 1 : 0,
);

let outDir: string;
let server: Awaited<ReturnType<typeof serve>>;
let peers: { info: { root: string; ws: string }; child: unknown }[] = [];

test.beforeAll(async () => {
  test.setTimeout(120_000);
  outDir = mkdtempSync(join(tmpdir(), 'bpavl-browser-query-'));
  await buildPage(new URL('./query/', import.meta.url), outDir);
  server = await serve(outDir);
  const tree = ['--entries', String(ENTRIES), '--chunk', '32', '--seed', String(SEED)];
  peers = await startPeers(
    [
      { args: [...tree, '--byzantine', 'corrupt-proof'], label: 'liar' },
      { args: tree, label: 'honest 1' },
      { args: tree, label: 'honest 2' },
    ],
    { concurrency: 3, timeoutMs: 60_000, log: () => {} },
  );
});

test.afterAll(async () => {
  if (peers.length > 0) await stopPeers(peers);
  await server?.close();
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

test('gets and ranges in Chromium give the tree\'s answers; the lying peer is banned', async ({ page }) => {
  await page.goto(server.url);
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  const root = peers[0]!.info.root;
  const present = [0, 17, 1234, 2999].map((i) => sorted[i]!);
  const absent = ['00', 'ff'.repeat(33), `${sorted[5]![0]}00`];
  const ranges = [
    { start: sorted[100]![0], end: sorted[160]![0], limit: 25 },
    { start: '', end: null, limit: 1000 },
  ];
  const got = await page.evaluate((args) => (window as unknown as { __query: (a: unknown) => Promise<unknown> }).__query(args), {
    root,
    peers: peers.map((p) => p.info.ws),
    gets: [...present.map(([k]) => k), ...absent],
    ranges,
  });
  const want = [...present.map(([, v]) => v), ...absent.map(() => null)];
  expect(got).toMatchObject({ values: want, many: want, banned: [{ peer: peers[0]!.info.ws, code: 'ROOT_MISMATCH' }] });
  const pages = (got as { pages: { entries: [string, string][]; complete: boolean }[][] }).pages;
  expect(pages[0]!.map((p) => p.entries.length)).toEqual([25, 25, 10]);
  expect(pages[0]!.flatMap((p) => p.entries)).toEqual(sorted.slice(100, 160));
  expect(pages[0]!.map((p) => p.complete)).toEqual([false, false, true]);
  expect(pages[1]!.flatMap((p) => p.entries)).toEqual(sorted);
});
