// SyncServer unit tests over an in-memory ByteConnection: framing faults,
// limits, backpressure, idle and half-close handling, internal errors.

import {
  decodeMultiproofPayload,
  decodeProofPayload,
  encodeFrame,
  encodeRequest,
  Kind,
  MAX_REQUEST_BYTES,
  MAX_RESPONSE_BYTES,
  type Request,
  Status,
} from '@bpavl/light-client/wire';
import { verifyChunk, verifyMultiproof, verifyRange } from '@bpavl/light-client/verify';
import { type Snapshot, Tree } from '@bpavl/wasm';
import { beforeAll, describe, expect, it } from 'vitest';
import { OUTPUT_HIGH_WATER_BYTES } from '../src/constants.ts';
import { SyncServer } from '../src/server.ts';
import { type ServedTree, StaticTreeSource, type StoredTree } from '../src/source.ts';
import { loadVectors } from '../../light-client/test/vectors.shared.ts';
import { bigValueTree, MemoryConnection, sleep, smallTree, wasmReady } from './support.ts';

let snap: Snapshot;
let big: Snapshot;

beforeAll(async () => {
  await wasmReady();
  snap = smallTree(200, 16).tree.head();
  big = smallTree(3000, 256).tree.head(); // chunks of ≈ 70 … 140 KB
});

function serve(opts: ConstructorParameters<typeof SyncServer>[1] = {}, tree: ServedTree | StoredTree = snap) {
  const server = new SyncServer(new StaticTreeSource([tree]), opts);
  const conn = new MemoryConnection();
  server.handleConnection(conn);
  return { server, conn, c: conn.client };
}

const frame = (req: Request) => encodeFrame(encodeRequest(req));

describe('framing faults close the connection', () => {
  const cases: [string, number[]][] = [
    ['a non-minimal length prefix', [0x80, 0x00]],
    ['a length prefix longer than 4 bytes', [0xff, 0xff, 0xff, 0xff, 0x7f]],
    ['a length prefix above 4 KiB (before the body arrives)', [0x81, 0x20]], // 4097
    ['an empty body (no header to answer)', [0x00]],
    ['a one-byte body (no kind, no id)', [0x01, 0x01]],
    ['a body whose id varint is cut', [0x03, 0x01, 0x01, 0x80]],
  ];
  it.each(cases)('%s', async (_name, bytes) => {
    const { server, conn } = serve();
    conn.events.bytes(Uint8Array.from(bytes));
    expect(conn.aborted).toBe(true);
    expect(server.stats.faults).toBe(1);
    expect(server.connectionCount).toBe(0);
    expect(conn.sent.length).toBe(0);
  });

  it('a non-binary message', () => {
    const { server, conn } = serve();
    conn.events.fault();
    expect(conn.aborted).toBe(true);
    expect(server.stats.faults).toBe(1);
  });

  it('a 4096-byte body is a request (answered), 4097 is a fault', async () => {
    const { conn, c } = serve();
    const body = new Uint8Array(MAX_REQUEST_BYTES);
    body.set([1, Kind.Roots, 9]); // valid header, then trailing garbage
    conn.events.bytes(encodeFrame(body));
    await sleep(0);
    expect(c.responses).toMatchObject([{ id: 9, status: Status.BadRequest }]);
    expect(conn.aborted).toBe(false);
    conn.events.bytes(encodeFrame(new Uint8Array(MAX_REQUEST_BYTES + 1)));
    expect(conn.aborted).toBe(true);
  });

  it('frames split at every byte are reassembled', async () => {
    const { conn, c } = serve();
    const bytes = new Uint8Array([...frame({ id: 1, kind: Kind.Roots }), ...frame({ id: 2, kind: Kind.Chunk, root: snap.root, index: 3 })]);
    for (const b of bytes) conn.events.bytes(Uint8Array.of(b));
    expect(await c.waitResponses(2, 2000)).toBe(true);
    verifyChunk(snap.root, 3, (await c.response(2)).payload);
  });
});

