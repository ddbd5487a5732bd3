// Catch-up of a store on the Node backend (SQLite) from real serving peers
// on 127.0.0.1 (`@bpavl/peer`, with the test network's liars): the store's
// head moves to the newer root as a new version that holds exactly the new
// state, fetching a small part of what a full sync would; every liar is
// banned at its first bad answer and the result is still exact; a peer
// that predates catch-up is skipped, not banned, and with only such peers
// every chunk is fetched whole and only the changed ones are stored. A
// catch-up that has no peer left fails, with a report per peer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { init, Tree, verifyChunk } from '@bpavl/wasm';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { catchUp, type CatchUpEvent, connectWebSocket, SyncError, syncState } from '../../light-client/src/sync/index.js';
import { CachedTree, MovingHead, type ServedTree, StaticTreeSource } from '../../peer/src/source.ts';
import type { Reply, ServerHook } from '../../peer/src/hook.ts';
import { startPeer as startHonestPeer } from '../../peer/src/peer.ts';
import { decodeRootsPayload, encodeRootsPayload, Kind, type Request, Status } from '../../light-client/src/wire/index.js';
import { withoutCatchUp } from '../../peer/test/support.ts';
import { Byzantine, type ByzantineMode } from '../../testnet/src/byzantine.ts';
import { type RunningPeer, startPeer } from '../../testnet/src/peer.ts';
import { storedVersion } from '../../peer/src/db-commands.ts';
import { openNodeBackend } from '../../storage/src/node/index.ts';
import { versionKey } from '../src/records.ts';
import { openState, TABLES } from '../src/index.ts';
import { expectHolds, expectRetained } from './support/holds.ts';

const dirs: string[] = [];
let peers: RunningPeer[] = [];
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
const enc = (s: string) => new TextEncoder().encode(s);

function newDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'store-catchup-'));
  dirs.push(d);
  return d;
}

/**
 * One chain: `n` writes, then (`next`) `changes` more of them: inserts,
 * updates and deletes. The same calls build the same tree, so `base` and
 * `next` are two versions of one state.
 */
function chain(n: number, capacity: number, changes: number): { base: Tree; next: Tree } {
  const write = (tree: Tree, i: number, seed: number) => {
    const k = enc(`key-${String((i * 7919) % (2 * n)).padStart(8, '0')}`);
    if (i % 7 === 3 && seed > 0) tree.remove(k);
    else tree.insert(k, new Uint8Array(40 + (i % 50)).fill((i + seed) & 0xff));
  };
  const build = (more: number) => {
    const tree = new Tree(capacity);
    for (let i = 0; i < n; i++) write(tree, i, 0);
    tree.commit();
    for (let j = 0; j < more; j++) write(tree, (j * 104729) % (2 * n), 1 + j);
    tree.commit();
    return tree;
  };
  return { base: build(0), next: build(changes) };
}

/** Each chunk of `tree`'s head, by index, as its entries (a chunk's hash is its entries'). */
function chunksOf(tree: Tree): string[] {
  const head = tree.head();
  return Array.from({ length: tree.chunkCount }, (_, i) => {
    const chunk = verifyChunk(head.root, i, head.exportChunk(i));
    try {
      return chunk.entries.map(([k, v]) => `${hex(k)}=${hex(v)}`).join(',');
    } finally {
      chunk.free();
    }
  });
}

/**
 * The model of a catch-up's `changedIndices` from `base` to `next`: the
 * indices of `next`'s chunks that are no chunk of `base`; and how many of
 * the others (shared) are at another index in `next` than in `base`.
 */
function changedModel(base: Tree, next: Tree): { changed: number[]; shifted: number } {
  const old = new Map(chunksOf(base).map((c, i) => [c, i] as const));
  const changed: number[] = [];
  let shifted = 0;
  for (const [i, c] of chunksOf(next).entries()) {
    const j = old.get(c);
    if (j === undefined) changed.push(i);
    else if (j !== i) shifted++;
  }
  return { changed, shifted };
}

/** `result.changedIndices` is the model's (sorted, one per changed chunk); returns the model. */
function expectChanged(result: { changedIndices: Uint32Array; changedChunks: number }, base: Tree, next: Tree) {
  const model = changedModel(base, next);
  expect(result.changedIndices).toBeInstanceOf(Uint32Array);
  expect([...result.changedIndices]).toEqual(model.changed);
  expect(result.changedIndices.length).toBe(result.changedChunks);
  return model;
}

