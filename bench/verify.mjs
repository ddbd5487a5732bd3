#!/usr/bin/env node
// `npm run bench:verify`: verification speed of the pure-TS verifier
// (@bpavl/light-client/verify) and of @bpavl/wasm, in Node and in headless
// Chromium, on the standard workload (packages/peer/src/workload.ts), plus the
// gzipped sizes of what a browser downloads. A benchmark, not a test: it
// prints the targets next to the figures and exits 0 when they are missed.
//
//   npm run bench:verify [-- --n 100000 --capacity 256 --no-build]
//
// 1. builds @bpavl/wasm and @bpavl/light-client (skip with --no-build);
// 2. builds the tree in WASM (the standard workload of
//    packages/peer/src/workload.ts, inserted in order, chunk capacity 256),
//    takes existence proofs for i < 10,000 and every chunk envelope;
// 3. Node: the loops of bench/pages/verify/verify-bench.mjs (existence:
//    decode + verify per second, TS one call per proof, WASM through
//    verifyExistenceBatch, the way to verify many proofs (four hash chains
//    side by side in SIMD lanes), and one verifyExistence call per proof as
//    `wasm_verify_single_per_s`; chunks: MB of envelope verified per second;
//    every result checked; median pass, each loop ≥ 0.3 s);
// 4. Chromium: the same loops in bench/pages/verify (built with Vite, served
//    from 127.0.0.1 with the proofs and envelopes as one binary payload);
// 5. sizes: packages/light-client/scripts/size.mjs and packages/bpavl-wasm/scripts/size.mjs.
//
// Progress on stderr; the result lines, then one JSON line last, on stdout.
import { chromium } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildLightClient, buildPage, checkWasmBuilt } from '../tests/browser/build.mjs';
import { launchOptions } from '../tests/browser/chromium.mjs';
import { serve } from '../tests/browser/serve.mjs';
import { decodePayload, encodePayload, measure, MIN_SECONDS } from './pages/verify/verify-bench.mjs';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '100000' },
    capacity: { type: 'string', default: '256' },
    'no-build': { type: 'boolean', default: false },
  },
});
const n = Number(args.n);
const capacity = Number(args.capacity);
const MAX_PROVED = 10_000;
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

const TARGETS = {
  ts_verify_per_s: 25_000,
  wasm_verify_per_s: 120_000,
  /** No target of its own: the per-call figure beside the batch one. */
  wasm_verify_single_per_s: 0,
  ts_chunk_mb_s: 100,
  wasm_chunk_mb_s: 300,
  /** Chromium figures at least this fraction of Node's ("within 30 %"). */
  browser_ratio: 0.7,
};

const log = (s) => console.error(`bench:verify: ${s}`);
const run = (cmd, argv) => execFileSync(cmd, argv, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });

// 1. Builds (their output on stderr, stdout stays ours).
if (!args['no-build']) {
  log('building @bpavl/wasm and @bpavl/light-client');
  process.stderr.write(run('npm', ['run', '--silent', 'build', '-w', '@bpavl/wasm']));
  buildLightClient();
}
checkWasmBuilt();
const lc = await import('@bpavl/light-client/verify');
const wasm = await import('@bpavl/wasm');
await wasm.init();

// 2. The workload, the tree, the proofs and the envelopes.
const { workloadEntry } = await import('../packages/peer/src/workload.ts');
const entry = (i) => workloadEntry(0n, i);