// The byte rules of spec/vectors/wire.json on the server's side of a connection.
/** A case of spec/vectors/wire.json (fields as its README lists them). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Vector = any;

describe('spec/vectors/wire.json against the server', () => {
  const V = loadVectors('wire');
  const bytes = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));

  it.each<[string, Vector]>(V.frames.invalid.filter((c: { direction: string }) => c.direction === 'request').map((c: Vector) => [c.why, c]))(
    'an invalid request frame closes the connection: %s',
    (_why, c) => {
      const { conn } = serve();
      conn.events.bytes(bytes(c.stream));
      expect(conn.aborted).toBe(true);
      expect(conn.sent).toEqual([]);
    },
  );

  it.each<[string, Vector]>(V.requests.invalid.map((c: Vector) => [c.why, c]))('an invalid request body: %s', async (_why, c) => {
    const { conn } = serve();
    const body = bytes(c.body);
    conn.events.bytes(encodeFrame(body));
    await sleep(0);
    if (c.answerable) {
      // BAD_REQUEST, version 1, echoing the request's kind and id (the bytes after the version byte, up to the status).
      const head = body.subarray(1, 2 + idLength(body));
      expect(conn.sent.map((f) => [...f])).toEqual([[head.length + 2, 1, ...head, Status.BadRequest]]);
      expect(conn.aborted).toBe(false);
    } else expect(conn.aborted).toBe(true);
  });
});

/** Bytes of the id varint that starts at offset 2 of a request body. */
function idLength(body: Uint8Array): number {
  let n = 1;
  while (body[1 + n]! & 0x80) n++;
  return n;
}

