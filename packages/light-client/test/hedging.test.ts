// The engine's endgame: a request is hedged on a second peer only once it
// is overdue, and a hedged copy that arrives after the chunk was accepted
// is skipped without a second verification only when it is byte for byte
// the accepted envelope; any other copy is verified, and a liar banned.
// In-memory peers (a `connect` that answers from a tree), so that timing is
// under the test's control.

import * as wasm from '@bpavl/wasm';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Connect, type PeerConnection, type SyncEvent, syncState } from '../src/sync/index.js';
import { Kind, type Response, Status } from '../src/wire/index.js';
import { buildTree } from './support/server.js';

// Counts verifyChunk calls, and traps as a panic in the module would at
// `trapAt`; everything else of @bpavl/wasm is the real thing.
const verified = vi.hoisted(() => ({ count: 0, trapAt: -1 }));
vi.mock('@bpavl/wasm', async (importOriginal) => {
  const real = await importOriginal<typeof import('@bpavl/wasm')>();
  return {
    ...real,
    verifyChunk: (root: Uint8Array, index: number, bytes: Uint8Array) => {
      verified.count++;
      if (index === verified.trapAt) throw new WebAssembly.RuntimeError('unreachable');
      return real.verifyChunk(root, index, bytes);
    },
  };
});

beforeAll(async () => {
  await wasm.init();
});
afterEach(() => {
  verified.count = 0;
  verified.trapAt = -1;
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** How an in-memory peer answers chunk `index`: after `delayMs`, with `envelope(index)`. */
interface Behaviour {
  delayMs: (index: number) => number;
  /** The connection opens after this long. */
  connectMs?: number;
  envelope?: (index: number, honest: Uint8Array) => Uint8Array;
}

/** A `Connect` whose peers answer CHUNK requests from `tree` as `behaviours[address]` says. */
function memoryPeers(tree: wasm.Tree, behaviours: Record<string, Behaviour>): Connect {
  return async (address) => {
    const b = behaviours[address]!;
    if (b.connectMs) await new Promise((r) => setTimeout(r, b.connectMs));
    let closed = false;
    let nextId = 0;
    const conn: PeerConnection = {
      address,
      get isClosed() {
        return closed;
      },
      close() {
        closed = true;
      },
      onClose() {},
      request(req) {
        if (req.kind !== Kind.Chunk) throw new Error('only CHUNK');
        const id = nextId++;
        return new Promise<Response>((resolve) => {
          const honest = tree.head().exportChunk(req.index);
          const payload = b.envelope ? b.envelope(req.index, honest) : honest;
          setTimeout(() => resolve({ id, kind: Kind.Chunk, status: Status.Ok, payload }), b.delayMs(req.index));
        });
      },
    };
    return conn;
  };
}

/** An envelope with one bit flipped: what a lying peer sends. */
function corrupt(_index: number, honest: Uint8Array): Uint8Array {
  const bad = honest.slice();
  bad[bad.length >> 1]! ^= 1;
  return bad;
}

describe('a verifier that traps', () => {
  it('fails the sync with the trap and bans nobody: the module is not used again', async () => {
    const { tree, root } = buildTree(3000, 16);
    verified.trapAt = 3;
    const events: SyncEvent[] = [];
    const peers = ['a', 'b', 'c'];
    const sync = syncState({
      root,
      peers,
      connect: memoryPeers(tree, Object.fromEntries(peers.map((p) => [p, { delayMs: () => 1 }]))),
      onEvent: (e) => events.push(e),
    });
    await expect(sync).rejects.toBeInstanceOf(WebAssembly.RuntimeError);
    expect(events.filter((e) => e.type === 'chunk-rejected' || (e.type === 'peer' && e.status === 'banned'))).toEqual([]);
  });
});

describe('endgame hedging', () => {
  it('does not hedge requests that are answered in time', async () => {
    const { tree, root } = buildTree(3000, 16);
    const peers = ['a', 'b', 'c'];
    const events: SyncEvent[] = [];
    const res = await syncState({
      root,
      peers,
      connect: memoryPeers(tree, Object.fromEntries(peers.map((p) => [p, { delayMs: () => 1 }]))),
      onEvent: (e) => events.push(e),
    });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    // (The old engine hedged every outstanding request once the queue was
    // empty: dozens here. A stalled event loop may make one or two overdue.)
    const hedges = events.filter((e) => e.type === 'request' && e.hedge && e.index !== 0);
    expect(hedges.length).toBeLessThanOrEqual(2);
    res.tree.free();
  });

  it('hedges overdue requests on another peer, long before they would time out', async () => {
    const { tree, root } = buildTree(3000, 16);
    // `slow` answers chunk 0 at once, then sits on every chunk for 2 s.
    const events: SyncEvent[] = [];
    const res = await syncState({
      root,
      peers: ['slow', 'fast'],
      connect: memoryPeers(tree, { slow: { delayMs: (i) => (i === 0 ? 0 : 2000) }, fast: { delayMs: () => 1 } }),
      onEvent: (e) => events.push(e),
    });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    const held = events.filter((e) => e.type === 'request' && e.peer === 'slow' && e.index !== 0).map((e) => (e as { index: number }).index);
    expect(held.length).toBeGreaterThan(0);
    for (const i of held) expect(events.some((e) => e.type === 'request' && e.peer === 'fast' && e.index === i && e.hedge)).toBe(true);
    expect(events.every((e) => e.type !== 'chunk-verified' || e.peer === 'fast' || e.index === 0)).toBe(true);
    expect(res.banned).toEqual([]);
    res.tree.free();
  });

  it('asks a peer whose connection opened late at once, so that a liar shows itself', async () => {
    const { tree, root } = buildTree(300, 16);
    // `early` answers chunk 0 in 100 ms, then takes every other chunk at once
    // (window 32) and answers them 150 ms later, before they are overdue
    // (2 × 100 ms). `late`, a liar, connects at 200 ms: nothing is left to
    // hand out and nothing is overdue, yet it is asked once, and banned.
    const events: SyncEvent[] = [];
    const res = await syncState({
      root,
      peers: ['early', 'late'],
      connect: memoryPeers(tree, {
        early: { delayMs: (i) => (i === 0 ? 100 : 150) },
        late: { delayMs: () => 1, connectMs: 200, envelope: corrupt },
      }),
      initialWindow: 32,
      maxWindow: 32,
      onEvent: (e) => events.push(e),
    });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    expect(tree.chunkCount).toBeLessThanOrEqual(32);
    const asked = events.filter((e) => e.type === 'request' && e.peer === 'late');
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ hedge: true });
    expect(res.banned.map((b) => b.peer)).toEqual(['late']);
    res.tree.free();
  });

  it('skips a late copy identical to the accepted chunk without verifying it again', async () => {
    const { tree, root } = buildTree(3000, 16);
    // Both peers race for chunk 0; `late` answers it after 40 ms, by which
    // time `quick`'s copy is in. Small windows keep the sync running past 40 ms.
    const res = await syncState({
      root,
      peers: ['late', 'quick'],
      connect: memoryPeers(tree, { late: { delayMs: (i) => (i === 0 ? 40 : 2) }, quick: { delayMs: () => 2 } }),
      initialWindow: 1,
      maxWindow: 1,
    });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    expect(res.seconds).toBeGreaterThan(0.06);
    expect(res.bytes).toBe(verifiedBytes(tree) + tree.head().exportChunk(0).length);
    expect(verified.count).toBe(tree.chunkCount);
    expect(res.banned).toEqual([]);
    res.tree.free();
  });

  it('verifies a late copy that differs from the accepted chunk, and bans its sender', async () => {
    const { tree, root } = buildTree(3000, 16);
    // `liar` answers everything after 40 ms, corrupted; its first answer is
    // its copy of chunk 0, which `honest` delivered long before.
    const events: SyncEvent[] = [];
    const res = await syncState({
      root,
      peers: ['liar', 'honest'],
      connect: memoryPeers(tree, { liar: { delayMs: () => 40, envelope: corrupt }, honest: { delayMs: () => 2 } }),
      initialWindow: 1,
      maxWindow: 1,
      onEvent: (e) => events.push(e),
    });
    expect(hex(res.tree.head().root)).toBe(hex(root));
    expect(res.banned.map((b) => b.peer)).toEqual(['liar']);
    const rejected = events.filter((e) => e.type === 'chunk-rejected');
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({ index: 0, peer: 'liar' });
    expect(res.banned[0]!.code).toBe((rejected[0] as { code: string }).code);
    res.tree.free();
  });
});

/** Bytes of every chunk envelope of `tree`. */
function verifiedBytes(tree: wasm.Tree): number {
  let n = 0;
  for (let i = 0; i < tree.chunkCount; i++) n += tree.head().exportChunk(i).length;
  return n;
}
