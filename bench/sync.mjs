#!/usr/bin/env node
// `npm run bench:sync`: state sync of the standard workload from 9 serving
// peers (separate `bpavl serve` processes, WebSocket transport), bpavl's
// self-verifiable chunks (`syncState` of @bpavl/light-client/sync) against
// the paper's Baseline (crates/baseline through @bpavl/baseline-wasm: an
// AVL+ tree with one entry per leaf, chunks checked only by the final root),
// on two emulated networks, with 0, 1 and 4 Byzantine peers. A benchmark,
// not a test: it prints the targets next to the figures and exits 0 when
// they are missed (1 only when a run fails or a result does not check).
//
//   npm run bench:sync [-- --n 100000 --no-build --profiles loopback,wan --byzantine 0,1,4 --repeat 1 …]
//
// 1. builds @bpavl/wasm, @bpavl/baseline-wasm and @bpavl/peer (with
//    @bpavl/light-client) unless --no-build;
// 2. builds the same state locally, in both trees, for the trusted roots
//    (the standard workload of packages/peer/src/workload.ts, chunk capacity
//    256; Baseline chunks of 100 KiB);
// 3. per profile, starts 9 honest peers and up to 4 Byzantine ones
//    (`--byzantine corrupt-value:0.3`: 30 % of the chunks they serve, bpavl's
//    and the Baseline's, carry a flipped value bit) on free ports of
//    127.0.0.1; a run with k Byzantine peers uses 9 peers, k of them Byzantine
//    (the same slots, and in `wan` the same per-slot links, in every run);
//      loopback  no emulation;
//      wan       each peer emulates its own link (`--delay-ms D --rate-mb-s 25`):
//                one-way delay D drawn in 10 … 40 ms (responses held back 2·D),
//                25 MB/s per connection (packages/testnet/src/link.ts);
//    every peer serves both states (`--baseline`), bpavl's envelopes from
//    memory as the Baseline's chunks are (`--cache-chunks`);
// 4. after one untimed warm-up sync per strategy, runs both strategies
//    against the same 9 peers, checks every result (bpavl: the rebuilt
//    tree's root, size and chunk count; Baseline: the imported root), then
//    stops every child process (also on an error or Ctrl-C).
//
// Strategies:
//   bpavl     syncState({ root, peers: 9 ws:// URLs }) with the engine's defaults;
//   baseline  bench/sync/baseline-sync.mjs: CometBFT-style, 4 chunk
//             fetchers (`chunk_fetchers`) asking random peers, chunks imported
//             in order, the root compared at the end; on a mismatch, the whole
//             state again from one peer at a time (random, not yet tried) until
//             the root matches, each failed peer rejected.
//
// Progress on stderr; the result lines, then one JSON line last, on stdout:
// {"runs": [{profile, strategy, byzantine, seconds, mb_s, chunks_sent, refetched, banned}, …]}
//   mb_s        state bytes (Σ len(key) + len(value) = n · 544) / seconds, MB = 10^6 bytes
//   chunks_sent chunk responses (status OK, every peer) the client received
//   refetched   bpavl: the engine's refetches; Baseline: chunk requests for an index requested before
//   banned      bpavl: peers banned; Baseline: peers rejected after a failed single-peer download
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { installCleanupHandlers, startPeers, stopPeers } from './sync/peers.mjs';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '100000' },
    chunk: { type: 'string', default: '256' },
    peers: { type: 'string', default: '9' },
    profiles: { type: 'string', default: 'loopback,wan' },
    byzantine: { type: 'string', default: '0,1,4' },
    strategies: { type: 'string', default: 'bpavl,baseline' },
    'byzantine-mode': { type: 'string', default: 'corrupt-value:0.3' },
    'rate-mb-s': { type: 'string', default: '25' },
    'delay-min-ms': { type: 'string', default: '10' },
    'delay-max-ms': { type: 'string', default: '40' },
    'baseline-chunk-bytes': { type: 'string', default: '102400' },
    'baseline-fetchers': { type: 'string', default: '4' },
    seed: { type: 'string', default: '1' },
    repeat: { type: 'string', default: '1' },
    'run-timeout-s': { type: 'string', default: '600' },
    'start-timeout-s': { type: 'string', default: '600' },
    'no-build': { type: 'boolean', default: false },
    'no-warmup': { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    'usage: node bench/sync.mjs [--n 100000] [--chunk 256] [--profiles loopback,wan] [--byzantine 0,1,4]\n' +
      '         [--strategies bpavl,baseline] [--seed 1] [--baseline-fetchers 4] [--no-build] [--verbose]\n' +
      '(see the header of this file for what it does and prints)\n',
  );
  process.exit(0);
}

