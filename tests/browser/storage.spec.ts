// The storage adapter suite on the IndexedDB backend in real headless
// Chromium: tests/browser/storage is built with Vite (no config, no plugins)
// against the built @bpavl/storage (its browser entry, as an app bundles it),
// served from 127.0.0.1, and runs every case of
// packages/storage/test/adapter-suite.ts, the suite the memory and Node
// backends run in vitest.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adapterCases } from '../../packages/storage/test/adapter-suite.ts';
import { buildPage, repoRoot } from './build.mjs';
import { serve } from './serve.mjs';
import type { StorageResults } from './storage/main.ts';

let outDir: string;
let server: Awaited<ReturnType<typeof serve>>;

test.beforeAll(async () => {
  test.setTimeout(120_000);
  execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/storage'], { cwd: repoRoot, stdio: ['ignore', process.stderr, process.stderr] });
  outDir = mkdtempSync(join(tmpdir(), 'bpavl-browser-storage-'));
  await buildPage('storage', outDir);
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
