// Hostile clients on real sockets: malformed frames, oversize prefixes, text
// and oversized WebSocket messages, request floods (reading and not reading)
// and too many connections. Another client connected at the same time keeps
// getting correct answers, and memory stays bounded.

import { createConnection } from 'node:net';
import { encodeFrame, Kind, MAX_RESPONSE_BYTES, Status } from '@bpavl/light-client/wire';
import { verifyChunk } from '@bpavl/light-client/verify';
import type { Snapshot } from '@bpavl/wasm';
import type { Libp2p } from 'libp2p';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HANDSHAKE_TIMEOUT_MS, MAX_WS_MESSAGE_BYTES } from '../src/constants.ts';
import { startPeer, type RunningPeer } from '../src/peer.ts';
import { StaticTreeSource } from '../src/source.ts';
import { bigValueTree, libp2pClient, libp2pDialer, sleep, smallTree, wasmReady, type WireClient, wsClient } from './support.ts';

let snap: Snapshot;
let peer: RunningPeer;
let dialer: Libp2p;

beforeAll(async () => {
  await wasmReady();
  snap = smallTree(3000, 256).tree.head(); // ≈ 15 chunks of 70 … 140 KB
  peer = await startPeer(new StaticTreeSource([snap]));
  dialer = await libp2pDialer();
});

afterAll(async () => {
  await dialer?.stop();
  await peer?.close();
});

/** A client that syncs every chunk and verifies each; resolves to how many it verified. */
async function honestSync(c: WireClient): Promise<number> {
  const n = snap.chunkCount;
  let verified = 0;
  for (let index = 0; index < n; index++) {
    const r = await c.request({ kind: Kind.Chunk, root: snap.root, index }, 15_000);
    expect(r.status).toBe(Status.Ok);
    verifyChunk(snap.root, index, r.payload);
    verified++;
  }
  return verified;
}

function concat(frames: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(frames.reduce((s, f) => s + f.length, 0));
  let at = 0;
  for (const f of frames) {
    out.set(f, at);
    at += f.length;
  }
  return out;
}

describe('malformed input closes only the offending connection', () => {
  const cases: [string, () => Uint8Array | string][] = [
    ['a non-minimal prefix', () => Uint8Array.of(0x80, 0x00)],
    ['a 5-byte prefix', () => Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x01)],
    ['a prefix declaring 8 MiB', () => Uint8Array.of(0x80, 0x80, 0x80, 0x04)],
    ['a prefix declaring 4097 bytes', () => Uint8Array.of(0x81, 0x20)],
    ['a frame with no header', () => encodeFrame(Uint8Array.of(1))],
    ['a text message', () => 'hello'],
    ['a message above maxPayload', () => new Uint8Array(MAX_WS_MESSAGE_BYTES + 1)],
  ];
  it.each(cases)('%s (ws)', async (_name, make) => {
    const bystander = await wsClient(peer.wsUrl!);
    const bad = await wsClient(peer.wsUrl!);
    try {
      const faultsBefore = peer.server.stats.faults;
      bad.ws.send(make());
      expect(await bad.waitClosed(3000)).toBe(true);
      expect(bad.responses.length).toBe(0);
      if (_name !== 'a message above maxPayload') expect(peer.server.stats.faults).toBe(faultsBefore + 1);
      expect(await honestSync(bystander)).toBe(snap.chunkCount);
    } finally {
      bystander.close();
      bad.close();
    }
  });

  it('a malformed prefix resets only that libp2p stream', async () => {
    const bystander = await libp2pClient(dialer, peer.libp2pAddrs[0]!);
    const bad = await libp2pClient(dialer, peer.libp2pAddrs[0]!);
    try {
      bad.pipe.send(Uint8Array.of(0x80, 0x00));
      expect(await bad.waitClosed(3000)).toBe(true);
      expect(await honestSync(bystander)).toBe(snap.chunkCount);
    } finally {
      bystander.close();
      bad.close();
    }
  });
});