const int = (name, min, max) => {
  const v = Number(args[name]);
  if (!Number.isSafeInteger(v) || v < min || v > max) throw new Error(`--${name} must be an integer in ${min} … ${max}, got ${args[name]}`);
  return v;
};
const list = (name, allowed) => {
  const items = args[name].split(',').map((s) => s.trim()).filter(Boolean);
  for (const it of items) if (!allowed.includes(it)) throw new Error(`--${name}: "${it}" is not one of ${allowed.join(', ')}`);
  return items;
};
const n = int('n', 1, 10_000_000);
const capacity = int('chunk', 2, 4096);
const peerCount = int('peers', 1, 64);
const seed = int('seed', 0, 2 ** 32 - 1);
const profiles = list('profiles', ['loopback', 'wan']);
const strategies = list('strategies', ['bpavl', 'baseline']);
const byzCounts = args.byzantine.split(',').map((s) => Number(s.trim()));
for (const k of byzCounts) if (!Number.isSafeInteger(k) || k < 0 || k >= peerCount) throw new Error(`--byzantine: ${k} is not in 0 … ${peerCount - 1}`);
const maxByz = Math.max(0, ...byzCounts);
const rateMBs = Number(args['rate-mb-s']);
const delayMin = int('delay-min-ms', 0, 10_000);
const delayMax = int('delay-max-ms', delayMin, 10_000);
const baselineChunkBytes = int('baseline-chunk-bytes', 1, 8 * 1024 * 1024 - 64);
const baselineFetchers = int('baseline-fetchers', 1, 1024);
const repeat = int('repeat', 1, 100);
const runTimeoutMs = int('run-timeout-s', 1, 86_400) * 1000;
const startTimeoutMs = int('start-timeout-s', 1, 86_400) * 1000;

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const log = (s) => process.stderr.write(`bench:sync: ${s}\n`);
installCleanupHandlers(log);

// The standard workload's bpavl root (README.md, packages/peer/README.md): a check that the workload is the standard one.
const STANDARD_ROOT_100K_C256 = 'db5455ca1fab302197884f255d0633f19b3001110619a3b0437ef30c5d575044';

const TARGETS = {
  loopback_bpavl_mb_s: 150,
  wan_ratio: { 0: 0.6, 1: 0.2, 4: 0.05 },
  wan_byz4_vs_byz0: 1.5,
};

// 1. Builds (their output on stderr: stdout is ours).
if (!args['no-build']) {
  for (const ws of ['@bpavl/wasm', '@bpavl/baseline-wasm', '@bpavl/peer']) {
    log(`building ${ws}`);
    execFileSync('npm', ['run', '--silent', 'build', '-w', ws], { cwd: repoRoot, stdio: ['ignore', process.stderr, process.stderr] });
  }
}
const wasm = await import('@bpavl/wasm');
const baselineWasm = await import('@bpavl/baseline-wasm');
const { syncState, connectWebSocket } = await import('@bpavl/light-client/sync');
const { Kind, Status } = await import('@bpavl/light-client/wire');
const { workloadEntry } = await import('@bpavl/peer');
const { SeededRandom } = await import('../packages/testnet/src/byzantine.ts');
const { baselineSync } = await import('./sync/baseline-sync.mjs');
await wasm.init();
await baselineWasm.init();

