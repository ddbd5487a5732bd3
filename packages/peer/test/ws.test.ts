// The WebSocket transport's output (src/transports/ws.ts): small answers of
// one turn share a WebSocket message (spec/wire.md: a message carries whole
// frames), big answers go alone, and every answer arrives whole and once.

import { decodeProofPayload, Kind, Status } from '@bpavl/light-client/wire';
import { verifyExistence } from '@bpavl/light-client/verify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startPeer, type RunningPeer } from '../src/peer.ts';
import { StaticTreeSource } from '../src/source.ts';
import { bigValueTree, smallTree, wasmReady, wsClient } from './support.ts';

let peer: RunningPeer;
let small: ReturnType<typeof smallTree>;
let big: ReturnType<typeof bigValueTree>;

beforeAll(async () => {
  await wasmReady();
  small = smallTree(600, 16);
  big = bigValueTree(9);
  peer = await startPeer(new StaticTreeSource([small.tree.snapshot(), big.snapshot()]), { libp2pPort: null });
});

afterAll(async () => {
  await peer?.close();
});

it('64 pipelined PROOFs in one message: fewer messages than answers, each answer whole and verified', async () => {
  const c = await wsClient(peer.wsUrl!);
  try {
    let messages = 0;
    c.ws.on('message', () => messages++);
    const root = small.tree.root;
    const frames = small.keys.slice(0, 64).map((key, i) => c.frame({ kind: Kind.Proof, root, key }, i));
    c.pipe.send(Buffer.concat(frames));
    expect(await c.waitResponses(64, 10_000)).toBe(true);
    expect(c.responses.map((r) => r.id).sort((a, b) => a - b)).toEqual([...Array(64).keys()]);
    for (const r of c.responses) {
      expect(r.status).toBe(Status.Ok);
      const { present, value, proof } = decodeProofPayload(r.payload);
      expect(present).toBe(true);
      expect(Buffer.compare(value!, small.values[r.id]!)).toBe(0);
      verifyExistence(root, small.keys[r.id]!, value!, proof);
    }
    expect(messages).toBeLessThan(64);
  } finally {
    c.close();
  }
});

it('big answers (64 KiB chunks, sent alone) mixed with small ones (shared) all arrive whole', async () => {
  const c = await wsClient(peer.wsUrl!);
  try {
    const frames = [];
    for (let i = 0; i < 3; i++) {
      frames.push(c.frame({ kind: Kind.Chunk, root: big.root, index: i }, 2 * i));
      frames.push(c.frame({ kind: Kind.Roots }, 2 * i + 1));
    }
    c.pipe.send(Buffer.concat(frames));
    expect(await c.waitResponses(6, 10_000)).toBe(true);
    for (let i = 0; i < 3; i++) {
      const chunk = c.responses.find((r) => r.id === 2 * i)!;
      expect(chunk.status).toBe(Status.Ok);
      expect(Buffer.compare(chunk.payload, big.snapshot().exportChunk(i))).toBe(0);
      expect(c.responses.find((r) => r.id === 2 * i + 1)!.status).toBe(Status.Ok);
    }
  } finally {
    c.close();
  }
});
