#!/usr/bin/env node
// The bpavl demo network (`npm start`): builds what is missing, generates one
// workload tree, starts N `bpavl serve --file` peers on 127.0.0.1 (each on a
// free WebSocket port and a free libp2p port; some of them lying), serves the
// demo page (packages/demo-web/dist) with /peers.json, and prints the URL
// (with the trusted root filled in when the head does not move). Ctrl-C
// (SIGINT) or SIGTERM stops everything.
//
//   node scripts/demo.mjs [--entries N] [--chunk C] [--peers N] [--byzantine MODES]
//                         [--seed S] [--follow S] [--follow-writes K] [--port P] [--no-build] [--json]
//
// With --follow (default every 5 s) the head moves: the launcher tells every
// peer to commit the next batch of one seeded write stream (stdin "advance",
// packages/testnet/src/advance.ts), checks that they all committed the same
// root, and publishes it on /head.json, which stands in for a header feed.
//
// Every flag has an environment variable (BPAVL_DEMO_ENTRIES, …); flags win.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, resolve, sep } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BYZANTINE_MODES as MODES } from '../packages/testnet/src/byzantine.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// The peers lie through the test network's serve (packages/testnet).
const BPAVL = join(ROOT, 'packages/testnet/bin/bpavl-testnet.mjs');
const DIST = join(ROOT, 'packages/demo-web/dist');
const DEFAULT_PORT = 5180;
const DEFAULT_BYZANTINE = 'corrupt-value,wrong-index';
const DEFAULT_FOLLOW_SECONDS = 5;
const DEFAULT_FOLLOW_WRITES = 100;
/**
 * Versions each peer serves while the head moves: at the default 5 s a root
 * stays served for a minute, so a first sync of the default state (~55 MB)
 * finishes on a link of ~1 MB/s. Each kept version costs a peer ~12 MB at
 * 100,000 entries (RSS ~240 MB with 3 versions, ~655 MB with 36).
 */
const DEFAULT_KEEP_VERSIONS = 12;
/** Heads /head.json lists, newest last. */
const FEED_HEADS = 64;

const USAGE = `npm start [-- options]        (or: node scripts/demo.mjs [options])

Starts the bpavl demo network on 127.0.0.1: N serving peers (WebSocket and
libp2p each) sharing one generated state, some of them lying, and the demo
page. Prints the page's URL (the page takes the newest root of the moving head,
or the fixed root with --follow 0). Ctrl-C stops it all.

  --entries N       entries of the generated state      (BPAVL_DEMO_ENTRIES, default 100000)
  --chunk C         chunk capacity, 2 … 4096             (BPAVL_DEMO_CHUNK, default 256)
  --peers N         serving peers, 1 … 64                (BPAVL_DEMO_PEERS, default 8)
  --byzantine LIST  comma-separated MODE[:RATE], one per lying peer, or "none"
                                                         (BPAVL_DEMO_BYZANTINE, default ${DEFAULT_BYZANTINE})
                    modes: ${MODES.join(', ')}
  --seed S          workload seed                        (BPAVL_DEMO_SEED, default 0: the standard workload)
  --follow S        the head moves: every S seconds the peers commit a new version (a batch of the
                    seeded write stream) and the page may catch up to it; 0 = a fixed state
                                                         (BPAVL_DEMO_FOLLOW, default ${DEFAULT_FOLLOW_SECONDS})
  --follow-writes K writes per new version (updates, inserts, deletes)
                                                         (BPAVL_DEMO_FOLLOW_WRITES, default ${DEFAULT_FOLLOW_WRITES})
  --keep-versions V versions each peer keeps serving while the head moves; a sync of an older root
                    fails (UNKNOWN_ROOT)                 (BPAVL_DEMO_KEEP_VERSIONS, default ${DEFAULT_KEEP_VERSIONS})
  --port P          the page's port on 127.0.0.1; 0 = any free port
                                                         (BPAVL_DEMO_PORT, default ${DEFAULT_PORT}, or a free
                                                         port when ${DEFAULT_PORT} is taken and none was asked for)
  --no-build        do not build (the WASM module, the light client, the page)
  --json            print one JSON line {url, root, peers, …} instead of the summary
  -h, --help        this text

Lying peers are spread over the list; each lies on RATE (default 1) of its
answers, as packages/testnet/README.md describes ("Byzantine modes").`;

