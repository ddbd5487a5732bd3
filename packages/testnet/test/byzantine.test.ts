// Each Byzantine mode produces the misbehaviour it promises, as an honest
// client sees it: the verifier's code, a frame error, a timeout or a close.

import { decodeProofPayload, Kind, Status } from '@bpavl/light-client/wire';
import { verifyChunk, verifyExistence, verifyRange } from '@bpavl/light-client/verify';
import type { Snapshot } from '@bpavl/wasm';
import type { Libp2p } from 'libp2p';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Byzantine, type ByzantineMode, parseByzantine, SeededRandom } from '../src/byzantine.ts';
import { startPeer, type RunningPeer } from '../src/peer.ts';
import { StaticTreeSource } from '../../peer/src/source.ts';
import { libp2pClient, libp2pDialer, smallTree, sleep, wasmReady, type WireClient, wsClient } from './support.ts';

let snap: Snapshot;
let other: Snapshot;
let single: Snapshot;
let keys: Uint8Array[];
let values: Uint8Array[];
const peers: RunningPeer[] = [];
const clients: WireClient[] = [];

beforeAll(async () => {
  await wasmReady();
  const t = smallTree(600, 16, 7n);
  keys = t.keys;
  values = t.values;
  snap = t.tree.head();
  other = smallTree(600, 16, 8n).tree.head();
  single = smallTree(10, 16, 9n).tree.head();
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(peers.splice(0).map((p) => p.close()));
});

/** A ws-only peer serving `tree` in `mode`, and a client connected to it. */
async function liar(mode: ByzantineMode, rate = 1, tree = snap, slowMs = 300): Promise<{ peer: RunningPeer; c: WireClient }> {
  const byzantine = new Byzantine({ mode, rate, seed: 42n, slowMs, otherTree: other });
  const peer = await startPeer(new StaticTreeSource([tree]), { byzantine, libp2pPort: null });
  peers.push(peer);
  const c = await wsClient(peer.wsUrl!);
  clients.push(c);
  return { peer, c };
}

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code;
  }
}