async function serve(tree: Tree, opts: { byzantine?: ByzantineMode; other?: Tree; old?: boolean } = {}): Promise<RunningPeer> {
  const served: ServedTree = opts.old ? withoutCatchUp(tree.head()) : new CachedTree(tree.head());
  const byzantine = opts.byzantine && new Byzantine({ mode: opts.byzantine, rate: 1, seed: 7n, ...(opts.other && { otherTree: opts.other.head() }) });
  const peer = await startPeer(new StaticTreeSource([served]), { libp2pPort: null, ...(byzantine && { byzantine }) });
  peers.push(peer);
  return peer;
}

/** A store at `path` holding `tree` (synced from a peer), as version 1. */
async function storeOf(tree: Tree): Promise<string> {
  const path = newDir();
  const peer = await serve(tree);
  const state = await openState({ path });
  try {
    await syncState({ root: tree.head().root, peers: [peer.wsUrl!], store: state });
  } finally {
    await state.close();
  }
  return path;
}

async function run(path: string, tree: Tree, urls: string[], onEvent?: (e: CatchUpEvent) => void) {
  const state = await openState({ path });
  try {
    return await catchUp({ store: state, root: tree.head().root, peers: urls, requestTimeoutMs: 2000, ...(onEvent && { onEvent }) });
  } finally {
    await state.close();
  }
}

it('a catch-up commits the newer root as the next version, fetching a small part of the state', async () => {
  const { base, next } = chain(6000, 16, 30);
  const path = await storeOf(base);
  const honest = await Promise.all([0, 1, 2].map(() => serve(next)));
  const events: CatchUpEvent[] = [];
  const result = await run(path, next, honest.map((p) => p.wsUrl!), (e) => events.push(e));
  expect(result).toMatchObject({ fromVersion: 1, version: 2, banned: [] });
  // Many chunks' leaves a request (MULTILEAVES).
  const leavesRequests = events.filter((e) => e.type === 'request' && e.kind === 'leaves').length;
  expect(leavesRequests).toBeGreaterThan(0);
  expect(leavesRequests).toBeLessThan(result.changedChunks / 2);
  await expectHolds(path, next);
  // A full sync would fetch every chunk envelope.
  let full = 0;
  for (let i = 0; i < next.chunkCount; i++) full += next.head().exportChunk(i).length;
  expect(result.bytes).toBeGreaterThan(0);
  expect(result.bytes).toBeLessThan(full / 5);
  expect(result.changedChunks).toBeGreaterThan(0);
  expect(result.changedChunks).toBeLessThan(next.chunkCount / 3);
  // Which chunks changed, by index in the new version.
  expectChanged(result, base, next);

  // The old version is still there, whole; caught up again, nothing is fetched.
  const state = await openState({ path, readOnly: true });
  expect(hex((await state.get(enc('key-00000000'), { version: 1 }))!)).toBe(hex(base.get(enc('key-00000000'))!));
  await state.close();
  const again = await run(path, next, honest.map((p) => p.wsUrl!));
  expect(again).toMatchObject({ version: 2, bytes: 0, requests: 0, changedChunks: 0 });
  expect(again.changedIndices).toEqual(new Uint32Array(0));
});

it('a finished catch-up reports nothing of the requests its own end fails: a staller\'s requests still out are not rejected CONNECTION_CLOSED', { timeout: 30_000 }, async () => {
  const { base, next } = chain(3000, 16, 30);
  const path = await storeOf(base);
  // Never answers the first request, the top's NODES (asked of it: it is listed first), and answers the rest: the
  // honest peer's hedge of the top, 2 s later, starts the walk, and the top's request is still out when it ends.
  const hook: ServerHook = {
    reply: (req) => {
      const r = req.request;
      return r?.kind === Kind.Nodes && r.path.length === 1 && r.path[0] === 0 ? { kind: 'drop' } : undefined;
    },
  };
  const staller = await startHonestPeer(new StaticTreeSource([new CachedTree(next.head())]), { libp2pPort: null, hook });
  peers.push(staller);
  const honest = await serve(next);
  const events: CatchUpEvent[] = [];
  const state = await openState({ path });
  let result;
  try {
    // A timeout longer than the catch-up: the staller's requests are out when it finishes (its hedges answered by the honest peer).
    result = await catchUp({ store: state, root: next.head().root, peers: [staller.wsUrl!, honest.wsUrl!], requestTimeoutMs: 30_000, onEvent: (e) => events.push(e) });
  } finally {
    await state.close();
  }
  expect(result.banned).toEqual([]);
  expect(events[0]).toMatchObject({ type: 'request', kind: 'nodes', peer: staller.wsUrl! });
  expect(events.some((e) => e.type === 'request' && e.hedge && e.peer === honest.wsUrl)).toBe(true);
  // They used to come as a burst of CONNECTION_CLOSED after the last progress, failed by the catch-up's own pool.close().
  expect(events.filter((e) => e.type === 'rejected')).toEqual([]);
  expect(events.at(-1)?.type).toBe('progress');
  await expectHolds(path, next);
});

