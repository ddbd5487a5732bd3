#!/usr/bin/env node
// `npm run bench:browser`: state sync in headless Chromium. The page
// (bench/pages/sync: no UI, just `syncState` of
// @bpavl/light-client/sync over WebSocket) syncs the demo state from 8 local
// peers started by scripts/demo.mjs, first all honest, then with 2 Byzantine
// ones (corrupt-value, wrong-index), and checks in the page that the rebuilt
// tree's root is the trusted root. The honest network also serves a third,
// timed sync into a new IndexedDB store (`@bpavl/store`; `browser_store_mb_s`,
// the store's head root checked), and a fourth into another new store, with
// the page reloaded once half the chunks are stored (`browser_reload_at_chunks`;
// writes finish while the page goes away, so more are kept): the reloaded
// page resumes (`browser_reload_restored_chunks`, `browser_reload_redownloaded_chunks`,
// target 0, and `browser_reload_resume_start_s`, from the reload to the first
// request; restored + fetched must equal the chunk count). A benchmark, not a test: it prints the
// targets next to the figures and exits 0 when they are missed (1 only when a
// run fails or a result does not check).
//
//   npm run bench:browser [-- --entries 100000 --chunk 256 --peers 8 --no-build --profile --demo-page]
//
// The timed syncs run in a headless Chromium that no DevTools client is
// attached to: Chromium is started with the page's URL (the root, the peers
// and the options in its query), and the page POSTs its result back. Under
// Playwright, the CDP session's Network domain reports every WebSocket
// frame received, payload included (base64), to the driver: the renderer,
// the browser process and the driver then spend more CPU on that than the
// sync itself needs (docs/HACKING.md has the cost). As in bench:sync, one
// untimed sync runs first in the same page
// (JIT, WASM tier-up), so the figure is the second sync (the first one's
// seconds are in the JSON as `cold_seconds`).
//
//   --no-warmup  time the first sync of a fresh page;
//   --playwright time the syncs in a Playwright page instead (as before);
//   --profile    also records a CPU profile (CDP) of the honest run and prints
//                the top functions by self time on stderr (a Playwright page:
//                the profile includes the DevTools overhead);
//   --demo-page  also syncs (WebSocket only) in the demo page itself
//                (packages/demo-web, served by the launcher) for comparison;
//   --diagnose   also times, in the page, @bpavl/wasm's verifyChunk over the
//                chunks the honest run received (3 passes), and runs the same
//                sync in Node (syncState, same peers) for comparison;
//   --sync-options JSON  extra syncState options, e.g. '{"initialWindow":16}'.
//
// Without --no-build, builds @bpavl/light-client, and the launcher builds
// what is missing (the WASM module, the peer, the demo page).
// mb_s = bytes of the chunk envelopes verified (`chunk-verified` events) /
// seconds of the whole syncState call, MB = 10^6 bytes.
// Progress on stderr; the result lines, then one JSON line last, on stdout.
import { chromium } from '@playwright/test';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildLightClient, buildPage, checkWasmBuilt } from '../tests/browser/build.mjs';
import { CHROMIUM_ARGS, CHROMIUM_PATH, launchOptions } from '../tests/browser/chromium.mjs';
import { serve } from '../tests/browser/serve.mjs';

const { values: args } = parseArgs({
  options: {
    entries: { type: 'string', default: '100000' },
    chunk: { type: 'string', default: '256' },
    peers: { type: 'string', default: '8' },
    byzantine: { type: 'string', default: 'corrupt-value,wrong-index' },
    'no-build': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'demo-page': { type: 'boolean', default: false },
    diagnose: { type: 'boolean', default: false },
    'sync-options': { type: 'string', default: '{}' },
    'timeout-s': { type: 'string', default: '600' },
    'no-warmup': { type: 'boolean', default: false },
    playwright: { type: 'boolean', default: false },
  },
});
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const TARGETS = { honest_mb_s: 80, byzantine_slowdown: 1.5, store_mb_s: 80 };
const timeoutMs = Number(args['timeout-s']) * 1000;
const log = (s) => process.stderr.write(`bench:browser: ${s}\n`);