describe('answers', () => {
  it('an unknown kind is answered BAD_REQUEST echoing the kind, version 1', async () => {
    const { conn } = serve();
    conn.events.bytes(encodeFrame(Uint8Array.of(1, 9, 5)));
    conn.events.bytes(encodeFrame(Uint8Array.of(7, Kind.Roots, 6)));
    // Raw bytes: the client decoder would (rightly) reject kind 9.
    expect(conn.sent.map((f) => [...f])).toEqual([
      [4, 1, 9, 5, Status.BadRequest],
      [4, 1, Kind.Roots, 6, Status.BadRequest],
    ]);
  });

  it('an unexpected exception while answering is BUSY, never text, never a crash', async () => {
    const broken: ServedTree = {
      root: snap.root,
      version: 1,
      chunkCount: 5,
      exportChunk() {
        throw new Error('secret internal detail');
      },
      get() {
        throw new TypeError('boom');
      },
      proveExistence: () => new Uint8Array(0),
      proveAbsence: () => new Uint8Array(0),
      proveRange() {
        throw 'a string';
      },
      proveMulti() {
        throw new RangeError('boom');
      },
    };
    const logs: string[] = [];
    const { server, conn, c } = serve({ log: (m) => logs.push(m) }, broken);
    c.send({ kind: Kind.Chunk, root: snap.root, index: 1 });
    c.send({ kind: Kind.Proof, root: snap.root, key: Uint8Array.of(1) });
    c.send({ kind: Kind.Range, root: snap.root, start: new Uint8Array(0), limit: 3 });
    c.send({ kind: Kind.Multiproof, root: snap.root, keys: [Uint8Array.of(1)] });
    expect(await c.waitResponses(4, 2000)).toBe(true);
    expect(c.responses.map((r) => r.status)).toEqual([Status.Busy, Status.Busy, Status.Busy, Status.Busy]);
    expect(c.responses.every((r) => r.payload.length === 0)).toBe(true);
    const wire = Buffer.concat(conn.sent).toString('latin1');
    expect(wire).not.toContain('secret');
    expect(server.stats.internalErrors).toBe(4);
    expect(logs.join('\n')).toContain('secret internal detail'); // logged locally only
    expect(conn.closed).toBe(false);
  });

  it('a RANGE answer above the 8 MiB response limit is cut to fit: an incomplete proof with a resume key', async () => {
    const tree = bigValueTree(1).head();
    const { c } = serve({}, tree);
    const r = await c.request({ kind: Kind.Range, root: tree.root, start: new Uint8Array(0), limit: 65536 });
    expect(r.status).toBe(Status.Ok);
    expect(r.payload.length).toBeLessThanOrEqual(MAX_RESPONSE_BYTES - 11);
    // spec/wire.md: the client verifies a cut answer with limit = the results it carries.
    let verified: ReturnType<typeof verifyRange> | undefined;
    for (let k = 128; k >= 1 && verified === undefined; k--) {
      try {
        verified = verifyRange(tree.root, new Uint8Array(0), undefined, k, r.payload);
      } catch {
        // not this k
      }
    }
    expect(verified?.complete).toBe(false);
    expect(verified!.entries.length).toBeGreaterThan(64);
    expect(verified!.resumeKey).toEqual(Uint8Array.of(1, verified!.entries.length));
  });

  /** `tree` as a version read from storage: every answer asynchronous, as `bpavl serve --db` serves it. */
  const stored = (tree: Snapshot): StoredTree => ({
    stored: true,
    root: tree.root,
    version: tree.version,
    chunkCount: tree.chunkCount,
    exportChunk: async (i) => tree.exportChunk(i),
    prove: async (key) => {
      const value = tree.get(key);
      return { value, proof: value === undefined ? tree.proveAbsence(key) : tree.proveExistence(key) };
    },
    proveRange: async (start, end, limit) => tree.proveRange(start, end, limit),
  });

  it.each([
    ['in memory', (t: Snapshot): ServedTree | StoredTree => t],
    ['from storage', stored],
  ])('MULTIPROOF (%s): one multiproof of every asked key, present and absent, equal from memory and storage', async (_how, as) => {
    const present = decodeRangeKeys(snap);
    const asked = [Uint8Array.of(0), present[0]!, Uint8Array.of(...present[9]!, 1), present[57]!, Uint8Array.of(0xff, 0xff)];
    const { c } = serve({}, as(snap));
    const r = await c.request({ kind: Kind.Multiproof, root: snap.root, keys: asked });
    expect(r.status).toBe(Status.Ok);
    const { count, proof } = decodeMultiproofPayload(r.payload, asked.length);
    expect(count).toBe(asked.length);
    expect(verifyMultiproof(snap.root, asked, proof).values).toEqual(asked.map((k) => snap.get(k)));
    expect(Buffer.from(r.payload).equals(Buffer.from(snap.proveMulti(asked, MAX_RESPONSE_BYTES - 11)))).toBe(true);
  });

  it.each([
    ['in memory', (t: Snapshot): ServedTree | StoredTree => t],
    ['from storage', stored],
  ])('a CHUNK whose envelope does not fit the response limit (%s) is BAD_REQUEST, never an oversize frame', async (_how, as) => {
    const tree = new Tree(256);
    const value = new Uint8Array(65536).fill(9);
    for (let i = 0; i < 150; i++) tree.insert(Uint8Array.of(i), value); // one chunk of about 9.8 MB
    tree.commit();
    const big = tree.head();
    expect(big.chunkCount).toBe(1);
    expect(big.exportChunk(0).length).toBeGreaterThan(MAX_RESPONSE_BYTES);
    const { c } = serve({}, as(big));
    expect((await c.request({ kind: Kind.Chunk, root: big.root, index: 0 })).status).toBe(Status.BadRequest);
    tree.free();
  });

  it('MULTIPROOF whose keys are not strictly increasing is BAD_REQUEST', async () => {
    const { c } = serve({}, snap);
    const r = await c.request({ kind: Kind.Multiproof, root: snap.root, keys: [Uint8Array.of(2), Uint8Array.of(1)] });
    expect(r.status).toBe(Status.BadRequest);
    const again = await c.request({ kind: Kind.Multiproof, root: snap.root, keys: [Uint8Array.of(2), Uint8Array.of(2)] });
    expect(again.status).toBe(Status.BadRequest);
  });

  it.each([
    ['in memory', (t: Snapshot): ServedTree | StoredTree => t],
    ['from storage', stored],
  ])('MULTIPROOF (%s) above the 8 MiB response limit proves the most first keys that fit', async (_how, as) => {
    const tree = bigValueTree(1).head();
    const keys = Array.from({ length: 200 }, (_, i) => Uint8Array.of(1, i));
    const { c } = serve({}, as(tree));
    const r = await c.request({ kind: Kind.Multiproof, root: tree.root, keys });
    expect(r.status).toBe(Status.Ok);
    expect(r.payload.length).toBeLessThanOrEqual(MAX_RESPONSE_BYTES - 11);
    const { count, proof } = decodeMultiproofPayload(r.payload, keys.length);
    expect(count).toBeGreaterThan(100); // 8 MiB holds about 127 entries of 64 KiB values
    expect(count).toBeLessThan(keys.length);
    const same = (a: Uint8Array | undefined, b: Uint8Array | undefined) => a !== undefined && b !== undefined && Buffer.compare(a, b) === 0;
    const { values } = verifyMultiproof(tree.root, keys.slice(0, count), proof);
    expect(values.every((v, i) => same(v, tree.get(keys[i]!)))).toBe(true); // (toEqual on 8 MiB of typed arrays takes seconds)
    // The next key did not fit: its multiproof is over the limit.
    expect(tree.proveMulti(keys.slice(0, count + 1), 1 << 30).length).toBeGreaterThan(MAX_RESPONSE_BYTES - 11);
  });
});

