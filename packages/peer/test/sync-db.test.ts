// `bpavl sync --db`, killed with SIGKILL again and again: real child
// processes syncing from real WebSocket peers on 127.0.0.1 (in one run of
// three a lying peer among them) into a real SQLite directory. After every
// kill the store holds an unfinished sync with at least the chunks it held
// before (nothing stored is lost); the run that finishes restores exactly
// what was stored, downloads only the rest, and holds the trusted root.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openState } from '@bpavl/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTree, startPeer, type TestPeer } from '../../light-client/test/support/server.ts';
import { instants } from '../../storage/test/processes.ts';
import { BIN, spawnCli, wasmReady } from './support.ts';

const KILLS = 24;
/** A kill lands within this many ms of the child starting to fetch: after its start-up (a first run) or its resume line. */
const KILL_SPREAD_MS = 600;
/** Start-up of a first run, before it fetches (WASM, the store, connections). */
const START_MS = 500;

const dir = mkdtempSync(join(tmpdir(), 'sync-db-'));
/** The directory the killed syncs write into. */
const killed = join(dir, 'killed');
let peers: TestPeer[] = [];
beforeAll(wasmReady);
afterAll(async () => {
  await Promise.all(peers.map((p) => p.close()));
  rmSync(dir, { recursive: true, force: true });
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** The unfinished sync's stored chunks, or 'done' once the store holds the version. */
async function storedChunks(): Promise<number | 'done'> {
  const state = await openState({ path: killed });
  try {
    if (state.head() !== undefined) return 'done';
    return (await state.pendingSync())?.chunksStored ?? 0;
  } finally {
    await state.close();
  }
}

it(`${KILLS} SIGKILLs of bpavl sync --db, then a resume that fetches no stored chunk again`, { timeout: 180_000 }, async () => {
  const { tree, root } = buildTree(300_000, 16);
  const honest = await Promise.all([0, 1].map(() => startPeer(tree)));
  const liar = await startPeer(tree, 'corrupt');
  peers = [...honest, liar];
  const peersOf = (withLiar: boolean) => [...honest, ...(withLiar ? [liar] : [])].flatMap((p) => ['--peer', p.url]);
  const args = (withLiar: boolean) => ['sync', '--root', hex(root), ...peersOf(withLiar), '--db', killed];
  const random = instants(0x5bd1e995);

  let stored = 0;
  let midSync = 0;
  let finished = false;
  let fetchedMs = 0;
  // A kill's window is KILL_SPREAD_MS, narrowed on a fast machine so that the
  // kills left fit in half the time the chunks left would take at the rate
  // seen so far: the sync then rarely finishes before its last kill.
  const killWindowMs = (k: number) => {
    if (stored === 0) return KILL_SPREAD_MS;
    const leftMs = ((tree.chunkCount - stored) * fetchedMs) / stored;
    return Math.min(KILL_SPREAD_MS, leftMs / 2 / (KILLS - k));
  };
  for (let k = 0; k < KILLS; k++) {
    const run = spawnCli(args(k % 3 === 0), 'ignore', 60_000);
    // Fetching starts once the stored chunks are checked again ("resumed: …" on stderr).
    const fetching =
      stored === 0
        ? new Promise((r) => setTimeout(r, START_MS))
        : new Promise((r) => run.child.stderr!.on('data', (d: Buffer) => d.toString().includes('resumed:') && r(undefined)));
    await Promise.race([fetching, run.done]);
    const delay = random() * killWindowMs(k);
    await new Promise((r) => setTimeout(r, delay));
    if (run.child.exitCode === null) process.kill(run.child.pid!, 'SIGKILL');
    const { code } = await run.done;
    const now = await storedChunks();
    if (now === 'done') {
      stored = tree.chunkCount; // it finished (the kill may have come between its last write and its exit)
      finished = true;
      break;
    }
    expect(now).toBeGreaterThanOrEqual(stored); // nothing stored is lost
    if (code === null) midSync++;
    fetchedMs += delay;
    stored = now;
  }
  expect(midSync).toBeGreaterThanOrEqual(20);

  const { code, stdout } = await spawnCli([...args(true), '--json'], 'ignore', 60_000).done;
  expect(code).toBe(0);
  const result = JSON.parse(stdout);
  if (finished) {
    // The kills ended after the sync finished: this run catches version 1 up to the same root, and fetches no chunk.
    expect(result).toMatchObject({ root: hex(root), caughtUpFrom: 1, chunkCount: tree.chunkCount, fetchedChunks: 0 });
  } else {
    expect(result).toMatchObject({ root: hex(root), version: 1, chunkCount: tree.chunkCount, restored: stored });
    expect(result.restored + result.downloaded).toBe(tree.chunkCount);
  }

  const state = await openState({ path: killed, readOnly: true });
  try {
    expect(hex(state.head()!.root)).toBe(hex(root));
    let n = 0;
    for await (const [k, v] of state.range(undefined, undefined, { pageSize: 4096 })) {
      expect(hex(v)).toBe(hex(tree.get(k)!));
      n++;
    }
    expect(n).toBe(tree.len);
  } finally {
    await state.close();
  }
});

/** Starts `bpavl serve ARGS --json` and resolves with its first JSON line. */
async function serve(args: string[], children: ChildProcess[]): Promise<{ ws: string; root: string }> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args, '--json', '--ws-port', '0', '--libp2p-port', 'off', '--exit-on-stdin-end'], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let buf = '';
    const t = setTimeout(() => reject(new Error(`serve ${args.join(' ')} did not start`)), 30_000);
    child.stdout!.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) {
        clearTimeout(t);
        resolve(JSON.parse(buf.split('\n')[0]!));
      }
    });
  });
}