let t0 = performance.now();
const tree = new wasm.Tree(capacity);
const proved = [];
for (let i = 0; i < n; i++) {
  const [key, value] = entry(i);
  tree.insert(key, value);
  if (i < MAX_PROVED) proved.push({ key, value });
}
const { root } = tree.commit();
const head = tree.head();
log(`generated the workload and built the ${n}-entry tree (capacity ${capacity}) in WASM in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
for (const e of proved) {
  e.proof = head.proveExistence(e.key);
  // The expected outputs, which the measured loops compare with.
  const r = wasm.verifyExistence(root, e.key, e.value, e.proof);
  e.chunkIndex = r.chunkIndex;
  e.position = r.position;
}
const envelopes = Array.from({ length: tree.chunkCount }, (_, i) => head.exportChunk(i));
tree.free();
const payloadBytes = encodePayload({ n, root, proved, envelopes });
const data = decodePayload(payloadBytes);
const proofBytesAvg = data.proofs.reduce((s, p) => s + p.length, 0) / data.proofs.length;

// 3. Node.
log(`Node ${process.version}: measuring (each loop ≥ ${MIN_SECONDS} s)`);
const node = await measure(lc, wasm, data);

// 4. Chromium.
const outDir = mkdtempSync(join(tmpdir(), 'bpavl-bench-verify-'));
let browser;
let server;
let chromiumVersion;
let web;
try {
  await buildPage(new URL('./pages/verify/', import.meta.url), outDir);
  server = await serve(outDir, { routes: { '/payload.bin': { type: 'application/octet-stream', body: payloadBytes } } });
  browser = await chromium.launch(launchOptions);
  chromiumVersion = browser.version();
  log(`Chromium ${chromiumVersion}: measuring (each loop ≥ ${MIN_SECONDS} s)`);
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.url);
  await page.locator('#status[data-state="done"], #status[data-state="error"]').waitFor({ timeout: 300_000 });
  web = await page.evaluate(() => window.__bench);
  if (web.error) throw new Error(`bench page failed: ${web.error}`);
  if (errors.length > 0) throw new Error(`bench page errors: ${errors.join('; ')}`);
} finally {
  await browser?.close();
  await server?.close();
  rmSync(outDir, { recursive: true, force: true });
}

// 5. Sizes, from the packages' own size scripts.
// The light client's script exits 1 over its budget, after printing the figure.
const lastJson = (argv) => {
  let out;
  try {
    out = run(process.execPath, argv);
  } catch (e) {
    out = e.stdout ?? '';
  }
  return JSON.parse(out.trim().split('\n').at(-1));
};
const verifyBundle = lastJson(['packages/light-client/scripts/size.mjs', '--json']);
const wasmSize = lastJson(['packages/bpavl-wasm/scripts/size.mjs']);

// Report.
const fmt = (x, unit) => (unit === '/s' ? `${Math.round(x).toLocaleString('en-US')} /s` : `${x.toFixed(1)} MB/s`);
const mark = (ok) => (ok ? 'ok' : 'MISSED');
const rows = [
  ['existence proofs, TS   ', 'ts_verify_per_s', '/s'],
  ['existence proofs, WASM ', 'wasm_verify_per_s', '/s'],
  ['  one call per proof    ', 'wasm_verify_single_per_s', '/s'],
  ['chunk envelopes, TS    ', 'ts_chunk_mb_s', 'MB/s'],
  ['chunk envelopes, WASM  ', 'wasm_chunk_mb_s', 'MB/s'],
];
const out = [];
out.push(`bench:verify  n = ${n}, capacity ${capacity}: ${data.proofs.length} existence proofs (avg ${proofBytesAvg.toFixed(1)} B), ` +
  `${data.envelopes.length} chunk envelopes (${(data.envelopeBytes / 1e6).toFixed(2)} MB); Node ${process.version}, Chromium ${chromiumVersion}`);
out.push(`${''.padEnd(24)}${'Node'.padStart(14)}  ${'target'.padEnd(18)}${'Chromium'.padStart(14)}  vs Node (target: within 30 %)`);
for (const [label, key, unit] of rows) {
  const target = TARGETS[key];
  const ratio = web[key] / node[key];
  const vsTarget = target > 0 ? `≥ ${fmt(target, unit)} ${mark(node[key] >= target)}` : '';
  out.push(
    `${label} ${fmt(node[key], unit).padStart(14)}  ${vsTarget.padEnd(18)}` +
      `${fmt(web[key], unit).padStart(14)}  ${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(0)} % ${mark(ratio >= TARGETS.browser_ratio)}`,
  );
}
out.push(`verify bundle (@bpavl/light-client/verify + @noble/hashes, minified, gzip -9): ${verifyBundle.gzip} B (budget ${verifyBundle.limit} B)`);
out.push(`wasm (pkg/bpavl_wasm_bg.wasm, gzip -9): ${wasmSize.wasm_gzip_bytes} B (${wasmSize.wasm_bytes} B raw)`);
out.push(`rates: median pass of ≥ ${MIN_SECONDS} s loops; MB = 10^6 bytes of envelope`);
for (const line of out) console.log(line);
console.log(
  JSON.stringify({
    ts_verify_per_s: node.ts_verify_per_s,
    wasm_verify_per_s: node.wasm_verify_per_s,
    wasm_verify_single_per_s: node.wasm_verify_single_per_s,
    ts_chunk_mb_s: node.ts_chunk_mb_s,
    wasm_chunk_mb_s: node.wasm_chunk_mb_s,
    browser_ts_verify_per_s: web.ts_verify_per_s,
    browser_wasm_verify_per_s: web.wasm_verify_per_s,
    browser_wasm_verify_single_per_s: web.wasm_verify_single_per_s,
    browser_ts_chunk_mb_s: web.ts_chunk_mb_s,
    browser_wasm_chunk_mb_s: web.wasm_chunk_mb_s,
    verify_bundle_gzip_bytes: verifyBundle.gzip,
    wasm_gzip_bytes: wasmSize.wasm_gzip_bytes,
    n,
    capacity,
    proofs: data.proofs.length,
    chunks: data.envelopes.length,
    envelope_bytes: data.envelopeBytes,
    node: process.version,
    chromium: chromiumVersion,
  }),
);
