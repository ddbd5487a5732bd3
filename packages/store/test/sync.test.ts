// A sync into a store on the Node backend (SQLite), from real WebSocket
// peers on 127.0.0.1: the finished sync is the store's version 1 with the
// trusted root; an interrupted one resumes without fetching any stored chunk
// again; a stored chunk damaged on disk is fetched again and nobody is
// banned for it; another root neither mixes in nor is lost silently. A
// sink whose disk falls behind writes bounded batches.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { init, type Tree, verifyChunk } from '@bpavl/wasm';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { type SyncEvent, syncState } from '../../light-client/src/sync/index.js';
import { buildTree, startPeer, type TestPeer } from '../../light-client/test/support/server.js';
import { openNodeBackend } from '../../storage/src/node/index.ts';
import { MemoryDatabase, openMemoryBackend } from '../../storage/src/memory.ts';
import { openState, type State, TABLES } from '../src/index.ts';
import { expectHolds } from './support/holds.ts';

const dirs: string[] = [];
let peers: TestPeer[] = [];
beforeAll(async () => {
  await init();
});
afterEach(async () => {
  await Promise.all(peers.map((p) => p.close()));
  peers = [];
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function newDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'store-sync-'));
  dirs.push(d);
  return d;
}

/** Syncs `root` into the store at `path` until `stopAfter` chunks verified (abort), or to the end. */
async function run(path: string, root: Uint8Array, stopAfter = Infinity) {
  const state = await openState({ path });
  try {
    return await syncInto(state, root, stopAfter);
  } finally {
    await state.close();
  }
}

/** `run` on a store already open, left open. */
async function syncInto(state: State, root: Uint8Array, stopAfter = Infinity) {
  const events: SyncEvent[] = [];
  const abort = new AbortController();
  let verified = 0;
  try {
    const result = await syncState({
      root,
      peers: peers.map((p) => p.url),
      store: state,
      signal: abort.signal,
      onEvent: (e) => {
        events.push(e);
        if (e.type === 'chunk-verified' && ++verified === stopAfter) abort.abort(new Error('stopped'));
      },
    });
    return { result, events };
  } catch (e) {
    return { error: e, events };
  }
}

it('a sync into an empty store is its version 1, with the trusted root and every entry', async () => {
  const { tree, root } = buildTree(3000, 16);
  peers = await Promise.all([0, 1, 2].map(() => startPeer(tree)));
  const path = newDir();
  const { result } = await run(path, root);
  expect(result).toMatchObject({ version: 1, chunkCount: tree.chunkCount, restored: 0, banned: [] });
  expect(hex(result!.root)).toBe(hex(root));
  await expectHolds(path, tree);

  // The same sync again fetches nothing; another root is refused: the store holds a state.
  const again = await run(path, root);
  expect(again.result).toMatchObject({ version: 1, restored: tree.chunkCount });
  expect(again.events.filter((e) => e.type === 'request')).toEqual([]);
  const other = buildTree(500, 16, 2);
  expect(await run(path, other.root)).toMatchObject({ error: { code: 'STORE_NOT_EMPTY' } });
});

