#!/usr/bin/env node
// `npm run bench:catchup`: catch-up of a stored state to a newer root
// (`bpavl sync --db` on a directory that holds an older version;
// docs/catchup.md) from 9 local peers serving one shared database
// (`bpavl-testnet serve --db`, WebSocket, loopback), against a full sync of
// the same root from the same peers. A benchmark, not a test: it prints the
// targets next to the figures and exits 0 when they are missed (1 only when
// a run fails or a result does not check).
//
//   npm run bench:catchup [-- --n 1000000 --fractions 0.001,0.01,0.1 --patterns random,zipf --liars 0,2 --keep] [--predate-catchup]
//
// 1. `bpavl generate --db` the standard workload (n entries, C = 256) into
//    a source directory under /tmp, and copies it: the client's directory,
//    which holds that version only (kept between runs with --keep);
// 2. per pattern and fraction, a child process moves the source to the
//    next version: it rolls back to version 1, updates that many updates
//    (f · n) and commits (version 2). `random`: keys SplitMix64 seed 2,
//    index = next() mod n, as bench:store; `zipf`: ranks drawn with
//    P(r) ∝ 1/r^1.1, rank r being key (r − 1) · 2654435761 mod n (hot keys
//    spread over the key space). Each value is a SHA-256 chain from the old
//    one, 512 bytes. The child reports the new root and the ideal: the
//    changed entries' own bytes (keys and values, each key once);
// 3. per number of liars (the first k peers run `--byzantine corrupt-value`:
//    every catch-up and chunk answer they send carries a flipped bit),
//    starts the peers, catches the client up (`bpavl sync --db --json`),
//    checks its version, root and 200 updated values (read back and
//    compared with the source), then syncs the same root in full, in memory
//    (`bpavl sync --json`), for `full_bytes` and `full_seconds`, and rolls the
//    client back to version 1 (`bpavl rollback`). With --predate-catchup every
//    peer answers the catch-up kinds BAD_REQUEST, as a peer from before them
//    (`bpavl-testnet serve --predate-catchup`): the catch-up then fetches
//    every chunk whole and stores only those the client lacks (its fallback);
// 4. deletes what it made under /tmp (unless --keep).
//
// The last line on stdout is JSON:
// {"runs": [{pattern, fraction, byzantine, bytes, seconds, full_bytes, full_seconds, ideal_bytes, changed_chunks, chunk_count, written_bytes, requests, banned, whole_chunks}, …]}
// (`written_bytes`: the records the catch-up wrote to the client's store;
// `whole_chunks`: the catch-up fetched every chunk whole, as it must with --predate-catchup.)
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { splitmix } from './files.mjs';
import { installCleanupHandlers, startPeer, stopPeers } from './sync/peers.mjs';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '1000000' },
    peers: { type: 'string', default: '9' },
    fractions: { type: 'string', default: '0.001,0.01,0.1' },
    patterns: { type: 'string', default: 'random,zipf' },
    liars: { type: 'string', default: '0,2' },
    dir: { type: 'string', default: '/tmp/bench-catchup' },
    keep: { type: 'boolean', default: false },
    'predate-catchup': { type: 'boolean', default: false },
    child: { type: 'string' },
    pattern: { type: 'string' },
    fraction: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write('usage: node bench/catchup.mjs [--n 1000000] [--peers 9] [--fractions 0.001,0.01,0.1] [--patterns random,zipf] [--liars 0,2] [--dir /tmp/bench-catchup] [--keep] [--predate-catchup]\n');
  process.exit(0);
}
const n = Number(args.n);
if (!Number.isSafeInteger(n) || n < 1000) throw new Error('--n must be an integer ≥ 1000');
const VALUE_LEN = 512;
const ENTRY_BYTES = 32 + VALUE_LEN;
const ZIPF_S = 1.1;
const BIN = fileURLToPath(new URL('../packages/peer/bin/bpavl.mjs', import.meta.url));
const src = `${args.dir}/source-${n}`;
const clientBase = `${args.dir}/client-${n}`;
const client = `${args.dir}/client`;
const log = (s) => process.stderr.write(`bench:catchup: ${s}\n`);