// ------------------------------------------------------------ the launcher

/** Every launcher started (and its peers' PIDs), to stop on the way out. */
const launchers = new Set();

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** scripts/demo.mjs --json: resolves to { child, info } once it prints its JSON line. */
function startNetwork(byzantine) {
  const argv = ['scripts/demo.mjs', '--json', ...(args['no-build'] ? ['--no-build'] : []), '--entries', args.entries, '--chunk', args.chunk, '--peers', args.peers, '--byzantine', byzantine, '--port', '0', '--follow', '0'];
  const child = spawn(process.execPath, argv, { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
  const net = { child, info: undefined, stderr: '' };
  launchers.add(net);
  child.stderr.on('data', (d) => (net.stderr += d));
  return new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      try {
        net.info = JSON.parse(line);
        ok(net);
      } catch (e) {
        fail(new Error(`demo launcher printed ${line}: ${e}`));
      }
    });
    child.once('exit', (code, signal) => fail(new Error(`demo launcher exited (${signal ?? code}) before it was ready: ${net.stderr.trim()}`)));
  });
}

/** SIGTERM to the launcher (it stops its peers), SIGKILL after 10 s; then checks by PID that no peer is left. */
async function stopNetwork(net) {
  const { child } = net;
  if (child.exitCode === null && child.signalCode === null) {
    await new Promise((ok) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(force);
        ok();
      });
      child.kill('SIGTERM');
    });
  }
  child.stdin.destroy(); // the peers also stop when their stdin ends
  launchers.delete(net);
  const pids = (net.info?.peers ?? []).map((p) => p.pid).filter(Number.isInteger);
  for (let i = 0; i < 50 && pids.some(pidAlive); i++) await new Promise((r) => setTimeout(r, 100));
  for (const pid of pids.filter(pidAlive)) {
    log(`peer ${pid} still running after the launcher stopped: SIGKILL`);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
}

let exiting = false;
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, async () => {
    if (exiting) return;
    exiting = true;
    log(`${sig}: stopping`);
    await Promise.all([...launchers].map(stopNetwork));
    process.exit(130);
  });
}

// ------------------------------------------------------------ the page

async function profileTop(cdp, profile, top = 15) {
  const self = new Map();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const dt = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i++) {
    const n = byId.get(profile.samples[i]);
    const f = n.callFrame;
    const url = f.url ? f.url.split('/').at(-1) : '';
    const key = `${f.functionName || '(anonymous)'} ${url}${f.url ? `:${f.lineNumber + 1}` : ''}`;
    self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k, us]) => ({ fn: k, ms: Math.round(us / 1000), pct: Number(((100 * us) / total).toFixed(1)) }));
}

/** What the page POSTs to /result, for the run waiting on it. */
let onPageResult;

/**
 * The sync in a headless Chromium without a DevTools client (the timed
 * runs; see the header): started with the page's URL and killed, by its
 * PID, once the page has POSTed its result.
 */