describe('floods', () => {
  const FLOOD = 5000;
  const floodFrames = (c: WireClient) =>
    Array.from({ length: FLOOD }, (_, i) => c.frame({ kind: Kind.Chunk, root: snap.root, index: i % snap.chunkCount }));

  it('5,000 requests as fast as possible (ws, reading): every one answered OK or BUSY; a bystander is served', async () => {
    const flooder = await wsClient(peer.wsUrl!);
    const bystander = await wsClient(peer.wsUrl!);
    try {
      const frames = floodFrames(flooder);
      // 50 frames per message, all messages sent back to back.
      for (let i = 0; i < frames.length; i += 50) flooder.ws.send(concat(frames.slice(i, i + 50)));
      const [synced] = await Promise.all([honestSync(bystander), flooder.waitResponses(FLOOD, 60_000)]);
      expect(synced).toBe(snap.chunkCount);
      expect(flooder.responses.length).toBe(FLOOD);
      const busy = flooder.responses.filter((r) => r.status === Status.Busy).length;
      const ok = flooder.responses.filter((r) => r.status === Status.Ok).length;
      expect(ok + busy).toBe(FLOOD);
      expect(busy).toBeGreaterThan(0);
      expect(new Set(flooder.responses.map((r) => r.id)).size).toBe(FLOOD);
    } finally {
      flooder.close();
      bystander.close();
    }
  }, 90_000);

  it('5,000 requests from a client that never reads (ws): its answers back up, a bystander is served, memory stays bounded', async () => {
    const flooder = await wsClient(peer.wsUrl!);
    const bystander = await wsClient(peer.wsUrl!);
    try {
      const before = process.memoryUsage();
      flooder.ws.pause(); // the flooder's socket is not read any more
      const frames = floodFrames(flooder);
      for (let i = 0; i < frames.length; i += 50) flooder.ws.send(concat(frames.slice(i, i + 50)));
      await sleep(500);
      expect(await honestSync(bystander)).toBe(snap.chunkCount);
      const after = process.memoryUsage();
      // The server hands out at most ≈ 1 MiB beyond what the kernel took, then
      // stops answering and reading that socket (see server.test.ts); the whole
      // test process (server and both clients) grows by far less than the
      // 5,000 answers (≈ 500 MB) would need. Measured: ≈ 25 MB RSS.
      expect(after.rss - before.rss).toBeLessThan(150 * 1024 * 1024);
      expect(after.heapUsed - before.heapUsed).toBeLessThan(100 * 1024 * 1024);
      expect(flooder.closed).toBe(false);
    } finally {
      flooder.close();
      bystander.close();
    }
  }, 60_000);

  it('5,000 requests on one libp2p stream; another stream on the same connection is served', async () => {
    const flooder = await libp2pClient(dialer, peer.libp2pAddrs[0]!);
    const bystander = await libp2pClient(dialer, peer.libp2pAddrs[0]!);
    try {
      const frames = floodFrames(flooder);
      for (let i = 0; i < frames.length; i += 50) flooder.pipe.send(concat(frames.slice(i, i + 50)));
      const [synced] = await Promise.all([honestSync(bystander), flooder.waitResponses(FLOOD, 60_000)]);
      expect(synced).toBe(snap.chunkCount);
      expect(flooder.responses.length).toBe(FLOOD);
      expect(flooder.responses.some((r) => r.status === Status.Busy)).toBe(true);
    } finally {
      flooder.close();
      bystander.close();
    }
  }, 90_000);
});