/** Every key of `tree`, in key order. */
function decodeRangeKeys(tree: Snapshot): Uint8Array[] {
  return verifyRange(tree.root, new Uint8Array(0), undefined, 65536, tree.proveRange(new Uint8Array(0), undefined, 65536)).entries.map(([k]) => k);
}

describe('limits and lifecycle', () => {
  it.each([
    ['maxConnections 0', { maxConnections: 0 }],
    ['maxConnections NaN', { maxConnections: NaN }],
    ['idleTimeoutMs 0', { idleTimeoutMs: 0 }],
    ['idleTimeoutMs 2^31 (a timer would fire at once)', { idleTimeoutMs: 2 ** 31 }],
    ['maxInFlight 0', { maxInFlight: 0 }],
    ['maxInFlight 65 (spec/wire.md allows 64)', { maxInFlight: 65 }],
    ['memoryBudget 8 MiB', { memoryBudget: 8 << 20 }],
  ])('a bad limit is a RangeError: %s', (_name, options) => {
    expect(() => new SyncServer(new StaticTreeSource([snap]), options)).toThrow(RangeError);
  });

  it('at maxConnections, a new connection evicts the longest-idle one with nothing in flight', async () => {
    const server = new SyncServer(new StaticTreeSource([snap]), { maxConnections: 2 });
    const conns = [new MemoryConnection(), new MemoryConnection()];
    for (const conn of conns) expect(server.handleConnection(conn)).toBe(true);
    await sleep(5);
    conns[0]!.client.send({ kind: Kind.Roots }); // conns[0] active, answered: conns[1] is now the idlest
    expect(await conns[0]!.client.waitResponses(1, 2000)).toBe(true);
    const third = new MemoryConnection();
    expect(server.handleConnection(third)).toBe(true);
    expect(conns.map((c) => c.aborted)).toEqual([false, true]);
    expect(server.stats.evicted).toBe(1);
    expect((await third.client.request({ kind: Kind.Roots })).status).toBe(Status.Ok);
  });

  it('at maxConnections with every connection waiting for answers, a new one is refused', () => {
    // A hook that holds every answer: each connection keeps a request in flight.
    const hold = { reply: () => ({ kind: 'delay', ms: 60_000, reply: { kind: 'drop' } }) as const };
    const server = new SyncServer(new StaticTreeSource([snap]), { maxConnections: 2, hook: hold });
    const conns = [new MemoryConnection(), new MemoryConnection()];
    for (const conn of conns) {
      server.handleConnection(conn);
      conn.client.send({ kind: Kind.Roots });
    }
    const third = new MemoryConnection();
    expect(server.handleConnection(third)).toBe(false);
    expect(third.aborted).toBe(true);
    expect(server.stats.refused).toBe(1);
    server.close();
  });

  it('closes an idle connection', async () => {
    const { server, conn, c } = serve({ idleTimeoutMs: 150 });
    await c.request({ kind: Kind.Roots });
    await sleep(100);
    await c.request({ kind: Kind.Roots }); // activity resets the timer
    await sleep(100);
    expect(conn.aborted).toBe(false);
    await sleep(200);
    expect(conn.aborted).toBe(true);
    expect(server.stats.idleClosed).toBe(1);
  });

  it('after a remote half-close, answers what is in flight and then closes', async () => {
    const { conn, c } = serve();
    for (let index = 0; index < 10; index++) c.send({ kind: Kind.Chunk, root: snap.root, index });
    conn.events.end();
    expect(conn.closed).toBe(false);
    expect(await c.waitClosed(2000)).toBe(true);
    expect(c.responses.length).toBe(10);
    expect(conn.aborted).toBe(false);
  });

  it('stops reading and answering while output is not drained, then resumes', async () => {
    const { conn, c } = serve({}, big);
    conn.autoFlush = false; // the remote does not read
    const n = big.chunkCount;
    for (let i = 0; i < 64; i++) c.send({ kind: Kind.Chunk, root: big.root, index: i % n });
    await sleep(50);
    expect(conn.paused).toBe(true);
    // At most the high-water mark plus one answer (≤ 140 KB) was handed out.
    expect(conn.bufferedAmount).toBeGreaterThan(OUTPUT_HIGH_WATER_BYTES);
    expect(conn.bufferedAmount).toBeLessThan(OUTPUT_HIGH_WATER_BYTES + 200_000);
    const answered = c.responses.length;
    expect(answered).toBeLessThan(64);
    // While stalled, requests still count: once 64 are in flight, the rest are BUSY.
    for (let i = 0; i < answered + 10; i++) c.send({ kind: Kind.Chunk, root: big.root, index: 0 });
    await sleep(50);
    expect(c.responses.length).toBe(answered + 10);
    expect(c.responses.slice(answered).every((r) => r.status === Status.Busy)).toBe(true);
    // The remote reads: everything in flight is answered.
    conn.autoFlush = true;
    conn.flush();
    expect(await c.waitResponses(64 + answered + 10, 5000)).toBe(true);
    expect(conn.paused).toBe(false);
    expect(c.responses.filter((r) => r.status === Status.Ok).length).toBe(64 + answered);
  });

  it('close() aborts every connection and refuses new ones', () => {
    const server = new SyncServer(new StaticTreeSource([snap]));
    const a = new MemoryConnection();
    server.handleConnection(a);
    server.close();
    expect(a.aborted).toBe(true);
    expect(server.handleConnection(new MemoryConnection())).toBe(false);
  });

});