const hex = (b) => Buffer.from(b).toString('hex');
const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// 2. The trusted roots: the same state, built here.
let t = performance.now();
const tree = new wasm.Tree(capacity);
const btree = new baselineWasm.BaselineTree();
let stateBytes = 0;
for (let i = 0; i < n; i++) {
  const [key, value] = workloadEntry(0n, i);
  tree.insert(key, value);
  btree.insert(key, value);
  stateBytes += key.length + value.length;
}
const { root } = tree.commit();
const head = tree.head();
const bpavlChunks = tree.chunkCount;
const envelopeBytes = Array.from({ length: bpavlChunks }, (_, i) => head.exportChunk(i).length).reduce((a, b) => a + b, 0);
head.free();
tree.free();
const baselineRoot = btree.commit();
const baselineChunks = btree.exportChunks(baselineChunkBytes);
const baselineCount = baselineChunks.length;
const baselineBytes = baselineChunks.reduce((s, c) => s + c.length, 0);
btree.free();
baselineChunks.length = 0;
log(
  `state: ${n} entries (${(stateBytes / 1e6).toFixed(1)} MB of keys and values), built locally in ${((performance.now() - t) / 1e3).toFixed(1)} s\n` +
    `  bpavl    root ${hex(root)}  ${bpavlChunks} chunks (C = ${capacity}), ${(envelopeBytes / 1e6).toFixed(1)} MB of envelopes\n` +
    `  baseline root ${hex(baselineRoot)}  ${baselineCount} chunks (≤ ${baselineChunkBytes} B), ${(baselineBytes / 1e6).toFixed(1)} MB`,
);
if (n === 100_000 && capacity === 256 && hex(root) !== STANDARD_ROOT_100K_C256) {
  throw new Error(`the local bpavl root ${hex(root)} is not the standard workload's ${STANDARD_ROOT_100K_C256}`);
}

// 3. The peer layout: slot s has its own link (wan) and, in a run with k
//    Byzantine peers, slots byzOrder[0 … k-1] are served by Byzantine processes.
const rng = new SeededRandom(BigInt(seed));
const delays = Array.from({ length: peerCount }, () => delayMin + Math.floor(rng.next() * (delayMax - delayMin + 1)));
const byzOrder = [...Array(peerCount).keys()];
for (let i = byzOrder.length - 1; i > 0; i--) {
  const j = Math.floor(rng.next() * (i + 1));
  [byzOrder[i], byzOrder[j]] = [byzOrder[j], byzOrder[i]];
}
const clientRandom = new SeededRandom(BigInt(seed) + 1000n);

function peerSpecs(profile) {
  // --cache-chunks: bpavl's envelopes are served from memory, as the Baseline's chunks are.
  const common = ['--entries', String(n), '--chunk', String(capacity), '--cache-chunks', '--baseline', '--baseline-chunk-bytes', String(baselineChunkBytes)];
  const link = (slot) => (profile === 'wan' ? ['--delay-ms', String(delays[slot]), '--rate-mb-s', String(rateMBs)] : []);
  const specs = [];
  for (let s = 0; s < peerCount; s++) specs.push({ slot: s, byzantine: false, label: `${profile} slot ${s} honest`, args: [...common, ...link(s)] });
  for (let j = 0; j < maxByz; j++) {
    const s = byzOrder[j];
    specs.push({
      slot: s,
      byzantine: true,
      label: `${profile} slot ${s} BYZANTINE`,
      args: [...common, ...link(s), '--byzantine', args['byzantine-mode'], '--byzantine-seed', String(seed * 100 + j)],
    });
  }
  return specs;
}

/**
 * A `Connect` that counts CHUNK responses with status OK. The connection is
 * wrapped in a Proxy that only replaces `request`, so everything else of the
 * light client's `PeerConnection` passes through unchanged.
 */