describe('connection cap', () => {
  it('idle sockets up to the cap: an honest client connects and is served, the idlest socket is evicted', async () => {
    const small = await startPeer(new StaticTreeSource([snap]), { maxConnections: 8, libp2pPort: null });
    const idle: WireClient[] = [];
    try {
      for (let i = 0; i < 8; i++) idle.push(await wsClient(small.wsUrl!));
      const honest = await wsClient(small.wsUrl!);
      idle.push(honest);
      const r = await honest.request({ kind: Kind.Chunk, root: snap.root, index: 0 });
      expect(r.status).toBe(Status.Ok);
      verifyChunk(snap.root, 0, r.payload);
      expect(await idle[0]!.waitClosed(3000)).toBe(true); // the first, idle longest
      expect(idle.slice(1).every((c) => !c.closed)).toBe(true);
      expect(small.server.stats.evicted).toBe(1);
      expect(small.server.connectionCount).toBe(8);
    } finally {
      for (const c of idle) c.close();
      await small.close();
    }
  });

  it('sockets beyond maxConnections are closed with 1013 while every connection has requests in flight', async () => {
    // Answers held for a minute: every admitted connection has a request in flight.
    const hold = { reply: () => ({ kind: 'delay', ms: 60_000, reply: { kind: 'answer', status: Status.Ok } }) as const };
    const small = await startPeer(new StaticTreeSource([snap]), { maxConnections: 3, libp2pPort: null, hook: hold });
    const clients: WireClient[] = [];
    try {
      for (let i = 0; i < 3; i++) clients.push(await wsClient(small.wsUrl!));
      for (const c of clients) c.send({ kind: Kind.Roots });
      for (let i = 0; i < 300 && small.server.stats.requests < 3; i++) await sleep(10);
      const code = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(small.wsUrl!);
        const t = setTimeout(() => reject(new Error('not closed')), 3000);
        ws.on('close', (c) => {
          clearTimeout(t);
          resolve(c);
        });
        ws.on('error', () => {});
      });
      expect(code).toBe(1013);
      expect(small.server.stats.refused).toBe(1);
      // The three admitted clients are still connected.
      expect(clients.every((c) => !c.closed)).toBe(true);
    } finally {
      for (const c of clients) c.close();
      await small.close();
    }
  });
});

describe('memory budget', () => {
  it('a flood of large RANGEs that are never read: answer bytes stay within the budget, a bystander is answered within 1 s', async () => {
    // Every RANGE with a large limit is cut to fit (~7.5 MB).
    const tree = bigValueTree(2).head();
    const budget = 48 * 1024 * 1024;
    const server = await startPeer(new StaticTreeSource([tree]), { memoryBudget: budget, libp2pPort: null });
    const flooders: WireClient[] = [];
    const bystander = await wsClient(server.wsUrl!);
    try {
      for (let i = 0; i < 12; i++) {
        const c = await wsClient(server.wsUrl!);
        (c as WireClient & { ws: WebSocket }).ws.pause(); // never reads: answers pile up in the server
        flooders.push(c);
        c.pipe.send(concat(Array.from({ length: 16 }, () => c.frame({ kind: Kind.Range, root: tree.root, start: new Uint8Array(0), limit: 65536 }))));
      }
      let slowest = 0;
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        const r = await bystander.request({ kind: Kind.Chunk, root: tree.root, index: i % tree.chunkCount }, 5000);
        slowest = Math.max(slowest, performance.now() - t0);
        expect(r.status).toBe(Status.Ok);
        await sleep(50);
      }
      const s = server.server.stats;
      expect(s.peakAnswerBytes).toBeLessThanOrEqual(budget);
      // The flood did press on the budget: the test would see a server without one.
      expect(s.peakAnswerBytes + MAX_RESPONSE_BYTES).toBeGreaterThan(budget);
      expect(slowest).toBeLessThan(1000);
    } finally {
      for (const c of flooders) c.close();
      bystander.close();
      await server.close();
    }
    expect(server.server.stats.answerBytes).toBe(0);
  }, 60_000);
});