/** An updated value: a SHA-256 chain started from the old value, 512 bytes long (as bench:store). */
function updated(old) {
  const out = Buffer.alloc(VALUE_LEN);
  let block = createHash('sha256').update(old).digest();
  for (let at = 0; at < VALUE_LEN; at += 32) {
    block.copy(out, at);
    block = createHash('sha256').update(block).digest();
  }
  return new Uint8Array(out);
}

/** The workload indexes of `count` updates. */
function picks(pattern, count) {
  if (pattern === 'random') {
    const next = splitmix(2);
    return Array.from({ length: count }, () => Number(next() % BigInt(n)));
  }
  // Zipf by inversion of the cumulative weights, ranks spread over the keys.
  const cumulative = new Float64Array(n);
  let sum = 0;
  for (let r = 1; r <= n; r++) cumulative[r - 1] = sum += r ** -ZIPF_S;
  const next = splitmix(3);
  return Array.from({ length: count }, () => {
    const u = (Number(next() >> 11n) / 2 ** 53) * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return Number((BigInt(lo) * 2654435761n) % BigInt(n));
  });
}

// --- the child that moves the source to the next version ---------------------

async function moveSource() {
  const { openState } = await import('@bpavl/store');
  const { workloadEntry } = await import('../packages/peer/src/workload.ts');
  const state = await openState({ path: src });
  if (state.head().version > 1) await state.rollback(1);
  const writes = new Map();
  for (const i of picks(args.pattern, Math.round(Number(args.fraction) * n))) {
    const [key] = workloadEntry(0n, i);
    const old = writes.get(i)?.[1] ?? (await state.get(key));
    writes.set(i, [key, updated(old)]);
  }
  await state.putMany(writes.values());
  const head = await state.commit();
  await state.close();
  const sample = [...writes.keys()].slice(0, 200);
  process.stdout.write(`${JSON.stringify({ root: Buffer.from(head.root).toString('hex'), version: head.version, distinct: writes.size, sample })}\n`);
}

if (args.child === 'move') {
  await moveSource();
  process.exit(0);
}

// --- the parent ----------------------------------------------------------------

const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Runs a node script to its end; its stdout's last line as JSON. */
function run(script, argv) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.add(child);
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('exit', (code) => {
      children.delete(child);
      const last = out.trim().split('\n').at(-1);
      resolve({ code, json: last?.startsWith('{') ? JSON.parse(last) : undefined });
    });
  });
}

/** `bpavl-testnet serve --db SRC` (lying if `liar`): its info line and process (bench/sync/peers.mjs). */
const serve = (liar, k) =>
  startPeer(['--db', src, ...(liar ? ['--byzantine', 'corrupt-value'] : []), ...(args['predate-catchup'] ? ['--predate-catchup'] : [])], { timeoutMs: 120_000, label: `peer ${k}${liar ? ' (liar)' : ''}` });

let failed = false;
const check = (ok, what) => {
  if (!ok) {
    failed = true;
    log(`CHECK FAILED: ${what}`);
  }
};

