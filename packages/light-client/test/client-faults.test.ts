// The query client against peers that break the rules without lying about
// data (spec/wire.md). Real WebSocket peers on 127.0.0.1.
// - `ROOTS` is answered `OK` (or `BUSY`). A peer that answers a read
//   `UNKNOWN_ROOT` is asked its `ROOTS`; an answer with another status, or
//   one whose body does not parse, is a fault banned with its code, never a
//   way to be merely refused.
// - A peer that answers only `BUSY` is backed off, not flooded: `getMany`
//   asks the keys its lanes left a few at a time.
// - A `BUSY` is "retry later", not "predates MULTIPROOF": after one, an
//   honest peer is asked `MULTIPROOF` again, not one `PROOF` per key.

import { init } from '@bpavl/wasm';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { createClient } from '../src/client/index.js';
import { startBusyProofPeer } from './support/busy-proof-peer.js';
import { buildTree } from './support/server.js';
import { Kind, MAX_REQUEST_BYTES, Status } from '../src/wire/constants.js';
import { FrameDecoder } from '../src/wire/frame.js';
import { decodeRequest, encodeResponseFrame } from '../src/wire/messages.js';

beforeAll(() => init());

const servers: WebSocketServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A peer that answers each request with what `answer` gives (a status, and a body for `OK`); counts them in `requests`. */
async function peer(answer: (kind: Kind) => [number, Uint8Array?], requests = { count: 0 }): Promise<string> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  servers.push(wss);
  await new Promise<void>((r) => wss.once('listening', () => r()));
  wss.on('connection', (ws) => {
    const decoder = new FrameDecoder(MAX_REQUEST_BYTES);
    ws.on('message', (data: Buffer) => {
      for (const frame of decoder.push(new Uint8Array(data))) {
        const req = decodeRequest(frame);
        requests.count++;
        const [status, body] = answer(req.kind);
        ws.send(encodeResponseFrame({ id: req.id, kind: req.kind, status: status as Status }, body));
      }
    });
  });
  return `ws://127.0.0.1:${(wss.address() as { port: number }).port}`;
}

/** A peer that answers every read `UNKNOWN_ROOT`, and `ROOTS` with `status` and `body`. */
const roots = (status: number, body?: Uint8Array) => peer((kind) => (kind === Kind.Roots ? [status, body] : [Status.UnknownRoot]));

it('a ROOTS answer that does not parse, or has another status, is banned; BUSY or a list without the root only refuses', async () => {
  const root = new Uint8Array(32).fill(7);
  const truncated = await roots(Status.Ok, Uint8Array.of(1, ...root.subarray(0, 10))); // one entry, cut short
  const trailing = await roots(Status.Ok, Uint8Array.of(0, 0)); // no entry, then a stray byte
  const outOfRange = await roots(Status.OutOfRange);
  const busy = await roots(Status.Busy);
  const other = await roots(Status.Ok, Uint8Array.of(1, ...new Uint8Array(32).fill(9), 1, 1)); // lists another root
  const client = createClient({ root, peers: [truncated, trailing, outOfRange, busy, other], deadlineMs: 3000 });
  try {
    const failure = await client.get(Uint8Array.of(1)).catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: 'NO_HONEST_PEERS' });
    const banned = Object.fromEntries((failure as { banned: { peer: string; code: string }[] }).banned.map((b) => [b.peer, b.code]));
    expect(banned).toEqual({ [truncated]: 'MESSAGE_MALFORMED', [trailing]: 'MESSAGE_MALFORMED', [outOfRange]: 'OUT_OF_RANGE' });
  } finally {
    client.close();
  }
});

it('getMany against a peer that answers only BUSY backs off: a few keys at a time, each paced', async () => {
  const requests = { count: 0 };
  const busy = await peer(() => [Status.Busy], requests);
  const keys = Array.from({ length: 200 }, (_, i) => Uint8Array.of(1, i));
  const client = createClient({ root: new Uint8Array(32), peers: [busy], deadlineMs: 1000 });
  try {
    await expect(client.getMany(keys)).rejects.toMatchObject({ code: 'NO_HONEST_PEERS' });
    // Its lanes ask again after each 50 ms back-off until the read's deadline (1 s): about 80 requests.
    // Asked all at once (before), 200 keys made about 3,000 requests a second.
    expect(requests.count).toBeLessThan(600);
  } finally {
    client.close();
  }
});

it('getMany after a BUSY goes on with MULTIPROOF once backed off, not one PROOF per key', async () => {
  // spec/wire.md: BUSY means "retry later"; only BAD_REQUEST marks a peer that predates MULTIPROOF.
  const { tree, root } = buildTree(3000, 64);
  const peer = await startBusyProofPeer(tree, 1);
  const keys = Array.from({ length: 3000 }, (_, i) => new TextEncoder().encode(`key-1-${String(i).padStart(8, '0')}`));
  const client = createClient({ root, peers: [peer.url] });
  try {
    const values = await client.getMany(keys);
    expect(values.every((v) => v?.length === 64)).toBe(true);
    expect(peer.requests.get(Kind.Proof) ?? 0).toBeLessThan(300); // before: one per key left, about 2,200
    expect(peer.requests.get(Kind.Multiproof)!).toBeLessThan(40);
  } finally {
    client.close();
    await peer.close();
  }
});