class UsageError extends Error {}

function log(msg) {
  process.stderr.write(`demo: ${msg}\n`);
}

// ---------------------------------------------------------------- options

function options(argv) {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        entries: { type: 'string' },
        chunk: { type: 'string' },
        peers: { type: 'string' },
        byzantine: { type: 'string' },
        seed: { type: 'string' },
        follow: { type: 'string' },
        'follow-writes': { type: 'string' },
        'keep-versions': { type: 'string' },
        port: { type: 'string' },
        'no-build': { type: 'boolean' },
        'build-only': { type: 'boolean' },
        snapshot: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (e) {
    throw new UsageError(e.message);
  }
  const env = process.env;
  const int = (name, text, def, min, max) => {
    if (text === undefined || text === '') return def;
    if (!/^\d+$/.test(text)) throw new UsageError(`--${name} must be a whole number, got "${text}"`);
    const n = Number(text);
    if (n < min || n > max) throw new UsageError(`--${name} must be in ${min} … ${max}, got ${text}`);
    return n;
  };
  const entries = int('entries', v.entries ?? env.BPAVL_DEMO_ENTRIES, 100_000, 1, 100_000_000);
  const chunk = int('chunk', v.chunk ?? env.BPAVL_DEMO_CHUNK, 256, 2, 4096);
  const peers = int('peers', v.peers ?? env.BPAVL_DEMO_PEERS, 8, 1, 64);
  const follow = int('follow', v.follow ?? env.BPAVL_DEMO_FOLLOW, DEFAULT_FOLLOW_SECONDS, 0, 3600);
  const followWrites = int('follow-writes', v['follow-writes'] ?? env.BPAVL_DEMO_FOLLOW_WRITES, DEFAULT_FOLLOW_WRITES, 1, 100_000);
  const keepVersions = int('keep-versions', v['keep-versions'] ?? env.BPAVL_DEMO_KEEP_VERSIONS, DEFAULT_KEEP_VERSIONS, 1, 10_000);
  const portText = v.port ?? env.BPAVL_DEMO_PORT;
  const port = int('port', portText, DEFAULT_PORT, 0, 65535);
  const seed = v.seed ?? env.BPAVL_DEMO_SEED ?? '0';
  if (!/^\d+$/.test(seed) || BigInt(seed) >= 1n << 64n) throw new UsageError(`--seed must be an unsigned 64-bit integer, got "${seed}"`);
  const byzText = (v.byzantine ?? env.BPAVL_DEMO_BYZANTINE ?? DEFAULT_BYZANTINE).trim();
  const byzantine = byzText === '' || byzText === 'none' ? [] : byzText.split(',').map((s) => s.trim());
  for (const spec of byzantine) {
    const [mode, rate, extra] = spec.split(':');
    if (!MODES.includes(mode) || extra !== undefined) {
      throw new UsageError(`--byzantine: unknown mode "${spec}" (modes: ${MODES.join(', ')})`);
    }
    if (rate !== undefined && !(Number(rate) > 0 && Number(rate) <= 1)) {
      throw new UsageError(`--byzantine: the rate of "${spec}" must be in (0, 1]`);
    }
  }
  if (byzantine.length > peers) {
    throw new UsageError(`--byzantine lists ${byzantine.length} lying peers but there are only ${peers} peers`);
  }
  return {
    entries,
    chunk,
    peers,
    port,
    portAsked: portText !== undefined && portText !== '',
    seed,
    follow,
    followWrites,
    keepVersions,
    byzantine,
    build: !v['no-build'],
    buildOnly: !!v['build-only'],
    snapshot: v.snapshot,
    json: !!v.json,
    help: !!v.help,
  };
}

/** Spreads `k` lying peers over `n`: peer indices, e.g. 8 peers, 2 liars → 2 and 5. */
function liarSlots(n, k) {
  const slots = [];
  for (let j = 0; j < k; j++) slots.push(Math.min(n - 1, Math.floor(((j + 1) * n) / (k + 1))));
  // Collisions only when k is close to n: fill from the start.
  const used = new Set();
  return slots.map((s) => {
    while (used.has(s)) s = (s + 1) % n;
    used.add(s);
    return s;
  });
}

// ---------------------------------------------------------------- build

