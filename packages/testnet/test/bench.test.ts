// The benchmark-only features of the peer (npm run bench:sync): the Baseline
// wire extension (kinds 240 and 241, src/baseline.ts) and its Byzantine lies,
// link emulation (src/link.ts), cached chunk envelopes, and their CLI flags.

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { encodeFrame, encodeRequest, FrameDecoder, Kind, MAX_RESPONSE_BYTES, Status } from '@bpavl/light-client/wire';
import { verifyChunk } from '@bpavl/light-client/verify';
import type { Snapshot } from '@bpavl/wasm';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  BaselineKind,
  type BaselineResponse,
  type BaselineServed,
  decodeBaselineRequest,
  decodeBaselineResponse,
  decodeBaselineRootsPayload,
  encodeBaselineRequest,
  encodeBaselineResponse,
} from '../src/baseline.ts';
import { Byzantine } from '../src/byzantine.ts';
import type { ByteConnection, ConnectionEvents } from '../../peer/src/connection.ts';
import { testnetHook, type TestnetOptions } from '../src/hook.ts';
import { shapeConnection } from '../src/link.ts';
import { SyncServer } from '../../peer/src/server.ts';
import { CachedTree, StaticTreeSource } from '../../peer/src/source.ts';
import { MemoryConnection, sleep, smallTree, spawnTestnet, wasmReady } from './support.ts';

let snap: Snapshot;

beforeAll(async () => {
  await wasmReady();
  snap = smallTree(300, 16).tree.head();
});

/** A leaf record of the Baseline export format (crates/baseline README). */
function leaf(key: number[], value: number[]): number[] {
  return [0, key.length, ...key, value.length, ...value];
}

/** A fake Baseline state: 3 chunks of records (the server never parses them; corrupt-* does). */
const fake: BaselineServed = {
  root: new Uint8Array(32).fill(7),
  chunks: [
    Uint8Array.from([...leaf([1], [10, 11, 12]), ...leaf([2], [20, 21, 22])]),
    Uint8Array.from([1, 2, 1, 2, ...leaf([3], [30, 31, 32, 33])]), // an inner record, then a leaf
    Uint8Array.from([2, 3, 1, 3]), // inner records only
  ],
};

function serve(opts: TestnetOptions = {}) {
  const server = new SyncServer(new StaticTreeSource([snap]), { hook: testnetHook({ baseline: fake, ...opts }) });
  const conn = new MemoryConnection();
  server.handleConnection(conn);
  return { server, conn };
}

/** Every response frame `conn` sent, decoded as Baseline responses. */
function baselineResponses(conn: MemoryConnection): BaselineResponse[] {
  const d = new FrameDecoder(MAX_RESPONSE_BYTES);
  return conn.sent.flatMap((f) => d.push(f)).map(decodeBaselineResponse);
}

const request = (req: Parameters<typeof encodeBaselineRequest>[0]) => encodeFrame(encodeBaselineRequest(req));

