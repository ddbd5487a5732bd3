// The vector suite (spec/vectors) in real headless Chromium, loading the
// packages as an app would: tests/browser/app is built with Vite (no config,
// no plugins), served from 127.0.0.1, and runs every case of
// packages/light-client/test/vectors.cases.ts against the pure-TS verifier and
// against @bpavl/wasm.
import { expect, test } from '@playwright/test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPage } from './build.mjs';
import { serve } from './serve.mjs';
import type { Results } from './app/main.ts';

const FILES = ['existence', 'absence', 'range', 'chunk_proof', 'chunk_envelope', 'multiproof'];

/**
 * Tests per implementation, counted from the JSON independently of the page:
 * every valid and every invalid case of each file, plus one tamper test per file
 * and one test of the invalid existence cases through `verifyExistenceBatch`.
 */
const perImpl = FILES.reduce((n, f) => {
  const v = JSON.parse(readFileSync(new URL(`../../spec/vectors/${f}.json`, import.meta.url), 'utf8'));
  return n + v.valid.length + v.invalid.length + 1;
}, 1);

let outDir: string;
let server: Awaited<ReturnType<typeof serve>>;

test.beforeAll(async () => {
  test.setTimeout(120_000);
  outDir = mkdtempSync(join(tmpdir(), 'bpavl-browser-app-'));
  await buildPage(new URL('./app/', import.meta.url), outDir);
  server = await serve(outDir);
});

test.afterAll(async () => {
  await server?.close();
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

test('the vector suite passes in Chromium for the TS verifier and @bpavl/wasm', async ({ page }) => {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
  });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));

  const wasmResponse = page.waitForResponse((r) => r.url().endsWith('.wasm'));
  await page.goto(server.url);
  // The .wasm comes from the asset Vite emitted, with the MIME type streaming compilation needs.
  const wasm = await wasmResponse;
  expect(wasm.status()).toBe(200);
  expect(wasm.headers()['content-type']).toBe('application/wasm');

  const status = page.locator('#status');
  await expect(status).toHaveAttribute('data-state', /^(done|error)$/, { timeout: 90_000 });
  const results = (await page.evaluate(() => window.__results)) as Results;

  expect(results.error, results.error).toBeUndefined();
  expect(await status.textContent()).toBe('done');
  expect(results.failures, JSON.stringify(results.failures.slice(0, 10), null, 2)).toEqual([]);
  expect(results.failed).toBe(0);
  expect(results.byImpl).toEqual({
    ts: { total: perImpl, passed: perImpl, failed: 0 },
    wasm: { total: perImpl, passed: perImpl, failed: 0 },
  });
  expect(results.passed).toBe(perImpl * 2);
  expect(problems).toEqual([]);
  test.info().annotations.push({
    type: 'vectors',
    description: `${results.passed} passed (${perImpl} × 2) in ${Math.round(results.ms)} ms, ${results.userAgent}`,
  });
});