it('an interrupted sync resumes: no stored chunk is fetched again, and writes wait for it', async () => {
  const { tree, root } = buildTree(4000, 16);
  peers = await Promise.all([0, 1].map(() => startPeer(tree)));
  const path = newDir();
  const fetchedIn = (events: SyncEvent[]) => new Set(events.flatMap((e) => (e.type === 'chunk-verified' ? [e.index] : [])));

  const first = await run(path, root, 60);
  expect(first.error).toMatchObject({ message: 'stopped' });
  const state = await openState({ path });
  const pending = await state.pendingSync();
  expect(hex(pending!.root)).toBe(hex(root));
  expect(pending!.chunksStored).toBeGreaterThan(0);
  expect(pending!.chunksStored).toBeLessThanOrEqual(60);
  await expect(state.put(new Uint8Array([1]), new Uint8Array([1]))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  await expect(state.syncSink(buildTree(100, 16, 3).root)).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  await state.close();

  const second = await run(path, root);
  const restored = second.events.find((e) => e.type === 'restored');
  expect(restored).toMatchObject({ type: 'restored', chunks: pending!.chunksStored, chunkCount: tree.chunkCount });
  const restoredIndices = new Set(restored?.type === 'restored' ? restored.indices : []);
  expect(restoredIndices.size).toBe(pending!.chunksStored);
  expect(second.result).toMatchObject({ version: 1, restored: pending!.chunksStored });
  // Every chunk is either restored or fetched now, never both.
  const now = fetchedIn(second.events);
  expect(now.size + pending!.chunksStored).toBe(tree.chunkCount);
  for (const e of second.events) if (e.type === 'request') expect(restoredIndices.has(e.index)).toBe(false);
  await expectHolds(path, tree);
  const after = await openState({ path });
  expect(await after.pendingSync()).toBeUndefined();
  await after.close();
});

it('an aborted sync settles once its last writes landed: the store holds, unreopened, what the last stored event said', async () => {
  const { tree, root } = buildTree(4000, 16);
  peers = await Promise.all([0, 1].map(() => startPeer(tree)));
  const state = await openState({ path: newDir() });
  try {
    // Stopped before the first write (64 chunks, or 200 ms): every chunk it took is written on the way out.
    const { error, events } = await syncInto(state, root, 30);
    expect(error).toMatchObject({ message: 'stopped' });
    // Right after the rejection, the same open store: no close and reopen to let the writes land.
    const kept = (await state.pendingSync())!.chunksStored;
    const stored = events.flatMap((e) => (e.type === 'stored' ? [e.chunks] : []));
    expect(stored.at(-1)).toBe(kept);
    // Every chunk verified before the abort was handed to the sink, and it wrote them all.
    expect(kept).toBe(events.filter((e) => e.type === 'chunk-verified').length);
    // The sink let go of the store: it takes the resume at once.
    const resumed = await syncState({ root, peers: peers.map((p) => p.url), store: state });
    expect(resumed).toMatchObject({ version: 1, restored: kept });
  } finally {
    await state.close();
  }
});

it('a stored chunk damaged on disk is fetched again, and nobody is banned for it', async () => {
  const { tree, root } = buildTree(3000, 16);
  peers = await Promise.all([0, 1].map(() => startPeer(tree)));
  const path = newDir();
  await run(path, root, 40);
  // Flip a byte of one stored chunk record.
  const backend = await openNodeBackend({ path, tables: TABLES });
  let damaged = 0;
  for await (const [key, value] of backend.scan('chunks', { limit: 1 })) {
    const v = value.slice();
    v[v.length - 1]! ^= 0x01;
    await backend.write({ puts: [['chunks', key, v]] });
    damaged++;
  }
  await backend.close();
  expect(damaged).toBe(1);
  const state = await openState({ path });
  const stored = (await state.pendingSync())!.chunksStored;
  await state.close();

  const resumed = await run(path, root);
  expect(resumed.result).toMatchObject({ restored: stored - 1, banned: [], rejected: 0 });
  await expectHolds(path, tree);
});

it('an unfinished sync of another root is listed and discarded, never mixed in', async () => {
  const a = buildTree(3000, 16, 4);
  const b = buildTree(1000, 8, 5);
  peers = await Promise.all([startPeer(a.tree), startPeer(b.tree)]);
  const path = newDir();
  await run(path, a.root, 20);
  expect(await run(path, b.root)).toMatchObject({ error: { code: 'SYNC_PENDING' } });
  const state = await openState({ path });
  await state.discardSync();
  expect(await state.pendingSync()).toBeUndefined();
  // One sync at a time: a second one asked for while the first opens is refused.
  const first = state.syncSink(b.root);
  await expect(state.syncSink(b.root)).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  (await first).close();
  await state.close();
  // The store takes the synced tree's capacity (8), and holds b alone.
  const { result } = await run(path, b.root);
  expect(result).toMatchObject({ version: 1, restored: 0 });
  await expectHolds(path, b.tree);
  const reopened = await openState({ path });
  expect(reopened.capacity).toBe(8);
  expect((await reopened.stats()).entryCount).toBe(b.tree.len);
  await reopened.close();
});

it('a sink whose disk falls behind keeps at most 64 chunks in its first write, bounded writes after it, and its kept count grows in steps', async () => {
  const { tree, root } = buildTree(3000, 8);
  const backend = openMemoryBackend({ database: new MemoryDatabase(), tables: TABLES });
  const write = backend.write.bind(backend);
  const chunksPerWrite: number[] = [];
  backend.write = async (batch) => {
    const progress = (batch.puts ?? []).filter(([table, key]) => table === 'meta' && key.length === 12).length;
    if (progress > 0) {
      chunksPerWrite.push(progress);
      // A slow disk: every chunk below arrives during the first write.
      await new Promise((r) => setTimeout(r, 30));
    }
    return write(batch);
  };
  const state = await openState({ backend, capacity: 8 });
  const sink = await state.syncSink(root);
  const stored: number[] = [];
  sink.watch((n) => stored.push(n), () => {});
  const count = tree.chunkCount;
  expect(count).toBeGreaterThan(200);
  for (let i = 0; i < count; i++) sink.add(verifyChunk(root, i, tree.head().exportChunk(i)));
  await sink.finish();
  expect(chunksPerWrite.reduce((a, b) => a + b, 0)).toBe(count);
  // The first write keeps at most 64 chunks (the later ones take up to 32 MiB of records: all the rest here).
  expect(chunksPerWrite[0]).toBeLessThanOrEqual(64);
  expect(chunksPerWrite.length).toBeGreaterThan(1);
  expect(stored.length).toBeGreaterThan(1);
  expect(stored.at(-1)).toBe(count);
  expect(hex(state.head()!.root)).toBe(hex(root));
  await state.close();
  tree.free();
});
