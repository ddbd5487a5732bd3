import { describe, expect, it } from 'vitest';
import {
  decodeProofPayload,
  decodeMultiproofPayload,
  decodeRequest,
  decodeResponse,
  decodeRootsPayload,
  encodeFrame,
  encodeProofPayload,
  encodeRequest,
  encodeResponse,
  encodeResponseFrame,
  encodeRootsPayload,
  FrameDecoder,
  Kind,
  MAX_REQUEST_BYTES,
  type Request,
  Status,
  WireError,
} from '../src/wire/index.js';

const root = new Uint8Array(32).fill(7);
const codeOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    if (e instanceof WireError) return e.code;
    throw e;
  }
  return 'OK';
};

/** A deterministic stream of pseudo-random numbers. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0), s / 2 ** 32);
}

describe('frames', () => {
  it('encodeResponseFrame is encodeFrame(encodeResponse(…)), byte for byte', () => {
    const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
    for (const id of [0, 1, 127, 128, 16_383, 16_384, 2 ** 31, Number.MAX_SAFE_INTEGER]) {
      for (const size of [0, 1, 100, 124, 125, 16_370, 70_000]) {
        const payload = Uint8Array.from({ length: size }, (_, i) => (i * 31) & 0xff);
        for (const status of [Status.Ok, Status.Busy]) {
          const head = { id, kind: Kind.Chunk, status };
          expect(hex(encodeResponseFrame(head, payload))).toBe(hex(encodeFrame(encodeResponse(head, payload))));
        }
      }
    }
    expect(hex(encodeResponseFrame({ id: 9, kind: Kind.Roots, status: Status.UnknownRoot }))).toBe('0401040901');
  });

  it('reassemble across any split', () => {
    const rand = rng(1);
    const bodies = [0, 1, 127, 128, 300, 70_000].map((n) => Uint8Array.from({ length: n }, (_, i) => i & 0xff));
    const stream = new Uint8Array(bodies.reduce((a, b) => a + encodeFrame(b).length, 0));
    let at = 0;
    for (const b of bodies) {
      const f = encodeFrame(b);
      stream.set(f, at);
      at += f.length;
    }
    for (let round = 0; round < 20; round++) {
      const d = new FrameDecoder(100_000);
      const got: Uint8Array[] = [];
      for (let pos = 0; pos < stream.length; ) {
        const n = 1 + Math.floor(rand() * (round % 2 ? 10 : 5000));
        got.push(...d.push(stream.subarray(pos, pos + n)).map((b) => b.slice()));
        pos += n;
      }
      const b64 = (list: Uint8Array[]) => list.map((b) => Buffer.from(b).toString('base64'));
      expect(b64(got)).toEqual(b64(bodies));
      expect(d.busy).toBe(false);
    }
  });

  it('reject oversize, over-long and non-minimal prefixes before the body', () => {
    expect(codeOf(() => new FrameDecoder(MAX_REQUEST_BYTES).push(encodeFrame(new Uint8Array(4097))))).toBe(
      'FRAME_TOO_LARGE',
    );
    expect(codeOf(() => new FrameDecoder(1 << 30).push(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x01)))).toBe(
      'FRAME_MALFORMED',
    );
    expect(codeOf(() => new FrameDecoder(100).push(Uint8Array.of(0x81, 0x00)))).toBe('FRAME_MALFORMED');
    // A huge declared length fails on the prefix alone, with no body sent.
    expect(codeOf(() => new FrameDecoder(8 << 20).push(Uint8Array.of(0xff, 0xff, 0xff, 0x7f)))).toBe(
      'FRAME_TOO_LARGE',
    );
  });
});

describe('messages', () => {
  const requests: Request[] = [
    { id: 0, kind: Kind.Chunk, root, index: 12345 },
    { id: 1, kind: Kind.Proof, root, key: Uint8Array.of(1, 2, 3) },
    { id: 2, kind: Kind.Range, root, start: new Uint8Array(0), limit: 10 },
    { id: 3, kind: Kind.Range, root, start: Uint8Array.of(5), end: Uint8Array.of(9), limit: 65536 },
    { id: 2 ** 40, kind: Kind.Roots },
    { id: 6, kind: Kind.Multiproof, root, keys: [Uint8Array.of(1), Uint8Array.of(1, 0), Uint8Array.of(2)] },
  ];

  it('requests round-trip', () => {
    for (const req of requests) expect(decodeRequest(encodeRequest(req))).toEqual(req);
  });

  it('malformed requests are rejected with the id when it parsed', () => {
    const good = encodeRequest(requests[0]!);
    const bad = (bytes: Uint8Array) => {
      try {
        decodeRequest(bytes);
      } catch (e) {
        if (!(e instanceof WireError)) throw e;
        return [e.code, e.request?.id];
      }
      return ['OK'];
    };
    expect(bad(good.subarray(0, good.length - 1))).toEqual(['MESSAGE_MALFORMED', 0]);
    expect(bad(Uint8Array.of(...good, 0))).toEqual(['MESSAGE_MALFORMED', 0]);
    expect(bad(Uint8Array.of(2, ...good.subarray(1)))).toEqual(['VERSION_UNSUPPORTED', 0]);
    expect(bad(Uint8Array.of(1, 9, 5))).toEqual(['MESSAGE_MALFORMED', 5]);
    expect(bad(new Uint8Array(0))).toEqual(['MESSAGE_MALFORMED', undefined]);
    const limit0 = encodeRequest({ id: 4, kind: Kind.Range, root, start: new Uint8Array(0), limit: 1 });
    limit0[limit0.length - 1] = 0;
    expect(bad(limit0)).toEqual(['MESSAGE_MALFORMED', 4]);
    const emptyKey = encodeRequest({ id: 5, kind: Kind.Proof, root, key: Uint8Array.of(1) }).subarray(0, 35);
    expect(bad(Uint8Array.of(...emptyKey, 0))).toEqual(['MESSAGE_MALFORMED', 5]);
  });

  it('responses round-trip and error statuses carry nothing', () => {
    const payload = Uint8Array.of(5, 1, 2);
    expect(decodeResponse(encodeResponse({ id: 9, kind: Kind.Chunk, status: Status.Ok }, payload))).toEqual({
      id: 9,
      kind: Kind.Chunk,
      status: Status.Ok,
      payload,
    });
    const busy = encodeResponse({ id: 9, kind: Kind.Chunk, status: Status.Busy }, payload);
    expect(decodeResponse(busy).payload.length).toBe(0);
    expect(codeOf(() => decodeResponse(Uint8Array.of(...busy, 1)))).toBe('MESSAGE_MALFORMED');
    expect(codeOf(() => decodeResponse(Uint8Array.of(1, 1, 9, 5)))).toBe('MESSAGE_MALFORMED');
    expect(codeOf(() => decodeResponse(Uint8Array.of(3, 1, 9, 0)))).toBe('VERSION_UNSUPPORTED');
  });

  it('proof and roots payloads round-trip', () => {
    const present = { present: true, value: Uint8Array.of(1), proof: Uint8Array.of(1, 2) };
    expect(decodeProofPayload(encodeProofPayload(present))).toEqual(present);
    const absent = { present: false, proof: Uint8Array.of(2, 2) };
    expect(decodeProofPayload(encodeProofPayload(absent))).toEqual(absent);
    const roots = [{ root, version: 3, chunkCount: 541 }];
    expect(decodeRootsPayload(encodeRootsPayload(roots))).toEqual(roots);
    expect(codeOf(() => decodeRootsPayload(Uint8Array.of(2)))).toBe('MESSAGE_MALFORMED');
  });
});

describe('MULTIPROOF answers from @bpavl/wasm (Snapshot.proveMulti, multiproofFromProofs)', () => {
  const utf8 = (s: string) => new TextEncoder().encode(s);
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  const key = (i: number) => utf8(`key-${String(i).padStart(6, '0')}`);

  it('proves the first k keys: every key when it fits, else the most that fit; the same from single proofs; keys checked', async () => {
    const wasm = await import('@bpavl/wasm');
    await wasm.init();
    const tree = new wasm.Tree(8);
    for (let i = 0; i < 1500; i += 2) tree.insert(key(i), utf8(`value-${i}`.repeat(1 + (i % 5))));
    const { root: r } = tree.commit();
    const snap = tree.head();
    const asked = [key(4), key(7), ...Array.from({ length: 40 }, (_, i) => key(100 + i * 25)), key(1498), key(1499)];
    const whole = snap.proveMulti(asked, 8 << 20);
    const all = decodeMultiproofPayload(whole, asked.length);
    expect(all.count).toBe(asked.length);
    expect(wasm.verifyMultiproof(r, asked, all.proof).values).toEqual(asked.map((k) => snap.get(k)));
    // From each key's single proof, as a store builds it: the same bytes.
    const values = asked.map((k) => snap.get(k));
    const proofs = asked.map((k, i) => (values[i] === undefined ? snap.proveAbsence(k) : snap.proveExistence(k)));
    expect(hex(wasm.multiproofFromProofs(asked, values, proofs, 8 << 20))).toBe(hex(whole));
    // Cut: the multiproof of the first keys that fit, and always of the first.
    const half = snap.proveMulti(asked, Math.floor(whole.length / 2));
    const cut = decodeMultiproofPayload(half, asked.length);
    expect(half.length).toBeLessThanOrEqual(Math.floor(whole.length / 2));
    expect(cut.count).toBeGreaterThan(1);
    expect(cut.count).toBeLessThan(asked.length);
    expect(wasm.verifyMultiproof(r, asked.slice(0, cut.count), cut.proof).values).toEqual(values.slice(0, cut.count));
    expect(decodeMultiproofPayload(snap.proveMulti(asked, 1), asked.length).count).toBe(1);
    // Keys are checked as any key argument.
    expect(() => snap.proveMulti([key(1), new Uint8Array(0)], 8 << 20)).toThrow(expect.objectContaining({ code: 'KEY_EMPTY' }));
    expect(() => snap.proveMulti([key(1), 'key' as unknown as Uint8Array], 8 << 20)).toThrow(TypeError);
    tree.free();
  });
});