describe('Baseline wire extension (kinds 240 and 241)', () => {
  it('requests and responses round-trip; malformed ones are refused', () => {
    const root = new Uint8Array(32).fill(3);
    expect(decodeBaselineRequest(encodeBaselineRequest({ id: 300, kind: BaselineKind.Chunk, root, index: 70000 }))).toEqual({
      id: 300,
      kind: BaselineKind.Chunk,
      root,
      index: 70000,
    });
    expect(decodeBaselineRequest(encodeBaselineRequest({ id: 1, kind: BaselineKind.Roots }))).toEqual({ id: 1, kind: BaselineKind.Roots });
    expect(() => decodeBaselineRequest(Uint8Array.of(1, 240, 9, 1, 2))).toThrow(expect.objectContaining({ code: 'MESSAGE_MALFORMED', request: { id: 9, kind: 240 } }));
    expect(() => decodeBaselineRequest(Uint8Array.of(1, 241, 9, 0))).toThrow(expect.objectContaining({ code: 'MESSAGE_MALFORMED' }));
    const body = encodeBaselineResponse({ id: 4, kind: BaselineKind.Chunk, status: Status.Ok }, Uint8Array.of(1, 2, 3));
    expect(decodeBaselineResponse(body)).toEqual({ id: 4, kind: 240, status: Status.Ok, payload: Uint8Array.of(1, 2, 3) });
    expect(() => decodeBaselineResponse(Uint8Array.of(1, 1, 4, 0))).toThrow(expect.objectContaining({ code: 'MESSAGE_MALFORMED' }));
    expect(() => decodeBaselineResponse(Uint8Array.of(1, 240, 4, 3, 9))).toThrow(expect.objectContaining({ code: 'MESSAGE_MALFORMED' }));
  });

  it('serves BASELINE_ROOTS, chunks, UNKNOWN_ROOT, OUT_OF_RANGE and BAD_REQUEST', async () => {
    const { conn } = serve();
    conn.events.bytes(request({ id: 1, kind: BaselineKind.Roots }));
    for (let index = 0; index < 4; index++) conn.events.bytes(request({ id: 10 + index, kind: BaselineKind.Chunk, root: fake.root, index }));
    conn.events.bytes(request({ id: 20, kind: BaselineKind.Chunk, root: snap.root, index: 0 }));
    conn.events.bytes(encodeFrame(Uint8Array.of(1, 240, 21, 0))); // no root
    await sleep(20);
    const rs = baselineResponses(conn);
    const byId = new Map(rs.map((r) => [r.id, r]));
    expect(decodeBaselineRootsPayload(byId.get(1)!.payload)).toEqual([{ root: fake.root, chunkCount: 3 }]);
    for (let i = 0; i < 3; i++) expect(byId.get(10 + i)).toMatchObject({ kind: 240, status: Status.Ok, payload: fake.chunks[i] });
    expect(byId.get(13)).toMatchObject({ status: Status.OutOfRange });
    expect(byId.get(20)).toMatchObject({ status: Status.UnknownRoot });
    expect(byId.get(21)).toMatchObject({ kind: 240, status: Status.BadRequest });
    expect(conn.aborted).toBe(false);
  });

  it('the verified protocol is unchanged beside it', async () => {
    const { conn } = serve();
    conn.events.bytes(encodeFrame(Uint8Array.of(1, Kind.Chunk, 2, ...snap.root, 1)));
    expect(await conn.client.waitResponses(1, 2000)).toBe(true);
    verifyChunk(snap.root, 1, conn.client.responses[0]!.payload);
  });

  it('a peer without a Baseline answers kinds 240 and 241 BAD_REQUEST, as any unknown kind', async () => {
    const server = new SyncServer(new StaticTreeSource([snap]));
    const conn = new MemoryConnection();
    server.handleConnection(conn);
    conn.events.bytes(request({ id: 3, kind: BaselineKind.Roots }));
    conn.events.bytes(request({ id: 4, kind: BaselineKind.Chunk, root: fake.root, index: 0 }));
    expect(conn.sent.map((f) => [...f])).toEqual([
      [4, 1, 241, 3, Status.BadRequest],
      [4, 1, 240, 4, Status.BadRequest],
    ]);
  });

  it('corrupt-value / corrupt-key flip one bit of the first leaf; wrong-index shifts; corrupt-proof is honest', async () => {
    const ask = async (mode: ConstructorParameters<typeof Byzantine>[0]['mode']) => {
      const { conn } = serve({ byzantine: new Byzantine({ mode, rate: 1, seed: 1n }) });
      for (let index = 0; index < 3; index++) conn.events.bytes(request({ id: index, kind: BaselineKind.Chunk, root: fake.root, index }));
      conn.events.bytes(request({ id: 9, kind: BaselineKind.Roots }));
      await sleep(20);
      const rs = baselineResponses(conn).sort((a, b) => a.id - b.id);
      expect(decodeBaselineRootsPayload(rs.at(-1)!.payload)).toEqual([{ root: fake.root, chunkCount: 3 }]); // ROOTS stays honest
      return rs.slice(0, 3).map((r) => [...r.payload]);
    };
    const flipped = (chunk: Uint8Array, at: number) => {
      const out = [...chunk];
      out[at]! ^= 1;
      return out;
    };
    // Chunk 0: leaf key [1] at byte 2, value [10, 11, 12] at 4 … 6 (middle 5). Chunk 1: after a 4-byte inner record.
    expect(await ask('corrupt-value')).toEqual([flipped(fake.chunks[0]!, 5), flipped(fake.chunks[1]!, 4 + 4 + 2), [...fake.chunks[2]!]]);
    expect(await ask('corrupt-key')).toEqual([flipped(fake.chunks[0]!, 2), flipped(fake.chunks[1]!, 4 + 2), [...fake.chunks[2]!]]);
    expect(await ask('wrong-index')).toEqual([[...fake.chunks[1]!], [...fake.chunks[2]!], [...fake.chunks[0]!]]);
    expect(await ask('corrupt-proof')).toEqual(fake.chunks.map((c) => [...c]));
    // The served state itself is never modified.
    expect([...fake.chunks[0]!]).toEqual([0, 1, 1, 3, 10, 11, 12, 0, 1, 2, 3, 20, 21, 22]);
  });

  it('corrupt-value:0.3 lies on about 30 % of Baseline chunks, reproducibly', () => {
    const count = (seed: bigint) => {
      const byz = new Byzantine({ mode: 'corrupt-value', rate: 0.3, seed });
      const lies: number[] = [];
      for (let i = 0; i < 2000; i++) {
        if (byz.decideBaseline({ id: i, kind: BaselineKind.Chunk, root: fake.root, index: 0 }, fake, fake.chunks[0]!) !== undefined) lies.push(i);
      }
      return lies;
    };
    const a = count(5n);
    expect(a.length).toBeGreaterThan(500);
    expect(a.length).toBeLessThan(700);
    expect(count(5n)).toEqual(a);
  });
});