describe('idle connections', () => {
  it('a WebSocket ping is something received: a client that pings stays, one that stops is closed', async () => {
    const idleTimeoutMs = 600;
    const p = await startPeer(new StaticTreeSource([snap]), { libp2pPort: null, idleTimeoutMs });
    const [pinging, quiet] = await Promise.all([wsClient(p.wsUrl!), wsClient(p.wsUrl!)]);
    try {
      for (let i = 0; i < 8; i++) {
        pinging.ws.ping();
        await sleep(idleTimeoutMs / 3);
      }
      // 1.6 s: three idle timeouts.
      expect(quiet.closed).toBe(true);
      expect(pinging.closed).toBe(false);
      expect((await pinging.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
      expect(await pinging.waitClosed(idleTimeoutMs + 2000)).toBe(true);
    } finally {
      pinging.close();
      quiet.close();
      await p.close();
    }
  }, 20_000);
});

describe('handshake deadline', () => {
  /** Milliseconds until `socket` closes (Infinity after HANDSHAKE_TIMEOUT_MS + 5 s). */
  const closedWithin = (socket: { on(event: 'close', f: () => void): unknown }, t0: number) =>
    new Promise<number>((resolve) => {
      const t = setTimeout(() => resolve(Infinity), HANDSHAKE_TIMEOUT_MS + 5000);
      socket.on('close', () => {
        clearTimeout(t);
        resolve(performance.now() - t0);
      });
    });

  /** A socket to `port` that sends an upgrade request a byte every 500 ms, never its end: the deadline is not an inactivity timer. */
  const trickling = (port: number) => {
    const socket = createConnection(port, '127.0.0.1');
    socket.on('error', () => {});
    const request = 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Slow: ' + 'x'.repeat(64);
    let at = 0;
    const timer = setInterval(() => {
      if (at < request.length && !socket.destroyed) socket.write(request[at++]!);
    }, 500);
    socket.on('close', () => clearInterval(timer));
    return socket;
  };

  it('a socket that never finishes its WebSocket upgrade, or trickles it, is closed after HANDSHAKE_TIMEOUT_MS; an open WebSocket is not', async () => {
    const p = await startPeer(new StaticTreeSource([snap]), { libp2pPort: null });
    const open = await wsClient(p.wsUrl!);
    const port = Number(new URL(p.wsUrl!).port);
    const raw = createConnection(port, '127.0.0.1');
    raw.on('error', () => {});
    raw.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n'); // the headers never end
    const slow = trickling(port);
    const t0 = performance.now();
    const closed = await Promise.all([closedWithin(raw, t0), closedWithin(slow, t0)]);
    try {
      for (const closedAfter of closed) {
        expect(closedAfter).toBeGreaterThanOrEqual(HANDSHAKE_TIMEOUT_MS - 100);
        expect(closedAfter).toBeLessThan(HANDSHAKE_TIMEOUT_MS + 5000);
      }
      expect(open.closed).toBe(false);
      expect((await open.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
    } finally {
      open.close();
      raw.destroy();
      slow.destroy();
      await p.close();
    }
  }, 30_000);

  it('libp2p: a socket that sends nothing, one whose WebSocket upgrade never ends or trickles, and a WebSocket that never starts noise are closed after HANDSHAKE_TIMEOUT_MS; a libp2p client is served', async () => {
    const p = await startPeer(new StaticTreeSource([snap]), { wsPort: null });
    const addr = p.libp2pAddrs[0]!;
    const port = Number(/\/tcp\/(\d+)\//.exec(addr)![1]);
    const raw = createConnection(port, '127.0.0.1');
    raw.on('error', () => {});
    raw.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n'); // the headers never end
    const quiet = createConnection(port, '127.0.0.1'); // connects, never sends a byte
    quiet.on('error', () => {});
    const silent = new WebSocket(`ws://127.0.0.1:${port}`); // upgraded, then never a noise message
    silent.on('error', () => {});
    const slow = trickling(port);
    const t0 = performance.now();
    const closed = await Promise.all([closedWithin(raw, t0), closedWithin(quiet, t0), closedWithin(silent, t0), closedWithin(slow, t0)]);
    try {
      for (const closedAfter of closed) {
        expect(closedAfter).toBeGreaterThanOrEqual(HANDSHAKE_TIMEOUT_MS - 100);
        expect(closedAfter).toBeLessThan(HANDSHAKE_TIMEOUT_MS + 5000);
      }
      const client = await libp2pClient(dialer, addr);
      expect((await client.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
      client.close();
    } finally {
      raw.destroy();
      quiet.destroy();
      slow.destroy();
      silent.terminate();
      await p.close();
    }
  }, 40_000);
});

describe('many clients over time', () => {
  it('libp2p: a client that leaves leaves no peer-store record behind (one per client identity ever served, before)', async () => {
    const p = await startPeer(new StaticTreeSource([snap]), { wsPort: null });
    const node = p.libp2p!.node;
    try {
      // Each a new identity, as each short-lived CLI or page has; libp2p admits 5 inbound connections a second from one host.
      for (let i = 0; i < 4; i++) {
        const d = await libp2pDialer();
        try {
          const client = await libp2pClient(d, p.libp2pAddrs[0]!);
          expect((await client.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
        } finally {
          await d.stop();
        }
      }
      for (let waited = 0; node.getConnections().length > 0 && waited < 5000; waited += 20) await sleep(20);
      expect(node.getConnections().length).toBe(0);
      await sleep(100); // the deletes, which follow the disconnect events
      expect((await node.peerStore.all()).length).toBe(0);
    } finally {
      await p.close();
    }
  }, 20_000);
});