function countingConnect(counter) {
  return async (address, signal) => {
    const conn = await connectWebSocket(address, signal);
    const request = async (req, opts) => {
      const res = await conn.request(req, opts);
      if (req.kind === Kind.Chunk && res.status === Status.Ok) counter.chunks++;
      return res;
    };
    return new Proxy(conn, {
      get(target, prop) {
        if (prop === 'request') return request;
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  };
}

async function runBpavl(urls) {
  const counter = { chunks: 0 };
  const t0 = performance.now();
  const result = await syncState({
    root,
    peers: urls,
    connect: countingConnect(counter),
    signal: AbortSignal.timeout(runTimeoutMs),
    ...(args.verbose ? { onEvent: (e) => e.type === 'peer-banned' && log(`  bpavl: banned ${e.peer} (${e.code})`) } : {}),
  });
  const seconds = (performance.now() - t0) / 1000;
  try {
    // Checked: the rebuilt tree has the trusted root and every entry.
    if (!equal(result.tree.head().root, root)) throw new Error(`bpavl: rebuilt root ${hex(result.tree.head().root)} ≠ trusted ${hex(root)}`);
    if (result.tree.len !== n) throw new Error(`bpavl: rebuilt tree holds ${result.tree.len} entries, not ${n}`);
    if (result.chunkCount !== bpavlChunks) throw new Error(`bpavl: ${result.chunkCount} chunks, not ${bpavlChunks}`);
  } finally {
    result.tree.free();
  }
  return { seconds, chunks_sent: counter.chunks, refetched: result.refetches, banned: result.banned.length, detail: `${(result.bytes / 1e6).toFixed(1)} MB received` };
}

async function runBaseline(urls) {
  const r = await baselineSync({
    root: baselineRoot,
    peers: urls,
    random: () => clientRandom.next(),
    fetchers: baselineFetchers,
    signal: AbortSignal.timeout(runTimeoutMs),
    ...(args.verbose ? { log: (m) => log(`  ${m}`) } : {}),
  });
  // Checked inside: a run resolves only once the imported root equals the trusted one.
  if (r.chunks !== baselineCount) throw new Error(`baseline: the peers offer ${r.chunks} chunks, not ${baselineCount}`);
  const attempts = r.attempts.map((a) => (a.peers === 1 ? `1 peer ${a.ok ? 'ok' : 'rejected'}` : `${a.peers} peers ${a.ok ? 'ok' : a.why}`));
  return { seconds: r.seconds, chunks_sent: r.chunksSent, refetched: r.refetched, banned: r.banned, detail: attempts.join(' → ') };
}

// 4. The runs.
const runs = [];
const lines = [];
const round = (x, d) => Math.round(x * 10 ** d) / 10 ** d;
const started = performance.now();
let warmedUp = args['no-warmup'];
for (const profile of profiles) {
  const specs = peerSpecs(profile);
  log(
    `${profile}: starting ${specs.length} peer processes (${peerCount} honest, ${maxByz} Byzantine ${args['byzantine-mode']})` +
      (profile === 'wan' ? `; links ${delays.map((d) => `${d}`).join('/')} ms one way, ${rateMBs} MB/s` : ''),
  );
  t = performance.now();
  const peers = await startPeers(specs, { concurrency: Math.max(2, availableParallelism()), timeoutMs: startTimeoutMs, log });
  try {
    log(`${profile}: peers ready in ${((performance.now() - t) / 1e3).toFixed(1)} s`);
    for (const p of peers) {
      // What each peer built must be the state the bench built (ROOTS is a hint, but here a mismatch is a bench bug).
      if (p.info.root !== hex(root) || p.info.baseline?.root !== hex(baselineRoot) || p.info.baseline?.chunks !== baselineCount) {
        throw new Error(`${p.label} serves another state (root ${p.info.root}, baseline ${JSON.stringify(p.info.baseline)})`);
      }
    }
    if (!warmedUp) {
      // One untimed sync of each strategy from the honest peers, so that no
      // timed run pays for first-use costs (JIT, WASM tiers, lazy imports).
      const honest = peers.filter((p) => !p.spec.byzantine).map((p) => p.info.ws);
      t = performance.now();
      for (const strategy of strategies) await (strategy === 'bpavl' ? runBpavl(honest) : runBaseline(honest));
      warmedUp = true;
      log(`${profile}: warm-up syncs (untimed) took ${((performance.now() - t) / 1e3).toFixed(1)} s`);
    }
    for (const k of byzCounts) {
      const byzSlots = new Set(byzOrder.slice(0, k));
      const chosen = Array.from({ length: peerCount }, (_, s) => peers.find((p) => p.spec.slot === s && p.spec.byzantine === byzSlots.has(s)));
      const urls = chosen.map((p) => p.info.ws);
      for (const strategy of strategies) {
        log(`${profile} ${strategy} with ${k} Byzantine peer(s)${k > 0 ? ` (slots ${[...byzSlots].join(', ')})` : ''}: syncing${repeat > 1 ? ` ${repeat} times` : ''}`);
        const tries = [];
        for (let i = 0; i < repeat; i++) {
          const r = strategy === 'bpavl' ? await runBpavl(urls) : await runBaseline(urls);
          tries.push(r);
          if (repeat > 1) log(`  try ${i + 1}: ${r.seconds.toFixed(3)} s (${r.detail})`);
          await new Promise((res) => setTimeout(res, 300)); // let the peers close the connections
        }
        // The median try (by time) stands for the combination.
        const r = tries.sort((a, b) => a.seconds - b.seconds)[(tries.length - 1) >> 1];
        const run = {
          profile,
          strategy,
          byzantine: k,
          seconds: round(r.seconds, 3),
          mb_s: round(stateBytes / 1e6 / r.seconds, 1),
          chunks_sent: r.chunks_sent,
          refetched: r.refetched,
          banned: r.banned,
        };
        runs.push(run);
        const line =
          `${profile.padEnd(8)} ${strategy.padEnd(8)} byz ${k}  ${r.seconds.toFixed(3).padStart(8)} s  ${run.mb_s.toFixed(1).padStart(7)} MB/s  ` +
          `chunks_sent ${String(r.chunks_sent).padStart(5)}  refetched ${String(r.refetched).padStart(4)}  banned ${r.banned}   (${r.detail})`;
        lines.push(line);
        log(`  ${line}`);
      }
    }
  } finally {
    await stopPeers(peers);
    log(`${profile}: peers stopped`);
  }
}

// 5. Report: the runs, the targets, the JSON.
const find = (profile, strategy, k) => runs.find((r) => r.profile === profile && r.strategy === strategy && r.byzantine === k);
const mark = (ok) => (ok ? 'ok' : 'MISSED');
const targetLines = [];
const lb = find('loopback', 'bpavl', 0);
if (lb) targetLines.push(`loopback bpavl, 0 Byzantine: ${lb.mb_s.toFixed(1)} MB/s   target ≥ ${TARGETS.loopback_bpavl_mb_s} MB/s  ${mark(lb.mb_s >= TARGETS.loopback_bpavl_mb_s)}`);
for (const [k, target] of Object.entries(TARGETS.wan_ratio)) {
  const a = find('wan', 'bpavl', Number(k));
  const b = find('wan', 'baseline', Number(k));
  if (a && b) {
    const ratio = a.seconds / b.seconds;
    targetLines.push(`wan bpavl ÷ baseline time, ${k} Byzantine: ${a.seconds.toFixed(3)} s ÷ ${b.seconds.toFixed(3)} s = ${ratio.toFixed(3)}   target ≤ ${target}  ${mark(ratio <= target)}`);
  }
}
const w0 = find('wan', 'bpavl', 0);
const w4 = find('wan', 'bpavl', 4);
if (w0 && w4) {
  const ratio = w4.seconds / w0.seconds;
  targetLines.push(`wan bpavl, 4 ÷ 0 Byzantine time: ${w4.seconds.toFixed(3)} s ÷ ${w0.seconds.toFixed(3)} s = ${ratio.toFixed(2)}×   target ≤ ${TARGETS.wan_byz4_vs_byz0}×  ${mark(ratio <= TARGETS.wan_byz4_vs_byz0)}`);
}
console.log(
  `bench:sync  n = ${n} (${(stateBytes / 1e6).toFixed(1)} MB of state), ${peerCount} peers (separate processes, WebSocket), ` +
    `Byzantine: ${args['byzantine-mode']}; ${repeat > 1 ? `median of ${repeat} tries; ` : ''}wan: ${delayMin} … ${delayMax} ms one way, ${rateMBs} MB/s per peer; ` +
    `baseline: ${baselineFetchers} fetchers, chunks of ≤ ${baselineChunkBytes} B; Node ${process.version}, ${availableParallelism()} CPUs; ${((performance.now() - started) / 1e3).toFixed(0)} s`,
);
for (const line of lines) console.log(line);
for (const line of targetLines) console.log(line);
console.log('(a benchmark: targets are reported, not enforced; every run was checked against the trusted roots)');
console.log(JSON.stringify({ runs }));
