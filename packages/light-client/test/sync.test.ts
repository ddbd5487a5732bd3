import { init } from '@bpavl/wasm';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SyncError, type SyncEvent, syncState } from '../src/sync/index.js';
import { buildTree, startPeer, type TestPeer } from './support/server.js';

let peers: TestPeer[] = [];
beforeAll(async () => {
  await init();
});
afterEach(async () => {
  await Promise.all(peers.map((p) => p.close()));
  peers = [];
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('syncState over WebSocket (engine)', () => {
  it('syncs the exact tree from honest peers', async () => {
    const { tree, root } = buildTree(3000, 16);
    peers = await Promise.all([0, 1, 2].map(() => startPeer(tree)));
    const events: SyncEvent[] = [];
    const res = await syncState({ root, peers: peers.map((p) => p.url), onEvent: (e) => events.push(e) });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    expect(res.chunkCount).toBe(tree.chunkCount);
    expect(res.rejected).toBe(0);
    expect(res.banned).toEqual([]);
    expect(events.filter((e) => e.type === 'chunk-verified')).toHaveLength(tree.chunkCount);
    expect(events.at(-1)?.type).toBe('done');
    // Work was spread across the peers.
    expect(peers.filter((p) => p.requests > 0).length).toBe(3);
    for (const p of peers) await expect.poll(() => p.sockets.size).toBe(0);
  });

  it('bans liars with the right code, refetches, and bans no honest peer', async () => {
    const { tree, root } = buildTree(2000, 16);
    const honest = await Promise.all([0, 1].map(() => startPeer(tree)));
    const corrupt = await startPeer(tree, 'corrupt');
    const wrong = await startPeer(tree, 'wrong-index');
    peers = [...honest, corrupt, wrong];
    const rejected: SyncEvent[] = [];
    const res = await syncState({
      root,
      peers: peers.map((p) => p.url),
      onEvent: (e) => e.type === 'chunk-rejected' && rejected.push(e),
    });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    const bans = Object.fromEntries(res.banned.map((b) => [b.peer, b.code]));
    expect(bans).toEqual({ [corrupt.url]: 'ROOT_MISMATCH', [wrong.url]: 'CHUNK_INDEX_MISMATCH' });
    expect(rejected.length).toBeGreaterThanOrEqual(2);
    expect(res.refetches).toBeGreaterThanOrEqual(2);
  });

  it('finishes despite a staller, by timing out and hedging', async () => {
    const { tree, root } = buildTree(1500, 16);
    const staller = await startPeer(tree, 'silent');
    peers = [staller, await startPeer(tree)];
    const res = await syncState({ root, peers: peers.map((p) => p.url), requestTimeoutMs: 300 });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    expect(res.banned).toEqual([]);
  });

  it('fails with NO_HONEST_PEERS within bounded time when every peer lies', async () => {
    const { tree, root } = buildTree(500, 8);
    peers = await Promise.all([startPeer(tree, 'corrupt'), startPeer(tree, 'wrong-index')]);
    const err = await syncState({ root, peers: peers.map((p) => p.url) }).catch((e) => e);
    expect(err).toBeInstanceOf(SyncError);
    expect(err.code).toBe('NO_HONEST_PEERS');
    expect(err.banned).toHaveLength(2);
  });

  it('rejects with the abort reason and closes every socket', async () => {
    const { tree, root } = buildTree(4000, 8);
    peers = await Promise.all([startPeer(tree), startPeer(tree, 'silent')]);
    const ctl = new AbortController();
    const p = syncState({
      root,
      peers: peers.map((x) => x.url),
      signal: ctl.signal,
      onEvent: (e) => e.type === 'chunk-verified' && e.index > 5 && ctl.abort(),
    });
    const err = await p.catch((e) => e);
    expect(err).toBeInstanceOf(DOMException);
    expect((err as DOMException).name).toBe('AbortError');
    for (const x of peers) await expect.poll(() => x.sockets.size).toBe(0);
  });

  it('syncs an empty tree without asking anyone', async () => {
    const { root } = buildTree(0, 4);
    const res = await syncState({ root, peers: ['ws://127.0.0.1:9'] });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    expect(res.chunkCount).toBe(0);
  });
});