it('every liar is banned at its first bad answer, with its code, and the state is still exact', { timeout: 30_000 }, async () => {
  const { base, next } = chain(4000, 8, 60);
  const other = chain(4000, 8, 61).next;
  // The lies that apply to catch-up answers, and the codes they earn.
  const lies: [ByzantineMode, RegExp][] = [
    ['corrupt-value', /^(NODE_MISMATCH|LEAVES_MISMATCH|ENTRY_MISMATCH)$/],
    ['corrupt-key', /^(NODE_MISMATCH|LEAVES_MISMATCH|ENTRY_MISMATCH)$/],
    ['wrong-root', /^(NODE_MISMATCH|LEAVES_MISMATCH|ENTRY_MISMATCH)$/],
    ['wrong-index', /^(NODE_MISMATCH|LEAVES_MISMATCH|ENTRY_MISMATCH)$/],
    ['corrupt-proof', /^(KEY_COPY_MISMATCH|LEAVES_MISMATCH|ENTRY_MISMATCH|TRUNCATED|VALUE_TOO_LONG)$/],
    ['random-bytes', /^[A-Z_]+$/],
    ['swap-kinds', /^(KINDS_MISMATCH|TRUNCATED)$/],
  ];
  for (const [mode, codes] of lies) {
    const path = await storeOf(base);
    const honest = await serve(next);
    const liar = await serve(next, { byzantine: mode, other });
    const result = await run(path, next, [liar.wsUrl!, honest.wsUrl!]);
    await expectHolds(path, next);
    expect(result.banned.map((b) => b.peer), mode).toEqual([liar.wsUrl]);
    expect(result.banned[0]!.code, mode).toMatch(codes);
  }
});

it('the changed chunks are named by their index in the new version, where inserts and deletes moved the kept ones; by the walk and by its fallback', async () => {
  const { base } = chain(3000, 16, 0);
  const next = chain(3000, 16, 0).base;
  // Keys before every other: the kept chunks after them move to higher indices; deletes further on move some back.
  for (let i = 0; i < 40; i++) next.insert(enc(`a-${String(i).padStart(3, '0')}`), enc('in front'));
  for (let i = 0; i < 3000; i += 97) next.remove(enc(`key-${String((i * 7919) % 6000).padStart(8, '0')}`));
  next.commit();
  const model = changedModel(base, next);
  expect(model.changed.length).toBeGreaterThan(2);
  expect(model.shifted).toBeGreaterThan(next.chunkCount / 2);
  const walked = await run(await storeOf(base), next, [(await serve(next)).wsUrl!]);
  expect(walked.wholeChunks).toBe(false);
  expectChanged(walked, base, next);
  const whole = await run(await storeOf(base), next, [(await serve(next, { old: true })).wsUrl!]);
  expect(whole.wholeChunks).toBe(true);
  expectChanged(whole, base, next);
});

it('a peer that predates catch-up is skipped, not banned', async () => {
  const { base, next } = chain(3000, 16, 20);
  const path = await storeOf(base);
  const old = await serve(next, { old: true });
  const honest = await serve(next);
  const events: CatchUpEvent[] = [];
  const result = await run(path, next, [old.wsUrl!, honest.wsUrl!], (e) => events.push(e));
  expect(result.banned).toEqual([]);
  expect(events.some((e) => e.type === 'rejected' && e.code === 'BAD_REQUEST' && e.peer === old.wsUrl)).toBe(true);
  expectChanged(result, base, next);
  await expectHolds(path, next);
});

/** Record keys of `table` born at `version` or later, and all of them. */
async function recordCount(path: string, table: string, from = 0, which: (record: Uint8Array) => boolean = () => true): Promise<number> {
  const backend = await openNodeBackend({ path, tables: TABLES, readOnly: true });
  let n = 0;
  for await (const [, record] of backend.scan(table, { start: versionKey(from) })) if (which(record)) n++;
  await backend.close();
  return n;
}