describe('payload lies', () => {
  it('corrupt-value: chunks and proofs fail with ROOT_MISMATCH', async () => {
    const { c } = await liar('corrupt-value');
    for (const index of [0, 5, snap.chunkCount - 1]) {
      const r = await c.request({ kind: Kind.Chunk, root: snap.root, index });
      expect(r.status).toBe(Status.Ok);
      expect(codeOf(() => verifyChunk(snap.root, index, r.payload))).toBe('ROOT_MISMATCH');
    }
    const p = decodeProofPayload((await c.request({ kind: Kind.Proof, root: snap.root, key: keys[3]! })).payload);
    expect(p.present).toBe(true);
    expect(p.value!.length).toBe(values[3]!.length);
    expect(codeOf(() => verifyExistence(snap.root, keys[3]!, p.value!, p.proof))).toBe('ROOT_MISMATCH');
    const r = await c.request({ kind: Kind.Range, root: snap.root, start: new Uint8Array(0), limit: 20 });
    expect(codeOf(() => verifyRange(snap.root, new Uint8Array(0), undefined, 20, r.payload))).toBe('ROOT_MISMATCH');
  });

  it('corrupt-key: chunks fail with ROOT_MISMATCH', async () => {
    const { c } = await liar('corrupt-key');
    for (let index = 0; index < snap.chunkCount; index++) {
      const r = await c.request({ kind: Kind.Chunk, root: snap.root, index });
      expect(codeOf(() => verifyChunk(snap.root, index, r.payload))).toBe('ROOT_MISMATCH');
    }
  });

  it('corrupt-proof: a path sibling hash is flipped (ROOT_MISMATCH); a single chunk gets a wrong key-height', async () => {
    const { c } = await liar('corrupt-proof');
    for (const index of [0, 1, snap.chunkCount - 1]) {
      const r = await c.request({ kind: Kind.Chunk, root: snap.root, index });
      expect(codeOf(() => verifyChunk(snap.root, index, r.payload))).toBe('ROOT_MISMATCH');
    }
    const p = decodeProofPayload((await c.request({ kind: Kind.Proof, root: snap.root, key: keys[9]! })).payload);
    expect(codeOf(() => verifyExistence(snap.root, keys[9]!, p.value!, p.proof))).toBe('ROOT_MISMATCH');
    const { c: c1 } = await liar('corrupt-proof', 1, single);
    const r = await c1.request({ kind: Kind.Chunk, root: single.root, index: 0 });
    expect(codeOf(() => verifyChunk(single.root, 0, r.payload))).toBe('KEY_HEIGHT_MISMATCH');
  });

  it('wrong-index: a valid envelope of another chunk (CHUNK_INDEX_MISMATCH)', async () => {
    const { c } = await liar('wrong-index');
    const n = snap.chunkCount;
    for (const index of [0, 7, n - 1]) {
      const r = await c.request({ kind: Kind.Chunk, root: snap.root, index });
      expect(codeOf(() => verifyChunk(snap.root, index, r.payload))).toBe('CHUNK_INDEX_MISMATCH');
      expect(verifyChunk(snap.root, (index + 1) % n, r.payload).index).toBe((index + 1) % n);
    }
  });

  it('wrong-root: a valid envelope of another tree (ROOT_MISMATCH)', async () => {
    const { c } = await liar('wrong-root');
    const r = await c.request({ kind: Kind.Chunk, root: snap.root, index: 3 });
    expect(codeOf(() => verifyChunk(snap.root, 3, r.payload))).toBe('ROOT_MISMATCH');
    expect(verifyChunk(other.root, 3, r.payload).index).toBe(3); // genuinely the other tree's
    const p = decodeProofPayload((await c.request({ kind: Kind.Proof, root: snap.root, key: keys[0]! })).payload);
    expect(p.present).toBe(false); // the other tree has other keys
    expect(codeOf(() => verifyExistence(snap.root, keys[0]!, values[0]!, p.proof))).not.toBeUndefined();
  });

  it('random-bytes: as many random bytes as the honest payload', async () => {
    const { c } = await liar('random-bytes');
    const honest = snap.exportChunk(2);
    const r = await c.request({ kind: Kind.Chunk, root: snap.root, index: 2 });
    expect(r.payload.length).toBe(honest.length);
    expect(codeOf(() => verifyChunk(snap.root, 2, r.payload))).toBeTypeOf('string');
  });

  it('ROOTS and error statuses stay honest', async () => {
    const { c } = await liar('random-bytes');
    expect((await c.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
    expect((await c.request({ kind: Kind.Chunk, root: snap.root, index: 10_000 })).status).toBe(Status.OutOfRange);
    expect((await c.request({ kind: Kind.Chunk, root: other.root, index: 0 })).status).toBe(Status.UnknownRoot);
  });
});

describe('wire lies', () => {
  it('truncate: the length prefix and half the body, then silence on an open connection', async () => {
    const { c } = await liar('truncate');
    c.send({ kind: Kind.Chunk, root: snap.root, index: 1 });
    await sleep(300);
    expect(c.responses.length).toBe(0);
    expect(c.decoder.busy).toBe(true); // a frame was started and never finished
    expect(c.error).toBeUndefined();
    // Muted: nothing more comes, not even for ROOTS.
    c.send({ kind: Kind.Roots });
    await sleep(200);
    expect(c.responses.length).toBe(0);
    expect(c.closed).toBe(false);
  });

  it('oversize: the client FrameDecoder(MAX_RESPONSE_BYTES) throws FRAME_TOO_LARGE', async () => {
    const { c } = await liar('oversize');
    c.send({ kind: Kind.Chunk, root: snap.root, index: 1 });
    const until = Date.now() + 3000;
    while (!c.error && Date.now() < until) await sleep(10);
    expect(c.error?.code).toBe('FRAME_TOO_LARGE');
  });

  it('slow: correct answers, late', async () => {
    const { c } = await liar('slow', 1, snap, 400);
    const t0 = Date.now();
    const [a, b] = await Promise.all([
      c.request({ kind: Kind.Chunk, root: snap.root, index: 0 }),
      c.request({ kind: Kind.Chunk, root: snap.root, index: 1 }),
    ]);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(380);
    expect(took).toBeLessThan(3000); // delayed together, not one after the other
    verifyChunk(snap.root, 0, a.payload);
    verifyChunk(snap.root, 1, b.payload);
    // ROOTS is not delayed.
    const t1 = Date.now();
    await c.request({ kind: Kind.Roots });
    expect(Date.now() - t1).toBeLessThan(300);
  });

  it('silent: no answer within a timeout, and no slot held', async () => {
    const { c } = await liar('silent');
    await expect(c.request({ kind: Kind.Chunk, root: snap.root, index: 0 }, 400)).rejects.toThrow(/no response/);
    // 150 ignored requests (in batches below the cap) do not fill the 64 in-flight slots.
    // Each batch is followed by a ROOTS, answered after the batch (a connection's
    // requests are taken in order), so the next batch waits for the server however
    // loaded the machine is, instead of for a fixed sleep it can outrun.
    for (let batch = 0; batch < 3; batch++) {
      for (let i = 0; i < 50; i++) c.send({ kind: Kind.Chunk, root: snap.root, index: 0 });
      expect((await c.request({ kind: Kind.Roots }, 10_000)).status).toBe(Status.Ok);
    }
    expect((await c.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
    expect(c.responses.every((r) => r.kind === Kind.Roots)).toBe(true);
  });

  it('disconnect: half a response frame, then the connection closes', async () => {
    const { c } = await liar('disconnect');
    c.send({ kind: Kind.Chunk, root: snap.root, index: 0 });
    expect(await c.waitClosed(3000)).toBe(true);
    expect(c.responses.length).toBe(0);
    expect(c.decoder.busy).toBe(true);
  });
});

describe('rate', () => {
  it('lies on about the given fraction, reproducibly', async () => {
    const run = async () => {
      const { peer, c } = await liar('wrong-index', 0.3);
      const bad: number[] = [];
      for (let i = 0; i < 200; i++) {
        const index = i % snap.chunkCount;
        const r = await c.request({ kind: Kind.Chunk, root: snap.root, index });
        if (codeOf(() => verifyChunk(snap.root, index, r.payload)) !== undefined) bad.push(i);
      }
      expect(bad.length).toBe(peer.byzantine!.lies);
      return bad;
    };
    const first = await run();
    expect(first.length).toBeGreaterThan(30);
    expect(first.length).toBeLessThan(90);
    expect(await run()).toEqual(first); // same seed, same lies
  });

  it('parseByzantine', () => {
    expect(parseByzantine('silent')).toEqual({ mode: 'silent', rate: 1 });
    expect(parseByzantine('corrupt-value:0.25')).toEqual({ mode: 'corrupt-value', rate: 0.25 });
    for (const bad of ['nope', 'silent:0', 'silent:1.5', 'silent:', 'silent:x', 'slow:0.5:1', 'silent:-1']) {
      expect(() => parseByzantine(bad), bad).toThrow(RangeError);
    }
  });

  it('SeededRandom is reproducible and roughly uniform', () => {
    const a = new SeededRandom(5n);
    const b = new SeededRandom(5n);
    const xs = Array.from({ length: 1000 }, () => a.next());
    expect(Array.from({ length: 1000 }, () => b.next())).toEqual(xs);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(mean).toBeGreaterThan(0.45);
    expect(mean).toBeLessThan(0.55);
    expect(new SeededRandom(6n).next()).not.toBe(xs[0]);
  });
});

describe('over libp2p', () => {
  let dialer: Libp2p;
  beforeAll(async () => {
    dialer = await libp2pDialer();
  });
  afterAll(async () => {
    await dialer?.stop();
  });

  it('corrupt-value and oversize reach a libp2p client too', async () => {
    for (const mode of ['corrupt-value', 'oversize'] as const) {
      const byzantine = new Byzantine({ mode, rate: 1, seed: 1n });
      const peer = await startPeer(new StaticTreeSource([snap]), { byzantine, wsPort: null });
      peers.push(peer);
      const c = await libp2pClient(dialer, peer.libp2pAddrs[0]!);
      clients.push(c);
      const id = c.send({ kind: Kind.Chunk, root: snap.root, index: 4 });
      if (mode === 'corrupt-value') {
        const r = await c.response(id);
        expect(codeOf(() => verifyChunk(snap.root, 4, r.payload))).toBe('ROOT_MISMATCH');
      } else {
        const until = Date.now() + 3000;
        while (!c.error && Date.now() < until) await sleep(10);
        expect(c.error?.code).toBe('FRAME_TOO_LARGE');
      }
    }
  });
});