async function syncInPlainChromium(url, net, { warmup, store = false, reloadAt }) {
  const run = { root: net.info.root, peers: net.info.peers.map((p) => p.ws), options: JSON.parse(args['sync-options']), warmup, store, reloadAt };
  const userDataDir = mkdtempSync(join(tmpdir(), 'bpavl-bench-chromium-'));
  const child = spawn(CHROMIUM_PATH, [...CHROMIUM_ARGS, `--user-data-dir=${userDataDir}`, `${url}?run=${encodeURIComponent(JSON.stringify(run))}`], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4096)));
  const exited = new Promise((ok) => child.once('exit', ok));
  try {
    const body = await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`no result from Chromium in ${timeoutMs / 1000} s`)), timeoutMs);
      onPageResult = (b) => {
        clearTimeout(timer);
        ok(b);
      };
      exited.then((code) => {
        clearTimeout(timer);
        fail(new Error(`Chromium exited (${code}) before the page reported: ${stderr.trim().split('\n').slice(-5).join('\n')}`));
      });
    });
    const r = JSON.parse(body);
    if (r.error) throw new Error(`page error: ${r.error}`);
    return r;
  } finally {
    onPageResult = undefined;
    if (child.exitCode === null && child.signalCode === null) {
      const force = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(force);
    }
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

async function syncInPage(browser, url, net, { profile = false, diagnose = false, warmup = false } = {}) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  try {
    await page.goto(url);
    await page.locator('#status[data-state="ready"]').waitFor({ timeout: 60_000 });
    const peers = net.info.peers.map((p) => p.ws);
    let cdp;
    if (profile) {
      cdp = await page.context().newCDPSession(page);
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
      await cdp.send('Profiler.start');
    }
    const r = await page.evaluate((o) => window.__syncBench(o), { root: net.info.root, peers, diagnose, warmup, options: JSON.parse(args['sync-options']) });
    if (cdp) {
      const { profile: p } = await cdp.send('Profiler.stop');
      r.profile = await profileTop(cdp, p);
    }
    if (errors.length > 0) throw new Error(`page errors: ${errors.join('; ')}`);
    return r;
  } finally {
    await page.close();
  }
}

/** The demo page itself (WebSocket only): seconds and MB it reports. */
async function syncInDemoPage(browser, net) {
  const page = await browser.newPage();
  try {
    await page.goto(net.info.url);
    await page.locator('#peer-list').waitFor();
    await page.waitForFunction(() => document.querySelector('#peer-list').value.includes('ws://'), null, { timeout: 30_000 });
    await page.locator('input[name=transport][value=ws]').check();
    const t0 = Date.now();
    await page.locator('#start').click();
    await page.locator('#banner[data-state="verified"], #banner[data-state="failed"]').waitFor({ timeout: timeoutMs });
    const wall = (Date.now() - t0) / 1000;
    const state = await page.locator('#banner').getAttribute('data-state');
    const time = await page.locator('#banner [data-field="time"]').textContent().catch(() => '?');
    const bytes = await page.locator('#banner [data-field="bytes"]').textContent().catch(() => '?');
    return { state, time, bytes, wall_seconds: wall };
  } finally {
    await page.close();
  }
}

// ------------------------------------------------------------ main

