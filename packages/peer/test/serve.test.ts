// Serving a small tree over both transports at once: a raw `ws` client and a
// raw libp2p client (a second node dialling the multiaddr) fetch chunks,
// proofs, ranges and roots, and everything verifies against the root alone.

import { createHash } from 'node:crypto';
import { decodeProofPayload, decodeRootsPayload, encodeFrame, Kind, Status } from '@bpavl/light-client/wire';
import { ProofError, verifyAbsence, verifyChunk, verifyExistence, verifyRange } from '@bpavl/light-client/verify';
import { Rebuilder, type Snapshot, type Tree } from '@bpavl/wasm';
import type { Libp2p } from 'libp2p';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPeer, type RunningPeer } from '../src/peer.ts';
import { StaticTreeSource, toHex } from '../src/source.ts';
import { compareBytes, libp2pClient, libp2pDialer, smallTree, wasmReady, type WireClient, wsClient } from './support.ts';

let tree: Tree;
let v1: Snapshot;
let v2: Snapshot;
let keys: Uint8Array[];
let values: Uint8Array[];
let peer: RunningPeer;
let dialer: Libp2p;

beforeAll(async () => {
  await wasmReady();
  ({ tree, keys, values } = smallTree(600, 16));
  v1 = tree.head();
  // A second version, so ROOTS lists two roots and both are served.
  tree.insert(new TextEncoder().encode('extra key'), new TextEncoder().encode('extra value'));
  tree.commit();
  v2 = tree.head();
  peer = await startPeer(new StaticTreeSource([v1, v2]));
  dialer = await libp2pDialer();
});

afterAll(async () => {
  await dialer?.stop();
  await peer?.close();
});

const transports: [string, () => Promise<WireClient>][] = [
  ['ws', () => wsClient(peer.wsUrl!)],
  ['libp2p', () => libp2pClient(dialer, peer.libp2pAddrs[0]!)],
];

describe('listeners', () => {
  it('listen on 127.0.0.1 with a /p2p/ multiaddr', () => {
    expect(peer.wsUrl).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(peer.libp2pAddrs[0]).toMatch(/^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/ws\/p2p\/\w+$/);
    expect(peer.libp2pAddrs[0]!.endsWith(`/p2p/${peer.peerId}`)).toBe(true);
  });
});

