// The byte rules of spec/wire.md, from spec/vectors/wire.json (written by
// hand from the spec): frames fed whole and one byte at a time, request and
// response bodies decoded and re-encoded, PROOF, MULTIPROOF, MULTILEAVES,
// MULTIENTRIES and ROOTS payloads, and every
// invalid case refused with its code.
import { describe, expect, it } from 'vitest';
import {
  decodeProofPayload,
  decodeMultiproofPayload,
  decodeRequest,
  decodeResponse,
  decodeRootsPayload,
  encodeProofPayload,
  encodeMultiproofPayload,
  encodeRequest,
  encodeResponse,
  encodeMultiPayload,
  encodeRootsPayload,
  FrameDecoder,
  multiParts,
  type Request,
  WireError,
} from '../src/wire/index.js';
import { loadVectors } from './vectors.shared.js';

const V = loadVectors('wire');
/** A case of wire.json (fields as spec/vectors/README.md lists them). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Vector = any;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const bytes = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));
const limit = (direction: string): number => (direction === 'request' ? V.limits.request_body : V.limits.response_body);

/** The code `f` throws as a WireError (fails the test if it throws anything else or nothing). */
function wireCode(f: () => unknown): { code: string; request?: unknown } {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(WireError);
    return e as WireError;
  }
  throw new Error('did not throw');
}

/** Every body the decoder yields for `stream`, fed whole or one byte at a time. */
function feed(direction: string, stream: Uint8Array, byByte: boolean): { bodies: string[]; decoder: FrameDecoder } {
  const decoder = new FrameDecoder(limit(direction));
  const bodies: string[] = [];
  const pieces = byByte ? Array.from(stream, (b) => Uint8Array.of(b)) : [stream];
  for (const p of pieces) for (const body of decoder.push(p)) bodies.push(hex(body));
  return { bodies, decoder };
}

/** A vector's request object as `encodeRequest` takes it. */
function asRequest(o: Record<string, unknown>): Request {
  const out: Record<string, unknown> = { ...o };
  for (const k of ['root', 'key', 'start', 'end', 'path', 'bitmap']) if (typeof o[k] === 'string') out[k] = bytes(o[k] as string);
  if (Array.isArray(o.keys)) out.keys = (o.keys as string[]).map(bytes);
  if (Array.isArray(o.paths)) out.paths = (o.paths as string[]).map(bytes);
  if (Array.isArray(o.chunks)) out.chunks = (o.chunks as { path: string; bitmap: string }[]).map((c) => ({ path: bytes(c.path), bitmap: bytes(c.bitmap) }));
  return out as unknown as Request;
}

describe('frames', () => {
  for (const byByte of [false, true]) {
    const how = byByte ? 'one byte at a time' : 'whole';
    it.each<[string, Vector]>(V.frames.valid.map((c: Vector) => [c.description, c]))(`valid, fed ${how}: %s`, (_d, c) => {
      const { bodies, decoder } = feed(c.direction, bytes(c.stream), byByte);
      expect(bodies).toEqual(c.bodies);
      expect(decoder.busy).toBe(c.awaiting !== undefined);
    });
    it.each<[string, Vector]>(V.frames.invalid.map((c: Vector) => [c.why, c]))(`invalid, fed ${how}: %s`, (_why, c) => {
      expect(wireCode(() => feed(c.direction, bytes(c.stream), byByte)).code).toBe(c.code);
    });
  }
});

describe('requests', () => {
  it.each<[string, Vector]>(V.requests.valid.map((c: Vector) => [c.description, c]))('valid: %s', (_d, c) => {
    const got = decodeRequest(bytes(c.body)) as unknown as Record<string, unknown>;
    const show = (v: unknown): unknown =>
      v instanceof Uint8Array ? hex(v) : Array.isArray(v) ? v.map(show) : typeof v === 'object' && v !== null ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, show(x)])) : v;
    const shown = show(got);
    expect(shown).toEqual(c.request);
    expect(hex(encodeRequest(asRequest(c.request)))).toBe(c.body);
  });
  it.each<[string, Vector]>(V.requests.invalid.map((c: Vector) => [c.why, c]))('invalid: %s', (_why, c) => {
    const e = wireCode(() => decodeRequest(bytes(c.body)));
    expect(e.code).toBe(c.code);
    // A request whose id and kind were read is answered BAD_REQUEST; any other closes the connection.
    expect(e.request !== undefined).toBe(c.answerable);
  });
});

describe('responses', () => {
  it.each<[string, Vector]>(V.responses.valid.map((c: Vector) => [c.description, c]))('valid: %s', (_d, c) => {
    const r = decodeResponse(bytes(c.body));
    const want = c.response;
    expect({ kind: r.kind, id: r.id, status: r.status, payload: hex(r.payload) }).toEqual({ kind: want.kind, id: want.id, status: want.status, payload: want.payload });
    expect(hex(encodeResponse({ kind: want.kind, id: want.id, status: want.status }, bytes(want.payload)))).toBe(c.body);
    if (want.proof_payload) {
      const p = decodeProofPayload(r.payload);
      const shown = { present: p.present, ...(p.present ? { value: hex(p.value!) } : {}), proof: hex(p.proof) };
      expect(shown).toEqual(want.proof_payload);
      expect(hex(encodeProofPayload(p))).toBe(want.payload);
    }
    if (want.multiproof_payload) {
      const p = decodeMultiproofPayload(r.payload, want.multiproof_payload.asked);
      expect({ asked: want.multiproof_payload.asked, count: p.count, proof: hex(p.proof) }).toEqual(want.multiproof_payload);
      expect(hex(encodeMultiproofPayload(p))).toBe(want.payload);
    }
    if (want.multi_payload) {
      const parts = [...multiParts(r.payload, want.multi_payload.asked)];
      expect({ asked: want.multi_payload.asked, parts: parts.map(hex) }).toEqual(want.multi_payload);
      expect(hex(encodeMultiPayload(parts))).toBe(want.payload);
    }
    if (want.roots) {
      const roots = decodeRootsPayload(r.payload);
      expect(roots.map((x) => ({ root: hex(x.root), version: x.version, chunk_count: x.chunkCount }))).toEqual(want.roots);
      expect(hex(encodeRootsPayload(roots))).toBe(want.payload);
    }
  });
  it.each<[string, Vector]>(V.responses.invalid.map((c: Vector) => [c.why, c]))('invalid: %s', (_why, c) => {
    const body = bytes(c.body);
    if (c.part === 'response') expect(wireCode(() => decodeResponse(body)).code).toBe(c.code);
    else {
      const { payload } = decodeResponse(body);
      const decode = {
        proof_payload: decodeProofPayload,
        multiproof_payload: (p: Uint8Array) => decodeMultiproofPayload(p, c.asked),
        multi_payload: (p: Uint8Array) => [...multiParts(p, c.asked)],
        roots: decodeRootsPayload,
      }[c.part as string]!;
      expect(wireCode(() => decode(payload)).code).toBe(c.code);
    }
  });
});
