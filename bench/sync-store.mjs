#!/usr/bin/env node
// `npm run bench:sync-store`: a sync into a state directory (`bpavl sync
// --db`), from 9 local `bpavl serve --db` peers sharing one database
// (WebSocket, loopback), and its resume after a SIGKILL. A benchmark, not a
// test: it prints the targets next to the figures and exits 0 when they are
// missed (1 only when a run fails or a result does not check).
//
//   npm run bench:sync-store [-- --n 1000000 --peers 9 --kill-at 0.5 --source generated --keep]
//
// 1. `bpavl generate --db` the standard workload (n entries, C = 256) into
//    a source directory under /tmp (kept between runs with --keep). It
//    commits the entries as puts do, an entry record each, as a state that
//    grew by commits holds them. With `--source synced`, that state is then
//    synced from one `bpavl serve --db` of it into another directory, which
//    the peers serve instead, as the peer B of a chain A → B → C holds it: a
//    synced (or imported) state keeps a chunk's values in 16 records beside
//    its chunk record (docs/store.md, "Values held in chunk records"), and
//    its peers read a chunk from 17 records instead of 257;
// 2. starts the peers (`bpavl serve --db SRC`, each its own process);
// 3. syncs into a new directory: `bpavl sync --db DST --json`, its peak RSS
//    read from /proc every 50 ms; checks the root, the entry count, and that
//    every chunk was downloaded;
// 4. syncs into another new directory, SIGKILLs it once about `--kill-at`
//    of the first run's time has passed, counts the chunks the directory
//    holds (`pendingSync`), and resumes: checks that the resume restored
//    exactly those (re-downloaded 0) and downloaded only the rest, and
//    reports the time from its start to its first request;
// 5. deletes what it made under /tmp (the source too, unless --keep).
//
// The last line on stdout is JSON:
// {n, source, store_mb_s, seconds, peak_rss_mib, peak_rss_anon_mib, peak_rss_file_mib, resume_stored_chunks, resume_redownloaded_chunks, resume_start_s, chunk_count}
//   store_mb_s  state bytes (n · 544: keys and values) / seconds of the sync, MB = 10^6 bytes
//   peak_rss_anon_mib, peak_rss_file_mib  the largest anonymous (heaps, WASM) and file-backed
//               (SQLite's memory map) parts of the RSS sampled every 50 ms
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runSampled } from './files.mjs';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '1000000' },
    peers: { type: 'string', default: '9' },
    'kill-at': { type: 'string', default: '0.5' },
    dir: { type: 'string', default: '/tmp/bench-sync-store' },
    source: { type: 'string', default: 'generated' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write('usage: node bench/sync-store.mjs [--n 1000000] [--peers 9] [--kill-at 0.5] [--source synced|generated] [--dir /tmp/bench-sync-store] [--keep]\n');
  process.exit(0);
}
const n = Number(args.n);
const peerCount = Number(args.peers);
const killAt = Number(args['kill-at']);
if (!Number.isSafeInteger(n) || n < 1000) throw new Error('--n must be an integer ≥ 1000');
if (!Number.isSafeInteger(peerCount) || peerCount < 1 || peerCount > 32) throw new Error('--peers must be in 1 … 32');
if (!(killAt > 0 && killAt < 1)) throw new Error('--kill-at must be in (0, 1)');
if (!['synced', 'generated'].includes(args.source)) throw new Error('--source must be synced or generated');

const TARGETS = { store_mb_s: 150, peak_rss_mib: 256, resume_redownloaded_chunks: 0, resume_start_s: 1 };
const BIN = fileURLToPath(new URL('../packages/peer/bin/bpavl.mjs', import.meta.url));
const log = (s) => process.stderr.write(`bench:sync-store: ${s}\n`);
const generated = `${args.dir}/source-${n}`;
const src = args.source === 'synced' ? `${args.dir}/source-${n}-synced` : generated;
const dst = `${args.dir}/synced`;
const resumed = `${args.dir}/resumed`;
/** The serving peers, stopped at the end (and killed if this process exits first). */
const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Runs `bpavl ARGS` to its end; its stdout's last line as JSON, and its memory as sampled. */
async function bpavl(argv, opts) {
  const { stdout, ...run } = await runSampled([BIN, ...argv], opts);
  const last = stdout.trim().split('\n').at(-1);
  return { ...run, json: last && last.startsWith('{') ? JSON.parse(last) : undefined };
}