describe.each(transports)('over %s', (_name, connect) => {
  let c: WireClient;
  beforeAll(async () => {
    c = await connect();
  });
  afterAll(() => c?.close());

  it('ROOTS lists every served root', async () => {
    const r = await c.request({ kind: Kind.Roots });
    expect(r.status).toBe(Status.Ok);
    const roots = decodeRootsPayload(r.payload);
    expect(roots.map((x) => toHex(x.root))).toEqual([toHex(v1.root), toHex(v2.root)]);
    expect(roots.map((x) => x.version)).toEqual([1, 2]);
    expect(roots.map((x) => x.chunkCount)).toEqual([v1.chunkCount, v2.chunkCount]);
  });

  it('every CHUNK verifies, and the chunks rebuild the tree', async () => {
    const root = v1.root;
    const n = v1.chunkCount;
    expect(n).toBeGreaterThan(30);
    // Pipelined: all requests at once, answers in any order.
    const ids = Array.from({ length: n }, (_, index) => c.send({ kind: Kind.Chunk, root, index }));
    const responses = await Promise.all(ids.map((id) => c.response(id)));
    const rebuilder = new Rebuilder(root);
    responses.forEach((r, index) => {
      expect(r.status).toBe(Status.Ok);
      expect(r.kind).toBe(Kind.Chunk);
      const chunk = verifyChunk(root, index, r.payload);
      expect(chunk.index).toBe(index);
      expect(chunk.chunkCount).toBe(n);
      rebuilder.add(index, r.payload);
    });
    const copy = rebuilder.finish(1);
    expect(toHex(copy.head().root)).toBe(toHex(root));
    copy.free();
  });

  it('PROOF of a present key carries the value and an existence proof', async () => {
    const root = v2.root;
    for (const i of [0, 17, 599]) {
      const r = await c.request({ kind: Kind.Proof, root, key: keys[i]! });
      expect(r.status).toBe(Status.Ok);
      const p = decodeProofPayload(r.payload);
      expect(p.present).toBe(true);
      expect(toHex(p.value!)).toBe(toHex(values[i]!));
      expect(p.proof[0]).toBe(0x01);
      verifyExistence(root, keys[i]!, p.value!, p.proof);
    }
  });

  it('PROOF of an absent key carries an absence proof', async () => {
    const root = v1.root;
    const absent = createHash('sha256').update('absent').digest();
    const r = await c.request({ kind: Kind.Proof, root, key: absent });
    expect(r.status).toBe(Status.Ok);
    const p = decodeProofPayload(r.payload);
    expect(p.present).toBe(false);
    expect(p.proof[0]).toBe(0x02);
    verifyAbsence(root, absent, p.proof);
    // "extra key" is in v2 only.
    const extra = new TextEncoder().encode('extra key');
    const r1 = decodeProofPayload((await c.request({ kind: Kind.Proof, root: v1.root, key: extra })).payload);
    const r2 = decodeProofPayload((await c.request({ kind: Kind.Proof, root: v2.root, key: extra })).payload);
    expect([r1.present, r2.present]).toEqual([false, true]);
  });

  it('RANGE answers a range proof that verifies (complete and incomplete)', async () => {
    const root = v1.root;
    const sorted = [...keys].sort(compareBytes);
    const start = sorted[100]!;
    const end = sorted[150]!;
    const r = await c.request({ kind: Kind.Range, root, start, end, limit: 1000 });
    expect(r.status).toBe(Status.Ok);
    const res = verifyRange(root, start, end, 1000, r.payload);
    expect(res.complete).toBe(true);
    expect(res.entries.length).toBe(50);
    const r2 = await c.request({ kind: Kind.Range, root, start: new Uint8Array(0), limit: 10 });
    const res2 = verifyRange(root, new Uint8Array(0), undefined, 10, r2.payload);
    expect(res2.complete).toBe(false);
    expect(toHex(res2.resumeKey!)).toBe(toHex(sorted[10]!));
  });

  it('UNKNOWN_ROOT, OUT_OF_RANGE and BAD_REQUEST', async () => {
    const other = new Uint8Array(32).fill(7);
    expect((await c.request({ kind: Kind.Chunk, root: other, index: 0 })).status).toBe(Status.UnknownRoot);
    expect((await c.request({ kind: Kind.Proof, root: other, key: keys[0]! })).status).toBe(Status.UnknownRoot);
    expect((await c.request({ kind: Kind.Range, root: other, start: new Uint8Array(0), limit: 1 })).status).toBe(
      Status.UnknownRoot,
    );
    const n = v1.chunkCount;
    expect((await c.request({ kind: Kind.Chunk, root: v1.root, index: n })).status).toBe(Status.OutOfRange);
    expect((await c.request({ kind: Kind.Chunk, root: v1.root, index: 2 ** 40 })).status).toBe(Status.OutOfRange);
    expect((await c.request({ kind: Kind.Chunk, root: v1.root, index: n - 1 })).status).toBe(Status.Ok);
    // end ≤ start: QUERY_INVALID in the core → BAD_REQUEST.
    const r = await c.request({ kind: Kind.Range, root: v1.root, start: keys[5]!, end: keys[5]!, limit: 5 });
    expect(r.status).toBe(Status.BadRequest);
    expect(r.payload.length).toBe(0);
  });

  it('answers malformed requests BAD_REQUEST with version 1, and keeps the connection', async () => {
    const root = v1.root;
    // Ids far above the ones this client numbered so far.
    const frames = [
      // version 2
      Uint8Array.of(2, Kind.Chunk, 0x81, 0x80, 0x40, ...root, 0),
      // empty key
      Uint8Array.of(1, Kind.Proof, 0x82, 0x80, 0x40, ...root, 0),
      // range limit 0
      Uint8Array.of(1, Kind.Range, 0x83, 0x80, 0x40, ...root, 0, 0, 0),
      // range limit 65537
      Uint8Array.of(1, Kind.Range, 0x84, 0x80, 0x40, ...root, 0, 0, 0x81, 0x80, 0x04),
      // trailing bytes after a ROOTS request
      Uint8Array.of(1, Kind.Roots, 0x85, 0x80, 0x40, 0),
      // a root that is too short
      Uint8Array.of(1, Kind.Chunk, 0x86, 0x80, 0x40, 1, 2, 3),
    ];
    for (const f of frames) c.pipe.send(encodeFrame(f));
    for (let i = 1; i <= frames.length; i++) {
      const id = 0x100000 + i;
      const r = await c.response(id);
      expect(r.status, `id ${id}`).toBe(Status.BadRequest);
      expect(r.payload.length).toBe(0);
    }
    // (decodeResponse checked version 1 on every answer, the version-2 request's too.)
    expect((await c.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
    expect(c.closed).toBe(false);
  });

  it('answers the 65th request in flight BUSY', async () => {
    const fresh = await connect();
    try {
      // 100 requests in one write: the server decodes them together, so 64
      // are in flight when the 65th arrives.
      const frames = Array.from({ length: 100 }, (_, index) => fresh.frame({ kind: Kind.Chunk, root: v1.root, index: index % 10 }));
      const all = new Uint8Array(frames.reduce((s, f) => s + f.length, 0));
      let at = 0;
      for (const f of frames) {
        all.set(f, at);
        at += f.length;
      }
      fresh.pipe.send(all);
      expect(await fresh.waitResponses(100, 10_000)).toBe(true);
      const busy = fresh.responses.filter((r) => r.status === Status.Busy).length;
      const ok = fresh.responses.filter((r) => r.status === Status.Ok).length;
      expect(ok + busy).toBe(100);
      expect(busy).toBe(36);
      expect(new Set(fresh.responses.map((r) => r.id)).size).toBe(100);
      // Answered ones free their slots.
      expect((await fresh.request({ kind: Kind.Chunk, root: v1.root, index: 0 })).status).toBe(Status.Ok);
    } finally {
      fresh.close();
    }
  });
});

describe('many clients at once', () => {
  it('20 ws clients and 5 libp2p streams sync every chunk concurrently', async () => {
    const clients = [
      ...(await Promise.all(Array.from({ length: 20 }, () => wsClient(peer.wsUrl!)))),
      ...(await Promise.all(Array.from({ length: 5 }, () => libp2pClient(dialer, peer.libp2pAddrs[0]!)))),
    ];
    try {
      const root = v2.root;
      const n = v2.chunkCount;
      await Promise.all(
        clients.map(async (c) => {
          const ids = Array.from({ length: n }, (_, index) => c.send({ kind: Kind.Chunk, root, index }));
          const rs = await Promise.all(ids.map((id) => c.response(id, 20_000)));
          rs.forEach((r, index) => verifyChunk(root, index, r.payload));
        }),
      );
    } finally {
      for (const c of clients) c.close();
    }
  });

  it('a chunk of the other version does not verify against this root', async () => {
    const c = await wsClient(peer.wsUrl!);
    try {
      const r = await c.request({ kind: Kind.Chunk, root: v2.root, index: 0 });
      expect(() => verifyChunk(v1.root, 0, r.payload)).toThrow(ProofError);
    } finally {
      c.close();
    }
  });
});
