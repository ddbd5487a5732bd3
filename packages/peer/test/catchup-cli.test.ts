// `bpavl sync --db DIR` on a directory that holds an older state: real
// child processes, real serving peers on 127.0.0.1 (`startPeer`, WebSocket)
// and a real SQLite directory. The command catches the state up (says so,
// fetches a small part of the state) as the directory's next version; a
// catch-up killed with SIGKILL at random instants (half of them once it has
// stored chunks) leaves the directory at its old version, whole, and the
// same command then resumes it: every changed chunk is either taken back
// from what the killed runs stored or fetched, never both. With only peers
// that predate the catch-up requests, every chunk is fetched whole (the
// same guarantees, per chunk). With no honest peer left it fails and
// reports each peer given up.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openState, TABLES } from '@bpavl/store';
import { Tree } from '@bpavl/wasm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServerHook } from '../src/hook.ts';
import { type RunningPeer, startPeer } from '../src/peer.ts';
import { CachedTree, StaticTreeSource } from '../src/source.ts';
import { Kind, Status } from '@bpavl/light-client/wire';
import { openNodeBackend } from '../../storage/src/node/index.ts';
import { instants } from '../../storage/test/processes.ts';
import { PROGRESS_START, versionKey } from '../../store/src/records.ts';
import { spawnCli, wasmReady, withoutCatchUp } from './support.ts';
import { expectHolds } from '../../store/test/support/holds.ts';

const KILLS = 12;