/** The client's values of `indexes` at its head equal the source's at version 2. */
async function sameValues(indexes) {
  const { openState } = await import('@bpavl/store');
  const { workloadEntry } = await import('../packages/peer/src/workload.ts');
  const [a, b] = await Promise.all([openState({ path: client, readOnly: true }), openState({ path: src, readOnly: true })]);
  try {
    for (const i of indexes) {
      const [key] = workloadEntry(0n, i);
      const [x, y] = await Promise.all([a.get(key), b.get(key, { version: 2 })]);
      if (x === undefined || Buffer.compare(Buffer.from(x), Buffer.from(y)) !== 0) return false;
    }
    return true;
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
}

const runs = [];
// Peer processes (bench/sync/peers.mjs) are stopped on exit and on Ctrl-C, as bench:sync's.
installCleanupHandlers(log);
try {
  if (!existsSync(src) || !existsSync(clientBase)) {
    rmSync(args.dir, { recursive: true, force: true });
    log(`generating ${n.toLocaleString('en-US')} entries into ${src}`);
    execFileSync(process.execPath, [BIN, 'generate', '--db', src, '--entries', String(n), '--json'], { stdio: ['ignore', 'ignore', 'inherit'] });
    cpSync(src, clientBase, { recursive: true });
  }
  rmSync(client, { recursive: true, force: true });
  cpSync(clientBase, client, { recursive: true });
  for (const pattern of args.patterns.split(',')) {
    for (const fraction of args.fractions.split(',').map(Number)) {
      log(`${pattern} ${fraction}: moving the source to its next version`);
      const moved = await run(fileURLToPath(import.meta.url), ['--child', 'move', '--dir', args.dir, '--n', String(n), '--pattern', pattern, '--fraction', String(fraction)]);
      check(moved.code === 0 && moved.json?.version === 2, `the source move ended ${moved.code}`);
      const root = moved.json.root;
      for (const liars of args.liars.split(',').map(Number)) {
        const peers = await Promise.all(Array.from({ length: Number(args.peers) }, (_, k) => serve(k < liars, k)));
        const peerArgs = peers.flatMap((p) => ['--peer', p.info.ws]);
        log(`${pattern} ${fraction}, ${liars} liars: catching up`);
        const caught = await run(BIN, ['sync', '--root', root, ...peerArgs, '--db', client, '--json']);
        check(caught.code === 0 && caught.json?.root === root && caught.json?.version === 2, `the catch-up ended ${caught.code}: ${JSON.stringify(caught.json)}`);
        check(caught.json?.wholeChunks === args['predate-catchup'], `the catch-up fetched every chunk whole: ${caught.json?.wholeChunks}`);
        check(await sameValues(moved.json.sample), 'updated values read back from the client');
        log(`${pattern} ${fraction}, ${liars} liars: full sync`);
        const full = await run(BIN, ['sync', '--root', root, ...peerArgs, '--json']);
        check(full.code === 0 && full.json?.root === root, `the full sync ended ${full.code}`);
        await stopPeers(peers);
        const back = await run(BIN, ['rollback', '--db', client, '--to', '1', '--json']);
        check(back.code === 0, 'the client rolled back to version 1');
        const r = {
          pattern,
          fraction,
          byzantine: liars,
          bytes: caught.json.bytes,
          seconds: caught.json.seconds,
          full_bytes: full.json.bytes,
          full_seconds: full.json.seconds,
          ideal_bytes: moved.json.distinct * ENTRY_BYTES,
          changed_chunks: caught.json.changedChunks,
          chunk_count: caught.json.chunkCount,
          written_bytes: caught.json.writtenBytes,
          requests: caught.json.requests,
          banned: caught.json.banned.length,
          whole_chunks: caught.json.wholeChunks,
        };
        runs.push(r);
        const share = r.bytes / r.full_bytes;
        // The targets are the catch-up's; its fallback fetches every chunk by design.
        const walked = !args['predate-catchup'];
        const target = walked && pattern === 'random' ? { 0.001: 0.03, 0.01: 0.1 }[fraction] : undefined;
        const predicted = r.full_seconds * share;
        process.stdout.write(
          `${pattern.padEnd(6)} ${String(fraction).padEnd(6)} liars ${liars}: ${(r.bytes / 1e6).toFixed(1)} MB in ${r.seconds} s ` +
            `(${(100 * share).toFixed(2)}% of the full sync's ${(r.full_bytes / 1e6).toFixed(0)} MB in ${r.full_seconds} s; ideal ${(r.ideal_bytes / 1e6).toFixed(2)} MB; ` +
            `${r.changed_chunks} of ${r.chunk_count} chunks changed; ${(r.written_bytes / 1e6).toFixed(1)} MB written; ${r.banned} banned)` +
            (target === undefined ? '' : `  bytes target ≤ ${100 * target}%: ${share <= target ? 'met' : 'MISSED'}`) +
            (walked && pattern === 'random' && fraction === 0.001 ? `; time target ≤ ${predicted.toFixed(2)} s: ${r.seconds <= predicted ? 'met' : 'MISSED'}` : '') +
            '\n',
        );
      }
    }
  }
  process.stdout.write(`${JSON.stringify({ runs })}\n`);
} finally {
  for (const c of children) c.kill('SIGTERM');
  if (!args.keep) rmSync(args.dir, { recursive: true, force: true });
  else rmSync(client, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