/** A version "read from storage": `snap`'s answers, each after the test releases it. */
class SlowStoredTree implements StoredTree {
  readonly stored = true;
  readonly root = snap.root;
  readonly version = snap.version;
  readonly chunkCount = snap.chunkCount;
  building = 0;
  maxBuilding = 0;
  readonly #waiting: (() => void)[] = [];
  fail: unknown;

  /** Lets the oldest waiting answer go on. */
  release(): boolean {
    this.#waiting.shift()?.();
    return this.#waiting.length > 0;
  }

  async #answer<T>(make: () => T): Promise<T> {
    this.maxBuilding = Math.max(this.maxBuilding, ++this.building);
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.building--;
    if (this.fail !== undefined) throw this.fail;
    return make();
  }

  exportChunk(index: number): Promise<Uint8Array> {
    return this.#answer(() => snap.exportChunk(index));
  }
  prove(key: Uint8Array): Promise<{ value: Uint8Array | undefined; proof: Uint8Array }> {
    return this.#answer(() => {
      const value = snap.get(key);
      return { value, proof: value === undefined ? snap.proveAbsence(key) : snap.proveExistence(key) };
    });
  }
  proveRange(start: Uint8Array, end: Uint8Array | undefined, limit: number): Promise<Uint8Array> {
    return this.#answer(() => snap.proveRange(start, end, limit));
  }
}

