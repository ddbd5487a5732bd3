// The state store's model run on the IndexedDB backend in real headless
// Chromium: tests/browser/store is built with Vite (no config, no plugins)
// against the built @bpavl/storage (its browser entry) and the store's
// sources, served from 127.0.0.1, and runs packages/store/test/model.ts,
// the model that the memory and Node backends run in vitest, with fewer
// steps: random puts, deletes, commits, prunes, rollbacks and reopens, every
// retained version read and proved against its model.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPage, checkWasmBuilt, repoRoot } from './build.mjs';
import { serve } from './serve.mjs';
import type { CaseResults } from './cases-page.ts';
import { MODEL_RUNS, runName } from './store/runs.ts';

let outDir: string;
let server: Awaited<ReturnType<typeof serve>>;

test.beforeAll(async () => {
  test.setTimeout(120_000);
  checkWasmBuilt();
  execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/storage'], { cwd: repoRoot, stdio: ['ignore', process.stderr, process.stderr] });
  outDir = mkdtempSync(join(tmpdir(), 'bpavl-browser-store-'));
  await buildPage(new URL('./store/', import.meta.url), outDir);
  server = await serve(outDir);
});

test.afterAll(async () => {
  await server?.close();
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

test('the store model runs on IndexedDB in Chromium: every retained version reads and proves as its model', async ({ page }) => {
  test.setTimeout(180_000);
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
  });
  await page.goto(server.url);
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'done', { timeout: 170_000 });
  const results = (await page.evaluate(() => window.__storeResults)) as CaseResults;
  expect(results.failures).toEqual([]);
  expect(results.passed).toEqual(MODEL_RUNS.map(runName));
  expect(problems).toEqual([]);
  test.info().annotations.push({ type: 'store', description: `${results.passed.length} runs in ${Math.round(results.ms)} ms` });
});