const outDir = mkdtempSync(join(tmpdir(), 'bpavl-bench-browser-'));
/** The Playwright browser, launched only when a Playwright page is needed. */
let browser;
const playwrightBrowser = async () => (browser ??= await chromium.launch(launchOptions));
let chromiumVersion = '?';
let server;
let status = 0;
const runs = {};
let demo;
try {
  if (!args['no-build']) buildLightClient();
  checkWasmBuilt();
  await buildPage(new URL('./pages/sync/', import.meta.url), outDir);
  server = await serve(outDir, { onPost: (path, body) => path === '/result' && onPageResult?.(body) });
  chromiumVersion = execFileSync(CHROMIUM_PATH, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().replace(/^Chromium\s+/, '').split(' ')[0];
  log(`Chromium ${chromiumVersion}`);
  const warmup = !args['no-warmup'];

  for (const [name, byz] of [
    ['honest', 'none'],
    ['byzantine', args.byzantine],
  ]) {
    log(`${name}: starting ${args.peers} peers (${args.entries} entries, chunk ${args.chunk}, byzantine ${byz})`);
    const net = await startNetwork(byz);
    try {
      const how = args.playwright ? 'a Playwright page' : 'Chromium without DevTools';
      log(`${name}: ${net.info.chunkCount} chunks, root ${net.info.root}; syncing in ${how}${warmup ? ' (after an untimed warm-up sync)' : ''}`);
      const r = args.playwright ? await syncInPage(await playwrightBrowser(), server.url, net, { warmup }) : await syncInPlainChromium(server.url, net, { warmup });
      runs[name] = r;
      log(
        `${name}: ${r.seconds.toFixed(3)} s, ${(r.verifiedBytes / 1e6).toFixed(1)} MB verified, ${r.mb_s.toFixed(1)} MB/s, rejected ${r.rejected}, banned ${r.banned.length}, root ${r.ok ? 'ok' : 'MISMATCH'}` +
          (r.warmupSeconds !== undefined ? ` (warm-up sync: ${r.warmupSeconds.toFixed(3)} s)` : ''),
      );
      if ((args.profile || args.diagnose) && name === 'honest') {
        log(`${name}: again in a Playwright page, for --profile / --diagnose (timed with the DevTools overhead)`);
        const d = await syncInPage(await playwrightBrowser(), server.url, net, { profile: args.profile, diagnose: args.diagnose, warmup });
        log(`${name}: in the Playwright page: ${d.seconds.toFixed(3)} s, ${d.mb_s.toFixed(1)} MB/s`);
        Object.assign(r, { profile: d.profile, verify_seconds: d.verify_seconds, verifiedBytesDiagnosed: d.verifiedBytes });
      }
      if (r.profile) {
        log('honest run, top functions by self time:');
        for (const p of r.profile) log(`  ${String(p.ms).padStart(6)} ms ${String(p.pct).padStart(5)} %  ${p.fn}`);
      }
      if (!r.ok) status = 1;
      if (r.verify_seconds) {
        log(`honest: verifyChunk alone in the page, 3 passes: ${r.verify_seconds.map((x) => `${x.toFixed(3)} s (${(r.verifiedBytesDiagnosed / x / 1e6).toFixed(0)} MB/s)`).join(', ')}`);
      }
      if (args.diagnose && name === 'honest') {
        const { syncState } = await import('@bpavl/light-client/sync');
        const wasm = await import('@bpavl/wasm');
        await wasm.init();
        const root = Uint8Array.from(Buffer.from(net.info.root, 'hex'));
        for (let i = 0; i < 2; i++) {
          let bytes = 0;
          const t0 = performance.now();
          const res = await syncState({ root, peers: net.info.peers.map((p) => p.ws), onEvent: (e) => e.type === 'chunk-verified' && (bytes += e.bytes) });
          const s = (performance.now() - t0) / 1000;
          res.tree.free();
          log(`honest: the same sync in Node ${process.version} (pass ${i + 1}): ${s.toFixed(3)} s, ${(bytes / s / 1e6).toFixed(1)} MB/s`);
        }
      }
      if (name === 'honest' && !args.playwright) {
        log('store: the same sync into a new IndexedDB store');
        const st = await syncInPlainChromium(server.url, net, { warmup, store: true });
        runs.store = st;
        log(`store: ${st.seconds.toFixed(3)} s, ${st.mb_s.toFixed(1)} MB/s, root ${st.ok ? 'ok' : 'MISMATCH'}`);
        if (!st.ok) status = 1;
        const half = Math.floor(r.chunkCount / 2);
        log(`reload: a sync into a new IndexedDB store, the page reloaded once ${half} chunks are stored, then resumed`);
        const re = await syncInPlainChromium(server.url, net, { warmup: false, reloadAt: half });
        runs.reload = { ...re, reloadAt: half };
        log(`reload: restored ${re.restoredChunks}, fetched ${re.fetchedChunks}, re-downloaded ${re.redownloadedChunks}, first request ${re.resumeStartSeconds?.toFixed(3)} s after the reload, root ${re.ok ? 'ok' : 'MISMATCH'}`);
        if (!re.ok || re.restoredChunks < half || re.restoredChunks + re.fetchedChunks !== re.chunkCount) status = 1;
      }
      if (args['demo-page'] && name === 'honest') {
        log('honest: syncing in the demo page (WebSocket)');
        demo = await syncInDemoPage(await playwrightBrowser(), net);
        log(`demo page: ${demo.state}, ${demo.time}, ${demo.bytes} (wall ${demo.wall_seconds.toFixed(2)} s incl. the click)`);
      }
    } finally {
      await stopNetwork(net);
    }
  }
} catch (e) {
  log(`failed: ${e instanceof Error ? e.stack : e}`);
  status = 1;
} finally {
  await browser?.close();
  await server?.close();
  await Promise.all([...launchers].map(stopNetwork));
  rmSync(outDir, { recursive: true, force: true });
}

function warmupUsed(r) {
  return r.warmupSeconds !== undefined;
}

const h = runs.honest;
const b = runs.byzantine;
if (h && b) {
  const slow = h.mb_s / b.mb_s;
  const mark = (ok) => (ok ? 'ok' : 'MISSED');
  console.log(
    `bench:browser  ${args.entries} entries, chunk ${args.chunk}, ${args.peers} peers over WebSocket, Chromium ${chromiumVersion}, ` +
      `${args.playwright ? 'Playwright page' : 'no DevTools client'}, ${warmupUsed(h) ? 'after a warm-up sync' : 'first sync of the page'}`,
  );
  console.log(`honest       ${h.mb_s.toFixed(1).padStart(7)} MB/s  ${h.seconds.toFixed(3)} s  target ≥ ${TARGETS.honest_mb_s} MB/s ${mark(h.mb_s >= TARGETS.honest_mb_s)}`);
  console.log(
    `byzantine    ${b.mb_s.toFixed(1).padStart(7)} MB/s  ${b.seconds.toFixed(3)} s  ${slow.toFixed(2)}× slower, target within ${TARGETS.byzantine_slowdown}× ${mark(slow <= TARGETS.byzantine_slowdown)}` +
      `  (rejected ${b.rejected}, banned ${b.banned.map((x) => x.code).join(', ') || 'none'})`,
  );
  const st = runs.store;
  if (st) console.log(`into IndexedDB ${st.mb_s.toFixed(1).padStart(5)} MB/s  ${st.seconds.toFixed(3)} s  target ≥ ${TARGETS.store_mb_s} MB/s ${mark(st.mb_s >= TARGETS.store_mb_s)}`);
  const re = runs.reload;
  if (re) {
    console.log(
      `reload         asked once ${re.reloadAt} chunks were stored; restored ${re.restoredChunks}, fetched ${re.fetchedChunks} of ${re.chunkCount}, re-downloaded ${re.redownloadedChunks}  target 0 ${mark(re.redownloadedChunks === 0)}`,
    );
  }
  console.log(`MB = 10^6 bytes of chunk envelope verified; roots checked in the page: ${h.ok && b.ok && (st?.ok ?? true) ? 'ok' : 'MISMATCH'}`);
  console.log(
    JSON.stringify({
      browser_sync_mb_s_honest: Number(h.mb_s.toFixed(1)),
      browser_sync_mb_s_byzantine: Number(b.mb_s.toFixed(1)),
      ...(st && { browser_store_mb_s: Number(st.mb_s.toFixed(1)), store_seconds: Number(st.seconds.toFixed(3)) }),
      ...(re && {
        browser_reload_at_chunks: re.reloadAt,
        browser_reload_restored_chunks: re.restoredChunks,
        browser_reload_redownloaded_chunks: re.redownloadedChunks,
        browser_reload_resume_start_s: Number(re.resumeStartSeconds.toFixed(3)),
      }),
      seconds: { honest: Number(h.seconds.toFixed(3)), byzantine: Number(b.seconds.toFixed(3)) },
      ...(warmupUsed(h) && { cold_seconds: { honest: Number(h.warmupSeconds.toFixed(3)), byzantine: Number(b.warmupSeconds.toFixed(3)) } }),
      devtools: args.playwright,
      rejected: b.rejected,
      banned: b.banned.length,
      banned_codes: b.banned.map((x) => x.code),
      root_ok: h.ok && b.ok && (st?.ok ?? true),
      envelope_bytes: h.verifiedBytes,
      chunk_count: h.chunkCount,
      refetches: { honest: h.refetches, byzantine: b.refetches },
      entry_count: Number(args.entries),
      chunk: Number(args.chunk),
      peers: Number(args.peers),
      ...(demo && { demo_page: demo }),
    }),
  );
} else status = 1;
process.exit(status);