it('with only peers that predate catch-up, every chunk is fetched whole and only the changed ones are stored', async () => {
  const { base, next } = chain(3000, 16, 20);
  const path = await storeOf(base);
  const olds = await Promise.all([0, 1].map(() => serve(next, { old: true })));
  const events: CatchUpEvent[] = [];
  const result = await run(path, next, olds.map((p) => p.wsUrl!), (e) => events.push(e));
  expect(result).toMatchObject({ fromVersion: 1, version: 2, wholeChunks: true, banned: [], restoredChunks: 0, fetchedChunks: next.chunkCount });
  expect(events.filter((e) => e.type === 'whole-chunks')).toEqual([{ type: 'whole-chunks', resumed: false }]);
  expect(events.some((e) => e.type === 'banned')).toBe(false);
  await expectHolds(path, next, 2);
  await expectRetained(path, base, 1);
  // Only the chunks the head lacked were stored, and of their entries only those the head lacked (20 writes).
  expect(result.changedChunks).toBeGreaterThan(0);
  expect(result.changedChunks).toBeLessThan(next.chunkCount / 2);
  expect(await recordCount(path, 'chunks', 2)).toBe(result.changedChunks);
  // The fallback says which, by index in the new version, as the walk does.
  expectChanged(result, base, next);
  expect(await recordCount(path, 'entries', 2)).toBeGreaterThan(0);
  expect(await recordCount(path, 'entries', 2)).toBeLessThanOrEqual(20);
  // A chunk with a few changed entries is a delta (format byte 0x0A) of the head chunk whose first key it holds.
  expect(await recordCount(path, 'chunks', 2, (r) => r[0] === 0x0a)).toBeGreaterThan(result.changedChunks / 2);
  // Pruning version 1 leaves what version 2 uses: the entry records it wrote (version 1, a sync, held
  // its values in its chunk records), and the whole state.
  const state = await openState({ path });
  await state.prune({ keepLast: 1 });
  await state.close();
  expect(await recordCount(path, 'entries')).toBe(await recordCount(path, 'entries', 2));
  expect(await recordCount(path, 'nodes')).toBe(next.chunkCount - 1);
  await expectHolds(path, next, 2);
});