const dir = mkdtempSync(join(tmpdir(), 'catchup-cli-'));
const peers: RunningPeer[] = [];
beforeAll(wasmReady);
afterAll(async () => {
  await Promise.all(peers.map((p) => p.close()));
  rmSync(dir, { recursive: true, force: true });
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const enc = (s: string) => new TextEncoder().encode(s);

/** Version `round` of one chain: `n` entries, then each round updates every `1/fraction`-th key. */
function version(n: number, rounds: number, every: number): Tree {
  const tree = new Tree(64);
  for (let i = 0; i < n; i++) tree.insert(enc(`key-${String(i).padStart(8, '0')}`), new Uint8Array(100).fill(i & 0xff));
  tree.commit();
  for (let r = 1; r <= rounds; r++) {
    for (let i = r; i < n; i += every) tree.insert(enc(`key-${String(i).padStart(8, '0')}`), new Uint8Array(100).fill((i + r) & 0xff));
    tree.commit();
  }
  return tree;
}

/**
 * Resolves once the catch-up into `path` has stored a chunk of its version
 * (2), or (`whole`) a chunk's progress record, or `done` settles; polls
 * for 20 s at most.
 */
async function storesChunks(path: string, done: Promise<unknown>, whole = false): Promise<void> {
  let over = false;
  void done.then(() => (over = true));
  for (let i = 0; i < 400 && !over; i++) {
    const backend = await openNodeBackend({ path, tables: TABLES, readOnly: true });
    try {
      const [table, start] = whole ? ['meta', PROGRESS_START] : ['chunks', versionKey(2)];
      for await (const _ of backend.scan(table, { start, limit: 1 })) return;
    } finally {
      await backend.close();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A peer serving `tree`; with `delayMs`, each answer is sent that much
 * later (a slow link, so that a catch-up lasts long enough to be killed
 * mid-way); `old`, a peer that predates the catch-up requests.
 */
async function serve(tree: Tree, delayMs = 0, old = false): Promise<string> {
  const hook: ServerHook = { reply: (_req, honest) => ({ kind: 'delay', ms: delayMs, reply: { kind: 'answer', status: honest.status, ...(honest.payload && { payload: honest.payload }) } }) };
  const served = old ? withoutCatchUp(new CachedTree(tree.head())) : new CachedTree(tree.head());
  const peer = await startPeer(new StaticTreeSource([served]), { libp2pPort: null, ...(delayMs > 0 && { hook }) });
  peers.push(peer);
  return peer.wsUrl!;
}

it('bpavl sync --db on an older state catches it up, and says how little it fetched', { timeout: 120_000 }, async () => {
  const path = join(dir, 'state');
  const v1 = version(20_000, 0, 1000);
  const v2 = version(20_000, 1, 1000);
  const sync = (tree: Tree, url: string, json = true) =>
    spawnCli(['sync', '--root', hex(tree.head().root), '--peer', url, '--db', path, ...(json ? ['--json'] : [])], 'ignore', 60_000).done;

  const first = await sync(v1, await serve(v1));
  expect(first.code).toBe(0);
  const url2 = await serve(v2);
  const { code, stdout } = await sync(v2, url2);
  expect(code).toBe(0);
  const out = JSON.parse(stdout);
  expect(out).toMatchObject({ caughtUpFrom: 1, version: 2, entryCount: 20_000, banned: [] });
  let full = 0;
  for (let i = 0; i < v2.chunkCount; i++) full += v2.head().exportChunk(i).length;
  expect(out.bytes).toBeLessThan(full / 10);
  await expectHolds(path, v2, 2);

  // In words, and again: nothing to fetch.
  const again = await sync(v2, url2, false);
  expect(again.stdout).toContain('holds it already (version 2)');
  const v3 = version(20_000, 2, 1000);
  const said = await sync(v3, await serve(v3), false);
  expect(said.code).toBe(0);
  expect(said.stdout).toMatch(/caught up from version 2: [\d.]+ MB fetched, [\d,]+ of [\d,]+ chunks changed/);
  await expectHolds(path, v3, 3);
});

it(`${KILLS} SIGKILLs of a catch-up leave the old version whole; the resume fetches nothing stored before`, { timeout: 180_000 }, async () => {
  const path = join(dir, 'killed');
  const base = version(100_000, 0, 10);
  const next = version(100_000, 1, 10);
  const sync = (tree: Tree, url: string) => spawnCli(['sync', '--root', hex(tree.head().root), '--peer', url, '--db', path, '--json'], 'ignore', 60_000);
  expect((await sync(base, await serve(base)).done).code).toBe(0);
  // A connection answers one request at a time: 20 ms each makes a whole catch-up here (about 160 requests) last 3 s, so that no run ends before its kill.
  const url = await serve(next, 20);
  const random = instants(0x2545f491);
  let killedMid = 0;
  for (let k = 0; k < KILLS; k++) {
    const run = sync(next, url);
    // Every other kill lands early (perhaps before anything is stored), the rest once the catch-up has stored chunks.
    if (k % 2 === 0) await new Promise((r) => setTimeout(r, 200 + random() * 600));
    else {
      await storesChunks(path, run.done);
      await new Promise((r) => setTimeout(r, random() * 100));
    }
    if (run.child.exitCode === null) process.kill(run.child.pid!, 'SIGKILL');
    const { code } = await run.done;
    const state = await openState({ path, readOnly: true });
    const v = state.head()!.version;
    await state.close();
    if (v === 2) break; // it finished before the kill
    expect(v).toBe(1);
    if (code === null) killedMid++;
    // The head is still the old version, whole (what the catch-up stored is kept beside it).
    await expectHolds(path, base, 1);
  }
  expect(killedMid).toBeGreaterThanOrEqual(KILLS / 3);
  // Writes wait for the catch-up (finish it, or discard it).
  const state = await openState({ path });
  await expect(state.put(enc('x'), enc('y'))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  await state.close();
  const { code, stdout } = await sync(next, url).done;
  expect(code).toBe(0);
  const out = JSON.parse(stdout);
  expect(out).toMatchObject({ caughtUpFrom: 1, version: 2 });
  // Every changed chunk was either stored by the killed runs or fetched now, never both.
  expect(out.restoredChunks).toBeGreaterThan(0);
  expect(out.restoredChunks + out.fetchedChunks).toBe(out.changedChunks);
  await expectHolds(path, next, 2);
  const after = await openState({ path });
  await after.put(enc('x'), enc('y')); // writes are taken again
  await after.close();
});

it('with only peers that predate catch-up, bpavl sync --db fetches every chunk whole; SIGKILLed runs resume it, fetching nothing twice', { timeout: 120_000 }, async () => {
  const path = join(dir, 'old-peers');
  const base = version(20_000, 0, 1000);
  const next = version(20_000, 1, 1000);
  const sync = (tree: Tree, url: string, json = true) =>
    spawnCli(['sync', '--root', hex(tree.head().root), '--peer', url, '--db', path, ...(json ? ['--json'] : [])], 'ignore', 60_000);
  expect((await sync(base, await serve(base)).done).code).toBe(0);
  // 10 ms an answer: the whole sync (about 420 chunks) lasts a few seconds.
  const url = await serve(next, 10, true);
  const random = instants(0x5eed);
  for (let k = 0; k < 3; k++) {
    const run = sync(next, url);
    await storesChunks(path, run.done, true);
    await new Promise((r) => setTimeout(r, random() * 300));
    if (run.child.exitCode === null) process.kill(run.child.pid!, 'SIGKILL');
    expect((await run.done).code).toBe(null);
    await expectHolds(path, base, 1);
  }
  const { code, stdout } = await sync(next, url).done;
  expect(code).toBe(0);
  const out = JSON.parse(stdout);
  expect(out).toMatchObject({ caughtUpFrom: 1, version: 2, wholeChunks: true, banned: [] });
  // Every chunk was either stored by the killed runs or fetched now, never both.
  expect(out.restoredChunks).toBeGreaterThan(0);
  expect(out.restoredChunks + out.fetchedChunks).toBe(next.chunkCount);
  expect(out.changedChunks).toBeLessThan(next.chunkCount / 4);
  await expectHolds(path, next, 2);
  // The next root, from an old peer, not stopped: says so in words.
  const v3 = version(20_000, 2, 1000);
  const said = await sync(v3, await serve(v3, 0, true), false).done;
  expect(said.code).toBe(0);
  expect(said.stderr).toContain('no peer serves the catch-up requests');
  expect(said.stdout).toMatch(/caught up from version 2: [\d.]+ MB fetched \(every chunk whole\), [\d,]+ of [\d,]+ chunks changed/);
  await expectHolds(path, v3, 3);
});

it('a catch-up with no honest peer left exits 1 and reports each peer given up, with its outcome and code', { timeout: 60_000 }, async () => {
  const path = join(dir, 'no-honest');
  const base = version(5_000, 0, 100);
  const next = version(5_000, 1, 100);
  const sync = (url: string[], json: boolean) =>
    spawnCli(['sync', '--root', hex(next.head().root), ...url.flatMap((u) => ['--peer', u]), '--db', path, '--stall-timeout', '1500', ...(json ? ['--json'] : [])], 'ignore', 30_000).done;
  expect((await spawnCli(['sync', '--root', hex(base.head().root), '--peer', await serve(base), '--db', path, '--json'], 'ignore', 30_000).done).code).toBe(0);
  const hooked = async (hook: ServerHook) => {
    const peer = await startPeer(new StaticTreeSource([new CachedTree(next.head())]), { libp2pPort: null, hook });
    peers.push(peer);
    return peer.wsUrl!;
  };
  // One says the top is no inner node (its CHUNK 0 shows more chunks); one answers BUSY to everything.
  const liar = await hooked({ reply: (req) => (req.request?.kind === Kind.Nodes ? { kind: 'answer', status: Status.OutOfRange } : undefined) });
  const busy = await hooked({ reply: () => ({ kind: 'answer', status: Status.Busy }) });
  const { code, stdout } = await sync([liar, busy], true);
  expect(code).toBe(1);
  expect(JSON.parse(stdout)).toMatchObject({
    error: 'NO_HONEST_PEERS',
    peers: [
      { peer: liar, outcome: 'banned', code: 'OUT_OF_RANGE' },
      { peer: busy, outcome: 'busy', code: 'BUSY' },
    ],
  });
  const words = await sync([liar, busy], false);
  expect(words.code).toBe(1);
  expect(words.stderr).toContain(`banned ${liar}:`);
  expect(words.stderr).toContain(`busy ${busy}:`);
  await expectHolds(path, base, 1);
});