/** The newest modification time under `paths` (files or directories), 0 if none. */
function newest(paths) {
  let t = 0;
  const visit = (p) => {
    let s;
    try {
      s = statSync(p);
    } catch {
      return;
    }
    if (s.isDirectory()) {
      for (const name of readdirSync(p)) if (name !== 'node_modules' && name !== 'dist' && name !== 'target') visit(join(p, name));
    } else t = Math.max(t, s.mtimeMs);
  };
  for (const p of paths) visit(join(ROOT, p));
  return t;
}

function mtime(path) {
  try {
    return statSync(join(ROOT, path)).mtimeMs;
  } catch {
    return 0;
  }
}

function run(what, cmd, args) {
  log(`building ${what}`);
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: ['ignore', process.stderr, process.stderr] });
  if (r.status !== 0) throw new Error(`building ${what} failed (${cmd} ${args.join(' ')})`);
}

/** Builds what is missing or older than its sources. */
function buildAll() {
  const wasm = 'packages/bpavl-wasm/pkg/bpavl_wasm_bg.wasm';
  if (mtime(wasm) < newest(['crates/core/src', 'crates/core/Cargo.toml', 'packages/bpavl-wasm/src', 'packages/bpavl-wasm/Cargo.toml'])) {
    run('the WASM module (@bpavl/wasm)', 'npm', ['run', '--silent', 'build', '-w', '@bpavl/wasm']);
  }
  const lc = 'packages/light-client/dist/sync/index.js';
  if (mtime(lc) < newest(['packages/light-client/src', 'packages/light-client/tsconfig.build.json'])) {
    run('the light client (@bpavl/light-client)', 'npm', ['run', '--silent', 'build', '-w', '@bpavl/light-client']);
  }
  const storage = 'packages/storage/dist/indexeddb.js';
  if (mtime(storage) < newest(['packages/storage/src', 'packages/storage/tsconfig.build.json'])) {
    run('the storage backends (@bpavl/storage)', 'npm', ['run', '--silent', 'build', '-w', '@bpavl/storage']);
  }
  // The page: by content, because tsc rewrites the light client's dist/
  // (same bytes, new times) whenever anyone builds it.
  const inputs = [
    'packages/demo-web/src',
    'packages/demo-web/index.html',
    'packages/demo-web/vite.config.ts',
    'packages/demo-web/package.json',
    'packages/light-client/dist',
    'packages/storage/dist',
    'packages/store/src',
    'packages/bpavl-wasm/pkg',
    'packages/bpavl-wasm/index.js',
  ];
  const hash = contentHash(inputs);
  const stamp = join(DIST, '.inputs-sha256');
  const built = existsSync(join(DIST, 'index.html')) && existsSync(stamp) && readFileSync(stamp, 'utf8') === hash;
  if (!built) {
    run('the demo page (@bpavl/demo-web)', 'npm', ['run', '--silent', 'build', '-w', '@bpavl/demo-web']);
    writeFileSync(stamp, hash);
  }
}

/** SHA-256 over the paths and contents of every file under `paths`. */
function contentHash(paths) {
  const h = createHash('sha256');
  const visit = (rel) => {
    const abs = join(ROOT, rel);
    let s;
    try {
      s = statSync(abs);
    } catch {
      return;
    }
    if (s.isDirectory()) {
      for (const name of readdirSync(abs).sort()) if (name !== 'node_modules') visit(join(rel, name));
    } else {
      h.update(`${rel}\0${s.size}\0`);
      h.update(readFileSync(abs));
    }
  };
  for (const p of paths) visit(p);
  return h.digest('hex');
}

/** Builds (unless `build` is false) and copies the page to `snapshot`. */
function buildAndCopy(build, snapshot) {
  if (build) buildAll();
  if (!existsSync(join(DIST, 'index.html'))) throw new Error(`${DIST}/index.html is missing: run without --no-build`);
  if (snapshot) cpSync(DIST, snapshot, { recursive: true });
}

/**
 * Builds and copies the page to `snapshot` under a lock: two `npm start`s
 * must not build into the same directories at once, and each serves its own
 * copy, so a later build never changes a running demo's files. Re-runs this
 * script with --build-only under flock(1) where it exists.
 */