/** A ByteConnection that records when each send arrived. */
class TimedConnection implements ByteConnection {
  readonly label = 'timed';
  events!: ConnectionEvents;
  readonly arrivals: { at: number; bytes: Uint8Array }[] = [];
  closed = false;
  aborted = false;
  attach(events: ConnectionEvents): void {
    this.events = events;
  }
  send(bytes: Uint8Array): void {
    this.arrivals.push({ at: performance.now(), bytes });
  }
  readonly bufferedAmount = 0;
  pause(): void {}
  resume(): void {}
  close(): void {
    this.closed = true;
  }
  abort(): void {
    this.aborted = true;
  }
}

describe('link emulation', () => {
  it('holds each response back a round trip, in order', async () => {
    const inner = new TimedConnection();
    const conn = shapeConnection(inner, { delayMs: 15 });
    conn.attach({ bytes() {}, fault() {}, drain() {}, end() {}, closed() {} });
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) conn.send(Uint8Array.of(i));
    expect(inner.arrivals).toEqual([]);
    await sleep(80);
    expect(inner.arrivals.map((a) => a.bytes[0])).toEqual([0, 1, 2, 3, 4]);
    for (const a of inner.arrivals) expect(a.at - t0).toBeGreaterThanOrEqual(29);
  });

  it('paces a connection to its rate with a token bucket, and reports the backlog as buffered', async () => {
    const inner = new TimedConnection();
    const drains: number[] = [];
    const start = performance.now(); // the bucket fills from here
    // 10 MB/s, 10 kB bucket: 20 × 10 kB = 200 kB leave over ≈ 19 ms (the first 10 kB at once).
    const conn = shapeConnection(inner, { bytesPerSecond: 10e6, burstBytes: 10_000 });
    conn.attach({ bytes() {}, fault() {}, drain: () => drains.push(conn.bufferedAmount), end() {}, closed() {} });
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) conn.send(new Uint8Array(10_000).fill(i));
    // All but the bucket's 10 kB is buffered, less what the rate let out meanwhile (10 bytes a µs: a loaded machine can take a millisecond here).
    expect(conn.bufferedAmount).toBeGreaterThanOrEqual(190_000 - Math.ceil(10 * 1000 * (performance.now() - start)));
    expect(inner.arrivals.length).toBeLessThanOrEqual(1);
    const until = performance.now() + 2000;
    while (inner.arrivals.length < 20 && performance.now() < until) await sleep(2);
    expect(inner.arrivals.map((a) => a.bytes[0])).toEqual([...Array(20).keys()]);
    const took = inner.arrivals.at(-1)!.at - t0;
    expect(took).toBeGreaterThanOrEqual(18);
    expect(took).toBeLessThan(1000);
    expect(conn.bufferedAmount).toBe(0);
    expect(drains.length).toBeGreaterThan(0);
  });

  it('close flushes first; abort drops what is queued', async () => {
    const a = new TimedConnection();
    const ca = shapeConnection(a, { delayMs: 5 });
    ca.attach({ bytes() {}, fault() {}, drain() {}, end() {}, closed() {} });
    ca.send(Uint8Array.of(1));
    ca.close();
    expect(a.closed).toBe(false);
    await sleep(40);
    expect(a.arrivals.length).toBe(1);
    expect(a.closed).toBe(true);

    const b = new TimedConnection();
    const cb = shapeConnection(b, { delayMs: 5 });
    cb.attach({ bytes() {}, fault() {}, drain() {}, end() {}, closed() {} });
    cb.send(Uint8Array.of(1));
    cb.abort();
    await sleep(40);
    expect(b.arrivals.length).toBe(0);
    expect(b.aborted).toBe(true);
  });

  it('a server with a link answers late but correctly', async () => {
    const server = new SyncServer(new StaticTreeSource([snap]), { hook: testnetHook({ link: { delayMs: 20, bytesPerSecond: 25e6 } }) });
    const conn = new MemoryConnection();
    server.handleConnection(conn);
    const t0 = performance.now();
    conn.client.send({ kind: Kind.Chunk, root: snap.root, index: 2 });
    await sleep(5);
    expect(conn.client.responses.length).toBe(0);
    expect(await conn.client.waitResponses(1, 2000)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(39);
    verifyChunk(snap.root, 2, conn.client.responses[0]!.payload);
  });
});