it('a catch-up that fetches every chunk whole bans a liar, resumes after a stop, and refuses another capacity', { timeout: 30_000 }, async () => {
  const { base, next } = chain(6000, 16, 300);
  const path = await storeOf(base);
  const old = await serve(next, { old: true });
  const liar = await serve(next, { old: true, byzantine: 'corrupt-value' });
  // Stopped once 40 chunks are verified: they are not fetched again.
  const abort = new AbortController();
  let verified = 0;
  const state = await openState({ path });
  await expect(
    catchUp({ store: state, root: next.head().root, peers: [old.wsUrl!, liar.wsUrl!], signal: abort.signal, requestTimeoutMs: 2000, onEvent: (e) => e.type === 'progress' && e.bytes > 0 && ++verified === 40 && abort.abort(new Error('stopped')) }),
  ).rejects.toMatchObject({ message: 'stopped' });
  await state.close();
  const held = await openState({ path });
  const pending = await held.pendingSync();
  expect(hex(pending!.root)).toBe(hex(next.head().root));
  expect(pending!.chunksStored).toBeGreaterThan(0);
  await expect(held.put(enc('x'), enc('y'))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  await held.close();
  // Some stored chunks are deltas (format byte 0x0A): the resume takes them back with their bases.
  expect(await recordCount(path, 'chunks', 2, (r) => r[0] === 0x0a)).toBeGreaterThan(0);
  const events: CatchUpEvent[] = [];
  const resumed = await run(path, next, [old.wsUrl!, liar.wsUrl!], (e) => events.push(e));
  expect(events.filter((e) => e.type === 'whole-chunks')).toEqual([{ type: 'whole-chunks', resumed: true }]);
  expect(resumed).toMatchObject({ fromVersion: 1, version: 2, wholeChunks: true, restoredChunks: pending!.chunksStored });
  expect(resumed.restoredChunks + resumed.fetchedChunks).toBe(next.chunkCount);
  // The changed chunks the stopped run stored are among them.
  expect(expectChanged(resumed, base, next).shifted).toBeGreaterThan(0);
  expect(resumed.banned.map((b) => [b.peer, b.code])).toEqual([[liar.wsUrl, expect.stringMatching(/^[A-Z_]+$/)]]);
  await expectHolds(path, next, 2);
  await expectRetained(path, base, 1);

  // A root whose tree has another capacity can never be this store's next version: refused, and forgotten.
  const other = chain(2000, 8, 0).base;
  const oldOther = await serve(other, { old: true });
  await expect(run(path, other, [oldOther.wsUrl!])).rejects.toMatchObject({ code: 'CAPACITY_MISMATCH' });
  const after = await openState({ path });
  expect(await after.pendingSync()).toBeUndefined();
  expect(after.head()).toMatchObject({ version: 2 });
  await after.close();
  await expectHolds(path, next, 2);
});

it('a peer that predates MULTILEAVES and MULTIENTRIES is asked one chunk a request, and not banned', async () => {
  const { base, next } = chain(4000, 16, 40);
  const path = await storeOf(base);
  // It answers the two kinds BAD_REQUEST, as a peer of the release before them, and serves the rest.
  const single = new Set<number>([Kind.MultiLeaves, Kind.MultiEntries]);
  const asked: number[] = [];
  const hook: ServerHook = {
    reply: (req) => {
      if (req.request !== undefined) asked.push(req.request.kind);
      return req.request !== undefined && single.has(req.request.kind) ? { kind: 'answer', status: Status.BadRequest } : undefined;
    },
  };
  const older = await startHonestPeer(new StaticTreeSource([new CachedTree(next.head())]), { libp2pPort: null, hook });
  peers.push(older);
  const events: CatchUpEvent[] = [];
  const result = await run(path, next, [older.wsUrl!], (e) => events.push(e));
  expect(result).toMatchObject({ version: 2, banned: [] });
  expect(result.fetchedChunks).toBe(result.changedChunks);
  expectChanged(result, base, next);
  await expectHolds(path, next, 2);
  // Refused once, then asked LEAVES and ENTRIES only.
  expect(asked.filter((k) => single.has(k)).length).toBe(1);
  expect(asked.filter((k) => k === Kind.Leaves).length).toBe(result.changedChunks);
  expect(events.some((e) => e.type === 'rejected' && e.code === 'BAD_REQUEST')).toBe(true);
});

it('a changed chunk no peer serves leaves or entries of comes whole (CHUNK), its unchanged entries still taken from the store', async () => {
  const { base, next } = chain(4000, 16, 30);
  const path = await storeOf(base);
  // One peer serves the tree's nodes only; the other predates catch-up: no peer serves LEAVES or ENTRIES.
  const s = next.head();
  const nodesOnly: ServedTree = { ...withoutCatchUp(next.head()), exportSubtree: (p, l, m) => s.exportSubtree(p, l, m) };
  const partial = await startPeer(new StaticTreeSource([nodesOnly]), { libp2pPort: null });
  peers.push(partial);
  const old = await serve(next, { old: true });
  const events: CatchUpEvent[] = [];
  const result = await run(path, next, [partial.wsUrl!, old.wsUrl!], (e) => events.push(e));
  expect(result).toMatchObject({ version: 2, banned: [] });
  expect(result.fetchedChunks).toBe(result.changedChunks);
  expect(events.filter((e) => e.type === 'verified' && e.kind === 'chunk').length).toBe(result.changedChunks);
  expectChanged(result, base, next);
  await expectHolds(path, next, 2);
  // Entries the store held were not written again: version 2's entry records are only the changed ones.
  const backend = await openNodeBackend({ path, tables: TABLES, readOnly: true });
  let written = 0;
  for await (const _ of backend.scan('entries', { start: versionKey(2) })) written++;
  await backend.close();
  expect(written).toBeLessThanOrEqual(30);
});

it('peers that serve a stored state (bpavl serve --db) serve the catch-up too, at any retained version', async () => {
  const { base, next } = chain(5000, 16, 40);
  // A store that holds both versions, caught up from peers in memory, then served from storage.
  const served = await storeOf(base);
  await run(served, next, [(await serve(next)).wsUrl!]);
  const shared = await openState({ path: served, readOnly: true, cacheBytes: 1 << 16 });
  try {
    const fromDb = await Promise.all([0, 1].map(() => startPeer(new StaticTreeSource(shared.versions().map((v) => storedVersion(shared, v))), { libp2pPort: null })));
    peers.push(...fromDb);
    const path = await storeOf(base);
    const result = await run(path, next, fromDb.map((p) => p.wsUrl!));
    expect(result).toMatchObject({ version: 2, banned: [] });
    await expectHolds(path, next);
  } finally {
    await shared.close();
  }
});

it('a stopped catch-up is resumed: nothing it stored is fetched again, a damaged chunk is, and writes wait for it', async () => {
  const { base, next } = chain(8000, 16, 400);
  const path = await storeOf(base);
  const urls = [(await serve(next)).wsUrl!, (await serve(next)).wsUrl!];
  // Stop the first run once enough changed chunks are in (one chunk a request, so that each answer is one).
  const abort = new AbortController();
  let answers = 0;
  const state = await openState({ path });
  await expect(
    catchUp({ store: state, root: next.head().root, peers: urls, signal: abort.signal, chunksPerRequest: 1, onEvent: (e) => e.type === 'verified' && e.kind === 'entries' && ++answers === 60 && abort.abort(new Error('stopped')) }),
  ).rejects.toMatchObject({ message: 'stopped' });
  await state.close();
  // Damage one chunk record it stored: that chunk is fetched again, and nobody is banned for it.
  const backend = await openNodeBackend({ path, tables: TABLES });
  let stored = 0;
  let damaged: Uint8Array | undefined;
  for await (const [key, value] of backend.scan('chunks', { start: versionKey(2) })) {
    stored++;
    if (damaged === undefined) {
      damaged = key;
      const v = value.slice();
      v[v.length - 1]! ^= 0x01;
      await backend.write({ puts: [['chunks', key, v]] });
    }
  }
  await backend.close();
  expect(stored).toBeGreaterThan(1);
  const held = await openState({ path });
  await expect(held.put(enc('x'), enc('y'))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  await expect(held.catchUpSession(chain(8000, 16, 401).next.head().root)).rejects.toMatchObject({ code: 'SYNC_PENDING' });
  await held.close();
  const resumed = await run(path, next, urls);
  expect(resumed).toMatchObject({ version: 2, banned: [], restoredChunks: stored - 1 });
  expect(resumed.restoredChunks + resumed.fetchedChunks).toBe(resumed.changedChunks);
  // Those taken back are among the changed chunks it names.
  expect(expectChanged(resumed, base, next).shifted).toBeGreaterThan(0);
  await expectHolds(path, next, 2);

  // A catch-up stopped and then discarded leaves the store as it was, and writable.
  const further = chain(8000, 16, 800).next;
  const url3 = (await serve(further)).wsUrl!;
  const again = await openState({ path });
  const stop = new AbortController();
  let n = 0;
  await expect(
    catchUp({ store: again, root: further.head().root, peers: [url3], signal: stop.signal, chunksPerRequest: 1, onEvent: (e) => e.type === 'verified' && e.kind === 'entries' && ++n === 30 && stop.abort(new Error('stopped')) }),
  ).rejects.toMatchObject({ message: 'stopped' });
  await again.discardSync();
  await again.put(enc('x'), enc('y'));
  await again.close();
  const after = await openState({ path, readOnly: true });
  expect(after.head()).toMatchObject({ version: 2 });
  await after.close();
});

it('a listener that throws cannot break a catch-up, as it cannot break a sync: the walk and the whole-chunk fallback complete, and the store is writable after', async () => {
  const { base, next } = chain(3000, 16, 40);
  let calls = 0;
  const throwing = () => {
    calls++;
    throw new Error('listener');
  };
  for (const old of [false, true]) {
    const path = await storeOf(base);
    const url = (await serve(next, { old })).wsUrl!;
    calls = 0;
    const result = await run(path, next, [url], throwing);
    expect(result, `old: ${old}`).toMatchObject({ fromVersion: 1, version: 2, banned: [], wholeChunks: old });
    expect(calls).toBeGreaterThan(1); // told of every event still, its errors ignored
    await expectHolds(path, next, 2);
    const state = await openState({ path });
    expect(state.pendingCatchUp()).toBeUndefined();
    await state.put(enc('x'), enc('y'));
    await state.close();
  }
});

it('an aborted signal rejects with its reason before the store is touched, as syncState does: nothing is left pending, also for the head\'s own root', async () => {
  const { base, next } = chain(3000, 16, 40);
  const path = await storeOf(base);
  const url = (await serve(next)).wsUrl!;
  const state = await openState({ path });
  try {
    await expect(catchUp({ store: state, root: next.head().root, peers: [url], signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    expect(state.pendingCatchUp()).toBeUndefined();
    expect(await state.pendingSync()).toBeUndefined();
    // The head's own root (nothing to fetch) is rejected too, with the signal's reason.
    const reason = new Error('stopped');
    await expect(catchUp({ store: state, root: base.head().root, peers: [url], signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await state.put(enc('x'), enc('y')); // no catch-up pending: not SYNC_PENDING
  } finally {
    await state.close();
  }
  const reopened = await openState({ path, readOnly: true });
  expect(reopened.pendingCatchUp()).toBeUndefined();
  expect(reopened.head()).toMatchObject({ version: 1 });
  await reopened.close();
});

/** Versions 1 (`base`) and 2 (`next`) in a directory, served from storage by a peer over one read-only state, and a connection to it. */
async function servedFromStorage() {
  const { base, next } = chain(3000, 16, 40);
  const path = await storeOf(base);
  await run(path, next, [(await serve(next)).wsUrl!]);
  const shared = await openState({ path, readOnly: true, cacheBytes: 1 << 16 });
  const peer = await startPeer(new MovingHead(shared.versions().map((v) => storedVersion(shared, v))), { libp2pPort: null });
  peers.push(peer);
  const conn = await connectWebSocket(peer.wsUrl!);
  const chunk = (root: Uint8Array) => conn.request({ kind: Kind.Chunk, root, index: 3 }, { timeoutMs: 5000 });
  const listed = async () => decodeRootsPayload((await conn.request({ kind: Kind.Roots }, { timeoutMs: 5000 })).payload).map((r) => hex(r.root));
  const close = async () => {
    conn.close();
    await shared.close();
  };
  return { base, next, path, chunk, listed, close };
}

it('a version the writer prunes while a peer serves it from storage is no longer served: UNKNOWN_ROOT, and gone from ROOTS; a reader says VERSION_UNKNOWN', async () => {
  const { base, next, path, chunk, listed, close } = await servedFromStorage();
  const reader = await openState({ path, readOnly: true, cacheBytes: 1 << 16 });
  try {
    const writer = await openState({ path });
    await writer.prune({ keepLast: 1 });
    await writer.close();
    expect((await chunk(base.head().root)).status).toBe(Status.UnknownRoot);
    expect(await listed()).toEqual([hex(next.head().root)]);
    expect((await chunk(next.head().root)).status).toBe(Status.Ok);
    await expect(reader.exportChunk(3, { version: 1 })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
    expect(reader.versions().map((v) => v.version)).toEqual([2]);
  } finally {
    await reader.close();
    await close();
  }
});

it('a version the writer rolls back and commits again under its number, with another root, is no longer served, and a reader says VERSION_UNKNOWN, never STORE_CORRUPT', async () => {
  const { base, next, path, chunk, listed, close } = await servedFromStorage();
  const reader = await openState({ path, readOnly: true, cacheBytes: 1 << 16 });
  try {
    const writer = await openState({ path });
    await writer.rollback(1);
    await writer.put(enc('another'), enc('version 2'));
    expect((await writer.commit()).version).toBe(2);
    await writer.close();
    expect((await chunk(next.head().root)).status).toBe(Status.UnknownRoot);
    expect(await listed()).toEqual([hex(base.head().root)]);
    await expect(reader.get(enc('key-00001919'), { version: 2 })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
    expect(reader.versions().map((v) => v.version)).toEqual([1]);
  } finally {
    await reader.close();
    await close();
  }
});

it('a tree of one chunk, and the empty tree, are caught up to as well', async () => {
  const { base } = chain(3000, 16, 0);
  const small = new Tree(16);
  small.insert(enc('only'), enc('one'));
  small.commit();
  const path = await storeOf(base);
  const p = await serve(small);
  const one = await run(path, small, [p.wsUrl!]);
  expect(one).toMatchObject({ version: 2, banned: [] });
  expect(one.changedIndices).toEqual(Uint32Array.of(0));
  await expectHolds(path, small);
  const empty = new Tree(16);
  empty.commit();
  const q = await serve(empty);
  const none = await run(path, empty, [q.wsUrl!]);
  expect(none).toMatchObject({ version: 3, requests: 0, changedChunks: 0 });
  expect(none.changedIndices).toEqual(new Uint32Array(0));
  await expectHolds(path, empty);
});

it('a store with no version, or a root of another capacity, is refused with its code', async () => {
  const path = newDir();
  const { next } = chain(500, 16, 5);
  const p = await serve(next);
  await expect(run(path, next, [p.wsUrl!])).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
  const stored = await storeOf(chain(500, 8, 0).base);
  await expect(run(stored, next, [p.wsUrl!])).rejects.toMatchObject({ code: 'CAPACITY_MISMATCH' });
  // Nothing is left pending: the store takes writes.
  const after = await openState({ path: stored });
  await after.put(enc('x'), enc('y'));
  await after.close();
  await expectHolds(stored, chain(500, 8, 0).base);
});

it('a catch-up with no peer left fails with NO_HONEST_PEERS and a report per peer, at the stall deadline at the latest', { timeout: 30_000 }, async () => {
  const { base, next } = chain(3000, 16, 30);
  const path = await storeOf(base);
  const answer = (status: Status): Reply => ({ kind: 'answer', status });
  const hooked = async (reply: (kind: number, request: Request) => Reply | undefined) => {
    const hook: ServerHook = { reply: (req) => (req.request === undefined ? undefined : reply(req.kind, req.request)) };
    const peer = await startHonestPeer(new StaticTreeSource([new CachedTree(next.head())]), { libp2pPort: null, hook });
    peers.push(peer);
    return peer.wsUrl!;
  };
  const isTop = (r: Request) => r.kind === Kind.Nodes && r.path.length === 1 && r.path[0] === 0;
  // Says the top is no inner node (a one-chunk tree), which its own CHUNK 0 shows false.
  const outOfRange = await hooked((_, r) => (isTop(r) ? answer(Status.OutOfRange) : undefined));
  const busy = await hooked(() => answer(Status.Busy));
  const busyEntries = await hooked((kind) => (kind === Kind.Entries || kind === Kind.MultiEntries ? answer(Status.Busy) : undefined));
  const silent = await hooked(() => ({ kind: 'drop' }));
  // Denies the root: while its ROOTS lists it (a lie), and while its ROOTS lists nothing.
  const denies = await hooked((kind) => (kind === Kind.Roots ? undefined : answer(Status.UnknownRoot)));
  const lacks = await hooked((kind) => (kind === Kind.Roots ? { kind: 'answer', status: Status.Ok, payload: encodeRootsPayload([]) } : answer(Status.UnknownRoot)));
  const failure = async (urls: string[], at = path) => {
    const state = await openState({ path: at });
    try {
      await catchUp({ store: state, root: next.head().root, peers: urls, requestTimeoutMs: 300, stallTimeoutMs: 1_500 });
    } catch (e) {
      return e as SyncError;
    } finally {
      await state.close();
    }
    throw new Error('the catch-up did not fail');
  };
  // Its only peer banned, the walk has pieces left and nobody to ask: it fails at once (it used to spin).
  expect(await failure([outOfRange])).toMatchObject({ code: 'NO_HONEST_PEERS', peers: [{ peer: outOfRange, outcome: 'banned', code: 'OUT_OF_RANGE' }] });
  expect(await failure([busy])).toMatchObject({ code: 'NO_HONEST_PEERS', peers: [{ peer: busy, outcome: 'busy', code: 'BUSY' }] });
  // Valid nodes and leaves, then BUSY for the entries: given up the stall deadline after its last valid answer.
  expect(await failure([busyEntries])).toMatchObject({ code: 'NO_HONEST_PEERS', peers: [{ peer: busyEntries, outcome: 'busy', code: 'BUSY' }] });
  expect(await failure([silent])).toMatchObject({ code: 'NO_HONEST_PEERS', peers: [{ peer: silent, outcome: 'unresponsive', code: 'TIMEOUT' }] });
  expect(await failure([denies])).toMatchObject({ code: 'NO_HONEST_PEERS', peers: [{ peer: denies, outcome: 'banned', code: 'UNKNOWN_ROOT' }] });
  expect(await failure([lacks])).toMatchObject({ code: 'NO_HONEST_PEERS', peers: [{ peer: lacks, outcome: 'refused', code: 'UNKNOWN_ROOT' }] });
  // On a store that has not verified the top yet (the runs above kept what they verified): the first peer is asked it.
  const all = await failure([outOfRange, busy, silent], await storeOf(base));
  expect(all.peers.map((p) => [p.peer, p.outcome])).toEqual([
    [outOfRange, 'banned'],
    [busy, 'busy'],
    [silent, 'unresponsive'],
  ]);
  expect(all.banned.map((b) => b.peer)).toEqual([outOfRange]);
  // Nothing was committed: the store is still at its first version, and takes the catch-up from an honest peer.
  const honest = await serve(next);
  expect(await run(path, next, [honest.wsUrl!])).toMatchObject({ fromVersion: 1, version: 2, banned: [] });
  await expectHolds(path, next);
});