/** Starts `bpavl serve --db DIR` and resolves with its info line. */
function serve(dir = src) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve', '--db', dir, '--json', '--ws-port', '0', '--libp2p-port', 'off', '--exit-on-stdin-end'], { stdio: ['pipe', 'pipe', 'inherit'] });
    children.add(child);
    let buf = '';
    const t = setTimeout(() => reject(new Error('serve --db did not start in 120 s')), 120_000);
    child.stdout.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) {
        clearTimeout(t);
        resolve(JSON.parse(buf.split('\n')[0]));
      }
    });
    child.on('exit', (code) => code !== 0 && code !== null && reject(new Error(`serve exited ${code}`)));
  });
}

let failed = false;
const check = (ok, what) => {
  if (!ok) {
    failed = true;
    log(`CHECK FAILED: ${what}`);
  }
};

try {
  if (!existsSync(generated)) {
    log(`generating ${n.toLocaleString('en-US')} entries into ${generated}`);
    execFileSync(process.execPath, [BIN, 'generate', '--db', generated, '--entries', String(n), '--json'], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  if (!existsSync(src)) {
    log(`syncing ${generated} into ${src} from one peer`);
    const peer = await serve(generated);
    const partial = `${src}.partial`;
    rmSync(partial, { recursive: true, force: true });
    const made = await bpavl(['sync', '--root', peer.root, '--peer', peer.ws, '--db', partial, '--json']);
    check(made.code === 0 && made.json?.root === peer.root, `the source's sync ended ${made.code}`);
    if (failed) throw new Error('could not make the synced source');
    renameSync(partial, src);
    for (const c of children) c.kill('SIGTERM');
    children.clear();
  }
  rmSync(dst, { recursive: true, force: true });
  rmSync(resumed, { recursive: true, force: true });
  log(`starting ${peerCount} peers on ${src}`);
  const infos = await Promise.all(Array.from({ length: peerCount }, serve));
  const root = infos[0].root;
  const peers = infos.flatMap((i) => ['--peer', i.ws]);
  const sync = (dir, opts) => bpavl(['sync', '--root', root, ...peers, '--db', dir, '--json'], opts);

  log('syncing into a new directory');
  const full = await sync(dst);
  check(full.code === 0 && full.json?.root === root, `the sync ended ${full.code} with ${JSON.stringify(full.json)}`);
  check(full.json?.entryCount === n, `entryCount ${full.json?.entryCount}, not ${n}`);
  check(full.json?.downloaded === full.json?.chunkCount, 'every chunk downloaded once');
  const seconds = full.json.seconds;

  log(`syncing again, killed after ${(killAt * 100).toFixed(0)}% of ${seconds} s, then resumed`);
  const killed = await sync(resumed, { killAfterMs: 1000 * (0.4 + killAt * seconds) });
  check(killed.signal === 'SIGKILL', `the run to kill ended by itself (${killed.code})`);
  const { openState } = await import('@bpavl/store');
  const state = await openState({ path: resumed });
  const stored = (await state.pendingSync())?.chunksStored ?? 0;
  await state.close();
  const resume = await sync(resumed);
  check(resume.code === 0 && resume.json?.root === root, `the resume ended ${resume.code} with ${JSON.stringify(resume.json)}`);
  check(resume.json.restored + resume.json.downloaded === resume.json.chunkCount, 'restored + downloaded = chunk count');
  const redownloaded = stored - resume.json.restored;

  const result = {
    n,
    source: args.source,
    chunk_count: full.json.chunkCount,
    seconds,
    store_mb_s: Number(((n * 544) / 1e6 / seconds).toFixed(1)),
    peak_rss_mib: Math.round(full.peak),
    peak_rss_anon_mib: Math.round(full.parts.anon),
    peak_rss_file_mib: Math.round(full.parts.file),
    resume_stored_chunks: stored,
    resume_redownloaded_chunks: redownloaded,
    resume_start_s: resume.json.firstRequestSeconds,
    resume_peak_rss_mib: Math.round(resume.peak),
  };
  for (const [k, target] of Object.entries(TARGETS)) {
    const v = result[k];
    const met = k === 'store_mb_s' ? v >= target : v <= target;
    process.stdout.write(`${k.padEnd(28)} ${String(v).padStart(10)}   target ${k === 'store_mb_s' ? '≥' : '≤'} ${target}   ${met ? 'met' : 'MISSED'}\n`);
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  for (const c of children) c.kill('SIGTERM');
  rmSync(dst, { recursive: true, force: true });
  rmSync(resumed, { recursive: true, force: true });
  if (!args.keep) rmSync(args.dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