describe('a peer that predates catch-up (--predate-catchup)', () => {
  it('answers the five catch-up kinds BAD_REQUEST and every other kind as before', async () => {
    const server = new SyncServer(new StaticTreeSource([snap]), { hook: testnetHook({ predateCatchUp: true }) });
    const conn = new MemoryConnection();
    server.handleConnection(conn);
    const root = snap.root;
    const top = Uint8Array.of(0);
    const asks = [
      { id: 1, kind: Kind.Nodes, root, path: top, levels: 2 },
      { id: 2, kind: Kind.Leaves, root, path: top },
      { id: 3, kind: Kind.Entries, root, path: top, bitmap: Uint8Array.of(1) },
      { id: 4, kind: Kind.MultiLeaves, root, paths: [top] },
      { id: 5, kind: Kind.MultiEntries, root, chunks: [{ path: top, bitmap: Uint8Array.of(1) }] },
      { id: 6, kind: Kind.Chunk, root, index: 1 },
    ] as const;
    for (const req of asks) conn.events.bytes(encodeFrame(encodeRequest(req)));
    expect(await conn.client.waitResponses(asks.length, 2000)).toBe(true);
    const byId = new Map(conn.client.responses.map((r) => [r.id, r]));
    for (let id = 1; id <= 5; id++) expect(byId.get(id)?.status, `request ${id}`).toBe(Status.BadRequest);
    expect(byId.get(6)?.status).toBe(Status.Ok);
    verifyChunk(root, 1, byId.get(6)!.payload);
    // The same server without the flag serves NODES.
    const honest = new SyncServer(new StaticTreeSource([snap]));
    const c2 = new MemoryConnection();
    honest.handleConnection(c2);
    c2.events.bytes(encodeFrame(encodeRequest(asks[0])));
    expect(await c2.client.waitResponses(1, 2000)).toBe(true);
    expect(c2.client.responses[0]!.status).toBe(Status.Ok);
  });
});

describe('cached chunk envelopes', () => {
  it('serve the same bytes as the snapshot', () => {
    const cached = new CachedTree(snap);
    expect(cached.chunkCount).toBe(snap.chunkCount);
    expect(cached.root).toEqual(snap.root);
    for (let i = 0; i < snap.chunkCount; i++) expect(cached.exportChunk(i)).toEqual(snap.exportChunk(i));
    expect(() => cached.exportChunk(snap.chunkCount)).toThrow(expect.objectContaining({ code: 'CHUNK_OUT_OF_RANGE' }));
  });
});