it('a chain of peers: B syncs from A into a directory and serves it, C syncs from B; every step verified against the root', { timeout: 120_000 }, async () => {
  const children: ChildProcess[] = [];
  try {
    const a = await serve(['--entries', '20000', '--chunk', '64'], children);
    const sync = async (from: string, db: string) => {
      const { code, stdout, stderr } = await spawnCli(['sync', '--root', a.root, '--peer', from, '--db', join(dir, db), '--json'], 'ignore', 60_000).done;
      expect(code, stderr).toBe(0);
      return JSON.parse(stdout);
    };
    expect(await sync(a.ws, 'b')).toMatchObject({ root: a.root, version: 1, entryCount: 20000, restored: 0 });
    const b = await serve(['--db', join(dir, 'b')], children);
    expect(b.root).toBe(a.root);
    const c = await sync(b.ws, 'c');
    expect(c).toMatchObject({ root: a.root, version: 1, entryCount: 20000, restored: 0, banned: [] });
    expect(c.downloaded).toBe(c.chunkCount);
    const check = await spawnCli(['check', '--db', join(dir, 'c'), '--json'], 'ignore', 60_000).done;
    expect(check.code).toBe(0);
    expect(JSON.parse(check.stdout)).toEqual({ versions: 1, damaged: [], gone: [] });

    // C holds A's state: another root is a catch-up (docs/catchup.md), and one of another chunk
    // capacity cannot be caught up to: refused with its code (exit 1), C unchanged and writable;
    // a bad flag is a usage error (exit 2).
    const other = await serve(['--entries', '500', '--chunk', '16', '--seed', '9'], children);
    const refused = await spawnCli(['sync', '--root', other.root, '--peer', other.ws, '--db', join(dir, 'c'), '--json'], 'ignore', 60_000).done;
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: 'CAPACITY_MISMATCH' });
    const unchanged = await spawnCli(['check', '--db', join(dir, 'c'), '--json'], 'ignore', 60_000).done;
    expect(JSON.parse(unchanged.stdout)).toEqual({ versions: 1, damaged: [], gone: [] });
    const state = await openState({ path: join(dir, 'c') });
    expect(await state.pendingSync()).toBeUndefined();
    await state.put(new Uint8Array([1]), new Uint8Array([1])); // no catch-up left pending
    await state.close();
    const usage = await spawnCli(['sync', '--root', other.root, '--peer', other.ws, '--discard-unfinished'], 'ignore', 30_000).done;
    expect(usage.code).toBe(2);
  } finally {
    for (const child of children) child.kill('SIGTERM');
  }
});

it('a sync interrupted with SIGINT exits 130, and with --json prints the failure line: ABORTED, no peer to blame', { timeout: 60_000 }, async () => {
  const { tree, root } = buildTree(2_000, 16);
  const silent = await startPeer(tree, 'silent');
  peers.push(silent);
  const run = spawnCli(['sync', '--root', hex(root), '--peer', silent.url, '--db', join(dir, 'interrupted'), '--json'], 'ignore', 30_000);
  // Once it asks for chunks (the silent peer counts the requests it never answers), Ctrl-C.
  for (let i = 0; i < 200 && silent.requests === 0; i++) await new Promise((r) => setTimeout(r, 50));
  expect(silent.requests).toBeGreaterThan(0);
  run.child.kill('SIGINT');
  const { code, stdout } = await run.done;
  expect(code).toBe(130);
  expect(JSON.parse(stdout)).toEqual({ error: 'ABORTED', message: expect.any(String), peers: [] });
});

it('a sync stopped by SIGTERM exits 130 with the ABORTED line, and the same command resumes (a leftover sort directory removed)', { timeout: 60_000 }, async () => {
  const { tree, root } = buildTree(2_000, 16);
  const silent = await startPeer(tree, 'silent');
  const honest = await startPeer(tree);
  peers.push(silent, honest);
  const db = join(dir, 'terminated');
  const run = spawnCli(['sync', '--root', hex(root), '--peer', silent.url, '--db', db, '--json'], 'ignore', 30_000);
  for (let i = 0; i < 200 && silent.requests === 0; i++) await new Promise((r) => setTimeout(r, 50));
  expect(silent.requests).toBeGreaterThan(0);
  run.child.kill('SIGTERM');
  const stopped = await run.done;
  expect(stopped.code, stopped.stderr).toBe(130);
  expect(stopped.stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([{ error: 'ABORTED', message: expect.any(String), peers: [] }]);

  // What a bulk import killed during its sort would have left: the next writer removes it.
  mkdirSync(join(db, 'bpavl-sort-a1b2c3'));
  const resumed = await spawnCli(['sync', '--root', hex(root), '--peer', honest.url, '--db', db, '--json'], 'ignore', 30_000).done;
  expect(resumed.code, resumed.stderr).toBe(0);
  expect(JSON.parse(resumed.stdout)).toMatchObject({ root: hex(root), version: 1 });
  expect(readdirSync(db).filter((n) => n.startsWith('bpavl-sort-'))).toEqual([]);
});

it('a SIGINT while the command still loads is reported too: exit 130, the ABORTED line', { timeout: 60_000 }, async () => {
  // 250 ms: past Node's own start (signals kill until bin/bpavl.mjs runs), before the command's modules have loaded.
  const run = spawnCli(['sync', '--root', '00'.repeat(32), '--peer', 'ws://127.0.0.1:9', '--db', join(dir, 'early'), '--json'], 'ignore', 30_000);
  await new Promise((r) => setTimeout(r, 250));
  run.child.kill('SIGINT');
  const { code, stdout, stderr } = await run.done;
  expect(code, stderr).toBe(130);
  expect(stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([{ error: 'ABORTED', message: expect.any(String), peers: [] }]);
});