/** Releases `tree`'s answers one at a time until `done` holds or 2 s pass. */
async function releaseUntil(tree: SlowStoredTree, done: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) {
    tree.release();
    await sleep(1);
  }
}

describe('versions read from storage (StoredTree)', () => {
  it('are answered one request at a time per connection, in order, and verify', async () => {
    const tree = new SlowStoredTree();
    const { conn, c } = serve({}, tree);
    const ids = [
      c.send({ kind: Kind.Chunk, root: snap.root, index: 2 }),
      c.send({ kind: Kind.Proof, root: snap.root, key: new Uint8Array([1, 2, 3]) }),
      c.send({ kind: Kind.Range, root: snap.root, start: new Uint8Array(), limit: 40 }),
      c.send({ kind: Kind.Chunk, root: snap.root, index: snap.chunkCount }),
      c.send({ kind: Kind.Roots }),
    ];
    await sleep(5);
    expect(c.responses).toEqual([]);
    await releaseUntil(tree, () => c.responses.length === ids.length);
    expect(c.responses.map((r) => r.id)).toEqual(ids);
    expect(c.responses.map((r) => r.status)).toEqual([Status.Ok, Status.Ok, Status.Ok, Status.OutOfRange, Status.Ok]);
    verifyChunk(snap.root, 2, c.responses[0]!.payload!);
    expect(decodeProofPayload(c.responses[1]!.payload!).present).toBe(false);
    expect(verifyRange(snap.root, new Uint8Array(), undefined, 40, c.responses[2]!.payload!).entries.length).toBe(40);
    expect(tree.maxBuilding).toBe(1);
    expect(conn.aborted).toBe(false);
  });

  it('a failed read is BUSY (logged), a refused key BAD_REQUEST, a missing chunk OUT_OF_RANGE', async () => {
    const tree = new SlowStoredTree();
    const logged: string[] = [];
    const { server, c } = serve({ log: (m) => logged.push(m) }, tree);
    for (const [code, status] of [
      ['STORE_CORRUPT', Status.Busy],
      ['KEY_TOO_LONG', Status.BadRequest],
      ['CHUNK_OUT_OF_RANGE', Status.OutOfRange],
    ] as const) {
      tree.fail = Object.assign(new Error(code), { code });
      const id = c.send({ kind: Kind.Chunk, root: snap.root, index: 0 });
      await releaseUntil(tree, () => c.responses.some((r) => r.id === id));
      expect((await c.response(id)).status).toBe(status);
    }
    expect(server.stats.internalErrors).toBe(1);
    expect(logged.join('\n')).toContain('STORE_CORRUPT');
  });

  it('an answer being built counts as a maximal one against the memory budget', async () => {
    const tree = new SlowStoredTree();
    const server = new SyncServer(new StaticTreeSource([tree]), { memoryBudget: 2 * MAX_RESPONSE_BYTES });
    const conns = Array.from({ length: 4 }, () => {
      const conn = new MemoryConnection();
      server.handleConnection(conn);
      return conn;
    });
    const ids = conns.map((conn) => conn.client.send({ kind: Kind.Chunk, root: snap.root, index: 1 }));
    await sleep(5);
    expect(tree.building).toBe(2); // each counted as 8 MiB: a third would not fit the 16 MiB budget
    await releaseUntil(tree, () => conns.every((conn, i) => conn.client.responses.some((r) => r.id === ids[i])));
    for (const conn of conns) verifyChunk(snap.root, 1, conn.client.responses[0]!.payload!);
    expect(tree.maxBuilding).toBe(2);
    expect(server.stats.answerBytes).toBe(0);
  });
});