function buildLocked(build, snapshot) {
  const hasFlock = spawnSync('flock', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!hasFlock) return buildAndCopy(build, snapshot);
  mkdirSync(join(ROOT, '.tools'), { recursive: true });
  const args = [join(ROOT, '.tools/demo-build.lock'), process.execPath, fileURLToPath(import.meta.url), '--build-only', '--snapshot', snapshot];
  if (!build) args.push('--no-build');
  const r = spawnSync('flock', args, { cwd: ROOT, stdio: ['ignore', process.stderr, process.stderr] });
  if (r.status !== 0) throw new Error('the build failed (see above)');
}

// ---------------------------------------------------------------- processes

/** Runs `bpavl` with `args`; `first` resolves with its first stdout line parsed as JSON, `onLine` gets the later ones. */
function bpavl(args, { name, children, timeoutMs = 120_000, onLine }) {
  const child = spawn(process.execPath, [BPAVL, ...args], {
    cwd: ROOT,
    // stdin is a pipe that carries only "advance" (--follow): it ends when this
    // launcher dies, even by SIGKILL, and `serve --exit-on-stdin-end` then stops the peer.
    stdio: ['pipe', 'pipe', 'pipe'],
    // Its own process group: Ctrl-C reaches only this launcher, which stops
    // the peers in order (and reports it) instead of all at once.
    detached: true,
  });
  children?.add(child);
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const first = new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${name} did not start within ${timeoutMs / 1000} s`)), timeoutMs);
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      if (onLine) lines.on('line', onLine);
      clearTimeout(timer);
      try {
        ok(JSON.parse(line));
      } catch {
        fail(new Error(`${name} printed "${line}" instead of JSON`));
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      fail(new Error(`${name} exited (${signal ?? `code ${code}`}) before it was ready${stderr ? `:\n${stderr.trim()}` : ''}`));
    });
    child.once('error', (e) => {
      clearTimeout(timer);
      fail(e);
    });
  });
  return { child, first, stderr: () => stderr };
}

/** SIGTERM, then SIGKILL after `ms`; resolves once every child has exited. */
async function stopChildren(children, ms = 5000) {
  const alive = [...children].filter((c) => c.exitCode === null && c.signalCode === null);
  await Promise.all(
    alive.map(
      (c) =>
        new Promise((ok) => {
          const force = setTimeout(() => c.kill('SIGKILL'), ms);
          c.once('exit', () => {
            clearTimeout(force);
            ok();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
}

// ---------------------------------------------------------------- moving head

/**
 * The moving head: every `seconds`, tells each running peer to commit the
 * next batch of the seeded write stream, and once all of them have, publishes
 * the root they agree on (peers that disagree are reported, and nothing is
 * published). A tick while the last batch is still being committed is skipped.
 * Returns `onLine(i, line)` for peer `i`'s output, `peerExited()`, and `stop()`.
 */
function moveHead({ peers, seconds, bytesPerEntry, publish }) {
  let step = 0;
  let committed; // peer index → what it printed for `step`, while a step runs
  const running = () => peers.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
  const settle = () => {
    if (!committed || committed.size < running().length) return;
    const roots = new Set([...committed.values()].map((a) => a.root));
    const a = [...committed.values()][0];
    committed = undefined;
    if (a === undefined) return;
    if (roots.size !== 1) return log(`step ${step}: the peers committed ${roots.size} different roots (a bug): not published`);
    publish({ version: a.version, root: a.root, entryCount: a.entryCount, chunkCount: a.chunkCount, bytes: Math.round(bytesPerEntry * a.entryCount), at: Date.now() });
  };
  const timer = setInterval(() => {
    if (committed) return;
    step++;
    committed = new Map();
    for (const p of running()) p.child.stdin.write('advance\n');
  }, seconds * 1000);
  return {
    onLine(i, line) {
      let a;
      try {
        a = JSON.parse(line);
      } catch {
        return;
      }
      if (committed && a.step === step) {
        committed.set(i, a);
        settle();
      }
    },
    peerExited: settle,
    stop: () => clearInterval(timer),
  };
}

// ---------------------------------------------------------------- page server

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.map': 'application/json',
};

// The page may talk to this server and to peers on this machine, nothing else.
const CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self' ws://127.0.0.1:* ws://localhost:*",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** A static server for `dir` plus `/peers.json` and `/head.json`, on 127.0.0.1:`port`. */
function pageServer(dir, peersJson, headJson) {
  const root = resolve(dir);
  return createServer(async (req, res) => {
    const headers = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'content-security-policy': CSP };
    const send = (status, type, body) => {
      res.writeHead(status, { ...headers, 'content-type': type });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed\n');
      const { pathname } = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (pathname === '/peers.json') return send(200, 'application/json', peersJson());
      if (pathname === '/head.json') return send(200, 'application/json', headJson());
      const rel = decodeURIComponent(pathname.endsWith('/') ? `${pathname}index.html` : pathname);
      const file = resolve(join(root, rel));
      if (file !== root && !file.startsWith(root + sep)) return send(403, 'text/plain', 'forbidden\n');
      const info = await stat(file).catch(() => undefined);
      if (!info?.isFile()) return send(404, 'text/plain', `not found: ${pathname}\n`);
      res.writeHead(200, { ...headers, 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': info.size });
      if (req.method === 'HEAD') return res.end();
      createReadStream(file).pipe(res);
    } catch (e) {
      if (!res.headersSent) send(500, 'text/plain', `${e}\n`);
      else res.destroy();
    }
  });
}

/** Listens on 127.0.0.1:`port`; rejects with EADDRINUSE if taken. */
function listen(server, port) {
  return new Promise((ok, fail) => {
    const onError = (e) => fail(e);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      ok(server.address().port);
    });
  });
}

// ---------------------------------------------------------------- main

async function main() {
  const opt = options(process.argv.slice(2));
  if (opt.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (opt.buildOnly) return buildAndCopy(opt.build, opt.snapshot);

  const children = new Set();
  const tmp = mkdtempSync(join(tmpdir(), 'bpavl-demo-'));
  const page = join(tmp, 'page');
  let server;
  let head; // the moving head, with --follow
  let stopping = false;
  const cleanupSync = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  };
  process.on('exit', cleanupSync);
  const stop = async (why, code = 0) => {
    if (stopping) return;
    stopping = true;
    if (why) log(why);
    head?.stop();
    server?.closeAllConnections?.();
    server?.close();
    await stopChildren(children);
    rmSync(tmp, { recursive: true, force: true });
    process.exit(code);
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void stop(`${sig}: stopping the demo and every peer`));

  try {
    buildLocked(opt.build, page);

    // 1. The page's port first: a taken port fails before anything starts.
    let peersJson = '{}';
    let headJson = '{"heads":[]}';
    server = pageServer(page, () => peersJson, () => headJson);
    let port;
    try {
      port = await listen(server, opt.port);
    } catch (e) {
      if (e.code !== 'EADDRINUSE') throw e;
      if (opt.portAsked) {
        throw new UsageError(`port ${opt.port} on 127.0.0.1 is busy (another demo?): choose another with --port P, or --port 0 for any free port`);
      }
      log(`port ${opt.port} on 127.0.0.1 is busy (another demo?): using a free port instead`);
      port = await listen(server, 0);
    }

    // 2. One tree file, loaded by every peer (each verifies it chunk by chunk).
    const treeFile = join(tmp, 'tree.bin');
    const t0 = performance.now();
    log(`generating ${opt.entries.toLocaleString('en-US')} entries (chunk capacity ${opt.chunk}, seed ${opt.seed})`);
    const gen = bpavl(['generate', '--out', treeFile, '--entries', String(opt.entries), '--chunk', String(opt.chunk), '--seed', opt.seed, '--json'], {
      name: 'bpavl generate',
      children,
      timeoutMs: 600_000,
    });
    const tree = await gen.first;

    // 3. The peers, in parallel.
    const liars = liarSlots(opt.peers, opt.byzantine.length);
    const modeOf = (i) => {
      const j = liars.indexOf(i);
      return j < 0 ? null : opt.byzantine[j];
    };
    log(`starting ${opt.peers} peers (${opt.byzantine.length ? `lying: ${liars.map((i) => `peer ${i + 1} ${modeOf(i)}`).join(', ')}` : 'all honest'})`);
    const started = Array.from({ length: opt.peers }, (_, i) => {
      const spec = modeOf(i);
      const args = ['serve', '--file', treeFile, '--root', tree.root, '--json', '--exit-on-stdin-end'];
      if (spec) args.push('--byzantine', spec);
      if (opt.follow > 0) args.push('--advance-on-stdin', '--advance-writes', String(opt.followWrites), '--keep-versions', String(opt.keepVersions));
      return bpavl(args, { name: `peer ${i + 1} (bpavl serve)`, children, onLine: (line) => head?.onLine(i, line) });
    });
    const infos = await Promise.all(started.map((s) => s.first));
    const peers = infos.map((info, i) => {
      const spec = modeOf(i);
      return {
        name: `peer ${i + 1}`,
        ws: info.ws,
        libp2p: info.libp2p,
        peerId: info.peerId,
        mode: spec ? spec.split(':')[0] : null,
        rate: info.byzantine ? info.byzantine.rate : null,
        pid: started[i].child.pid,
      };
    });
    for (const [i, s] of started.entries()) {
      s.child.stdin.on('error', () => {}); // a peer that died: its exit is reported below
      s.child.once('exit', (code, signal) => {
        if (!stopping) log(`peer ${i + 1} exited unexpectedly (${signal ?? `code ${code}`})${s.stderr() ? `: ${s.stderr().trim()}` : ''}`);
        head?.peerExited();
      });
    }
    const follow = opt.follow > 0 ? { seconds: opt.follow, writes: opt.followWrites, keepVersions: opt.keepVersions } : null;
    if (follow) {
      // A full sync fetches about the tree file's bytes (its chunk envelopes); later heads, in proportion to their entries.
      const bytes = statSync(treeFile).size;
      const bytesPerEntry = tree.entryCount > 0 ? bytes / tree.entryCount : 0;
      const heads = [{ version: 1, root: tree.root, entryCount: tree.entryCount, chunkCount: tree.chunkCount, bytes, at: Date.now() }];
      const publish = (h) => {
        heads.push(h);
        heads.splice(0, heads.length - FEED_HEADS);
        headJson = JSON.stringify({ heads });
      };
      headJson = JSON.stringify({ heads });
      head = moveHead({ peers: started, seconds: opt.follow, bytesPerEntry, publish });
    }
    const config = {
      root: tree.root,
      entryCount: tree.entryCount,
      chunk: tree.capacity,
      chunkCount: tree.chunkCount,
      seed: tree.seed,
      follow,
      peers: peers.map(({ pid: _pid, ...p }) => p),
    };
    peersJson = JSON.stringify(config);
    // A moving head: the page takes the newest root from /head.json (the first one is gone after a while).
    const url = follow ? `http://127.0.0.1:${port}/` : `http://127.0.0.1:${port}/?root=${tree.root}`;
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);

    if (opt.json) {
      process.stdout.write(`${JSON.stringify({ url, port, pid: process.pid, ...config, peers })}\n`);
    } else {
      const w = Math.max(...peers.map((p) => (p.mode ?? 'honest').length)) + 2;
      const lines = [
        '',
        `bpavl demo: ${opt.peers} peers serving ${tree.entryCount.toLocaleString('en-US')} entries in ${tree.chunkCount} chunks (capacity ${tree.capacity}), ready in ${seconds} s`,
        follow ? `head          moves every ${follow.seconds} s (${follow.writes} writes each; the peers serve the last ${follow.keepVersions}); the page shows the newest root` : `trusted root  ${tree.root}`,
        '',
        ...peers.map((p) => {
          const mode = p.mode ? `${p.mode}${p.rate !== null && p.rate !== 1 ? `:${p.rate}` : ''}` : 'honest';
          return `  ${p.name.padEnd(8)} ${mode.padEnd(w)}${p.mode ? 'LIES ' : '     '} ${p.ws}  ${p.libp2p}`;
        }),
        '',
        `  Open  ${url}`,
        '',
        'Ctrl-C stops the demo and every peer.',
        '',
      ];
      process.stdout.write(lines.join('\n'));
    }
  } catch (e) {
    const msg = e instanceof UsageError ? e.message : e instanceof Error ? e.message : String(e);
    await stop(`error: ${msg}`, e instanceof UsageError ? 2 : 1);
  }
}

main().catch((e) => {
  if (e instanceof UsageError) {
    log(`${e.message}\n(npm start -- --help, or node scripts/demo.mjs --help, lists the options)`);
    process.exit(2);
  }
  log(`error: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