const baselineBuilt = existsSync(fileURLToPath(new URL('../../baseline-wasm/pkg/bpavl_baseline_wasm_bg.wasm', import.meta.url)));


describe('bpavl-testnet serve: benchmark flags', () => {
  it('usage errors exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['serve', '--file', 'x', '--baseline'], /--baseline needs the workload/],
      [['serve', '--baseline-chunk-bytes', '100'], /needs --baseline/],
      [['serve', '--rate-mb-s', '0'], /--rate-mb-s must be a positive number/],
      [['serve', '--rate-mb-s', 'fast'], /--rate-mb-s must be a positive number/],
      [['serve', '--delay-ms=-1'], /--delay-ms must be a non-negative integer/],
    ];
    for (const [args, message] of cases) {
      const r = await spawnTestnet(args).done;
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
  }, 60_000);

  it('--exit-on-stdin-end stops when stdin closes; the link, cache and predate flags are reported', async () => {
    const p = spawnTestnet(['serve', '--json', '--entries', '300', '--chunk', '32', '--libp2p-port', 'off', '--delay-ms', '5', '--rate-mb-s', '12.5', '--cache-chunks', '--predate-catchup', '--exit-on-stdin-end'], 'pipe');
    const until = Date.now() + 20_000;
    while (!p.stdout().includes('\n') && Date.now() < until) await sleep(20);
    const info = JSON.parse(p.stdout().split('\n')[0]!);
    expect(info.link).toEqual({ delayMs: 5, rttMs: 10, rateMBs: 12.5 });
    expect(info.baseline).toBeNull();
    expect(info.predateCatchUp).toBe(true);
    p.child.stdin!.end();
    expect((await p.done).code).toBe(0);
  }, 60_000);

  it.skipIf(!baselineBuilt)('--baseline serves the Baseline of the same workload (needs npm run build -w @bpavl/baseline-wasm)', async () => {
    // A computed specifier: type-checking the tests must not need pkg/ of @bpavl/baseline-wasm.
    const specifier: string = '@bpavl/baseline-wasm';
    const { init, Importer } = (await import(specifier)) as {
      init(): Promise<void>;
      Importer: new () => { addChunk(chunk: Uint8Array): void; finish(): Uint8Array };
    };
    await init();
    const p = spawnTestnet(['serve', '--json', '--entries', '2000', '--libp2p-port', 'off', '--baseline', '--baseline-chunk-bytes', '50000', '--exit-on-stdin-end'], 'pipe');
    const until = Date.now() + 20_000;
    while (!p.stdout().includes('\n') && Date.now() < until) await sleep(20);
    const info = JSON.parse(p.stdout().split('\n')[0]!);
    expect(info.baseline.chunkCount).toBeGreaterThan(10);
    const root = Uint8Array.from(Buffer.from(info.baseline.root, 'hex'));
    // A raw WebSocket client: the light client's decoder (rightly) knows nothing of kinds 240 and 241.
    const ws = new WebSocket(info.ws);
    ws.binaryType = 'arraybuffer';
    const decoder = new FrameDecoder(MAX_RESPONSE_BYTES);
    const got = new Map<number, BaselineResponse>();
    ws.onmessage = (e) => {
      for (const b of decoder.push(new Uint8Array(e.data as ArrayBuffer))) {
        const r = decodeBaselineResponse(b);
        got.set(r.id, r);
      }
    };
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = reject;
    });
    for (let i = 0; i < info.baseline.chunkCount; i++) ws.send(encodeFrame(encodeBaselineRequest({ id: i, kind: BaselineKind.Chunk, root, index: i })));
    const deadline = Date.now() + 10_000;
    while (got.size < info.baseline.chunkCount && Date.now() < deadline) await sleep(10);
    ws.close();
    const importer = new Importer();
    for (let i = 0; i < info.baseline.chunkCount; i++) {
      expect(got.get(i)?.status).toBe(Status.Ok);
      importer.addChunk(got.get(i)!.payload);
    }
    expect(Buffer.from(importer.finish()).toString('hex')).toBe(info.baseline.root);
    p.child.stdin!.end();
    expect((await p.done).code).toBe(0);
  }, 60_000);
});
