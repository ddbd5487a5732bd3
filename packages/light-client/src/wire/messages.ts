/**
 * Request and response messages of `spec/wire.md` (the frame bodies).
 * Decoders never trust a peer: anything off-spec throws `WireError`.
 * @module
 */

import { compareBytes, encodeVarint, Reader } from '../codec.js';
import { HASH_LEN, MAX_KEY_LEN, MAX_RANGE_LIMIT } from '../constants.js';
import { isProofError } from '../errors.js';
import { Kind, MAX_BITMAP_BYTES, MAX_MULTI_CHUNKS, MAX_MULTIPROOF_REQUEST_KEYS, MAX_NODES_LEVELS, MAX_PATH_DEPTH, Status, WIRE_VERSION } from './constants.js';
import { WireError } from './errors.js';

/** A request a client sends (`spec/wire.md`, "Requests"). */
export type Request =
  | { id: number; kind: typeof Kind.Chunk; root: Uint8Array; index: number }
  | { id: number; kind: typeof Kind.Proof; root: Uint8Array; key: Uint8Array }
  | { id: number; kind: typeof Kind.Range; root: Uint8Array; start: Uint8Array; end?: Uint8Array; limit: number }
  | { id: number; kind: typeof Kind.Roots }
  | { id: number; kind: typeof Kind.Multiproof; root: Uint8Array; keys: readonly Uint8Array[] }
  /** Catch-up (`spec/wire.md`, "Catch-up"): `path` is an encoded tree path (`depth u8 ‖ turns`). */
  | { id: number; kind: typeof Kind.Nodes; root: Uint8Array; path: Uint8Array; levels: number }
  | { id: number; kind: typeof Kind.Leaves; root: Uint8Array; path: Uint8Array }
  | { id: number; kind: typeof Kind.Entries; root: Uint8Array; path: Uint8Array; bitmap: Uint8Array }
  /** Several chunks' `LEAVES` (`ENTRIES`) in one frame, in the order asked. */
  | { id: number; kind: typeof Kind.MultiLeaves; root: Uint8Array; paths: readonly Uint8Array[] }
  | { id: number; kind: typeof Kind.MultiEntries; root: Uint8Array; chunks: readonly ChunkBitmap[] };

/** A chunk and the positions of it that a `MULTIENTRIES` request asks for. */
export interface ChunkBitmap {
  path: Uint8Array;
  bitmap: Uint8Array;
}

/** A response's header and its kind-specific payload (the rest of the frame). */
export interface Response {
  id: number;
  kind: Kind;
  status: Status;
  /** Empty unless `status` is OK. */
  payload: Uint8Array;
}

/** One root a peer offers (`ROOTS`); a hint, never trusted. */
export interface RootInfo {
  root: Uint8Array;
  version: number;
  chunkCount: number;
}

/** A `PROOF` payload: the value if the key is present, and the proof. */
export interface ProofPayload {
  present: boolean;
  value?: Uint8Array;
  proof: Uint8Array;
}

class Writer {
  private parts: Uint8Array[] = [];
  private size = 0;
  push(bytes: Uint8Array): this {
    this.parts.push(bytes);
    this.size += bytes.length;
    return this;
  }
  u8(v: number): this {
    return this.push(Uint8Array.of(v));
  }
  varint(v: number): this {
    return this.push(encodeVarint(v));
  }
  bytes(b: Uint8Array): this {
    return this.varint(b.length).push(b);
  }
  finish(): Uint8Array {
    const out = new Uint8Array(this.size);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/**
 * Encodes a request body.
 *
 * @example
 * ```ts
 * const body = encodeRequest({ id: 7, kind: Kind.Chunk, root, index: 3 });
 * ```
 */
export function encodeRequest(req: Request): Uint8Array {
  const w = new Writer().u8(WIRE_VERSION).u8(req.kind).varint(req.id);
  switch (req.kind) {
    case Kind.Chunk:
      return w.push(req.root).varint(req.index).finish();
    case Kind.Proof:
      return w.push(req.root).bytes(req.key).finish();
    case Kind.Range:
      w.push(req.root).bytes(req.start).u8(req.end ? 1 : 0);
      if (req.end) w.bytes(req.end);
      return w.varint(req.limit).finish();
    case Kind.Roots:
      return w.finish();
    case Kind.Multiproof:
      w.push(req.root).varint(req.keys.length);
      for (const k of req.keys) w.bytes(k);
      return w.finish();
    case Kind.Nodes:
      return w.push(req.root).push(req.path).u8(req.levels).finish();
    case Kind.Leaves:
      return w.push(req.root).push(req.path).finish();
    case Kind.Entries:
      return w.push(req.root).push(req.path).bytes(req.bitmap).finish();
    case Kind.MultiLeaves:
      w.push(req.root).varint(req.paths.length);
      for (const p of req.paths) w.push(p);
      return w.finish();
    case Kind.MultiEntries:
      w.push(req.root).varint(req.chunks.length);
      for (const c of req.chunks) w.push(c.path).bytes(c.bitmap);
      return w.finish();
  }
}

/** Runs `f`, turning any decoding failure into `MESSAGE_MALFORMED`. */
function parse<T>(f: () => T, request?: { id: number; kind: number }): T {
  try {
    return f();
  } catch (e) {
    if (isProofError(e)) throw new WireError('MESSAGE_MALFORMED', `malformed message (${e.code})`, request);
    throw e;
  }
}

function isKind(k: number): k is Kind {
  return (k >= Kind.Chunk && k <= Kind.Roots) || (k >= Kind.Multiproof && k <= Kind.MultiEntries);
}

/**
 * An encoded tree path (`spec/wire.md`, "Catch-up"): `depth u8` (≤ 48),
 * then ⌈depth/8⌉ bytes of turns, unused bits zero. Returned as its bytes.
 */
function treePath(r: Reader, header: { id: number; kind: number }): Uint8Array {
  const start = r.pos;
  const depth = r.u8();
  if (depth > MAX_PATH_DEPTH) throw new WireError('MESSAGE_MALFORMED', 'path too deep', header);
  const turns = r.take(Math.ceil(depth / 8));
  if (depth % 8 !== 0 && (turns[turns.length - 1]! & (0xff >> depth % 8)) !== 0) {
    throw new WireError('MESSAGE_MALFORMED', 'path padding bits set', header);
  }
  return r.buf.subarray(start, r.pos);
}

/**
 * Decodes a request body (server side). Throws `WireError`:
 * `VERSION_UNSUPPORTED` or `MESSAGE_MALFORMED`, with `request` set when the
 * id and kind could be read, so the server can answer `BAD_REQUEST`.
 *
 * @example
 * ```ts
 * const req = decodeRequest(body);
 * if (req.kind === Kind.Chunk) serve(req.root, req.index);
 * ```
 */
export function decodeRequest(body: Uint8Array): Request {
  const r = new Reader(body);
  const [version, kind, id] = parse(() => [r.u8(), r.u8(), r.varint()] as const);
  const header = { id, kind };
  if (version !== WIRE_VERSION) throw new WireError('VERSION_UNSUPPORTED', `version ${version}`, header);
  if (!isKind(kind)) throw new WireError('MESSAGE_MALFORMED', `kind ${kind}`, header);
  const req = parse((): Request => {
    switch (kind) {
      case Kind.Chunk:
        return { id, kind, root: r.take(HASH_LEN), index: r.varint() };
      case Kind.Proof:
        return { id, kind, root: r.take(HASH_LEN), key: r.key() };
      case Kind.Range: {
        const root = r.take(HASH_LEN);
        const start = r.take(boundedLength(r, header));
        const flags = r.u8();
        if (flags > 1) throw new WireError('MESSAGE_MALFORMED', 'range flags', header);
        const end = flags === 1 ? r.key() : undefined;
        const limit = r.varint();
        if (limit < 1 || limit > MAX_RANGE_LIMIT) throw new WireError('MESSAGE_MALFORMED', 'range limit', header);
        return end ? { id, kind, root, start, end, limit } : { id, kind, root, start, limit };
      }
      case Kind.Roots:
        return { id, kind };
      case Kind.Multiproof: {
        const root = r.take(HASH_LEN);
        const count = r.varint();
        if (count < 1 || count > MAX_MULTIPROOF_REQUEST_KEYS) throw new WireError('MESSAGE_MALFORMED', 'multiproof count', header);
        const keys: Uint8Array[] = [];
        for (let i = 0; i < count; i++) {
          const key = r.key();
          if (i > 0 && compareBytes(keys[i - 1]!, key) >= 0) throw new WireError('MESSAGE_MALFORMED', 'multiproof keys not increasing', header);
          keys.push(key);
        }
        return { id, kind, root, keys };
      }
      case Kind.Nodes: {
        const root = r.take(HASH_LEN);
        const path = treePath(r, header);
        const levels = r.u8();
        if (levels < 1 || levels > MAX_NODES_LEVELS) throw new WireError('MESSAGE_MALFORMED', 'nodes levels', header);
        return { id, kind, root, path, levels };
      }
      case Kind.Leaves:
        return { id, kind, root: r.take(HASH_LEN), path: treePath(r, header) };
      case Kind.Entries: {
        const root = r.take(HASH_LEN);
        return { id, kind, root, path: treePath(r, header), bitmap: entriesBitmap(r, header) };
      }
      case Kind.MultiLeaves: {
        const root = r.take(HASH_LEN);
        const paths: Uint8Array[] = [];
        for (let i = multiCount(r, header); i > 0; i--) paths.push(treePath(r, header));
        return { id, kind, root, paths };
      }
      case Kind.MultiEntries: {
        const root = r.take(HASH_LEN);
        const chunks: ChunkBitmap[] = [];
        for (let i = multiCount(r, header); i > 0; i--) chunks.push({ path: treePath(r, header), bitmap: entriesBitmap(r, header) });
        return { id, kind, root, chunks };
      }
    }
  }, header);
  parse(() => r.finish(), header);
  return req;
}

/** An `ENTRIES` bitmap: `bytes`, 1 … 512 of them. */
function entriesBitmap(r: Reader, header: { id: number; kind: number }): Uint8Array {
  const length = r.varint();
  if (length < 1 || length > MAX_BITMAP_BYTES) throw new WireError('MESSAGE_MALFORMED', 'entries bitmap length', header);
  return r.take(length);
}

/** The chunk count of a `MULTILEAVES` or `MULTIENTRIES` request: 1 … 256. */
function multiCount(r: Reader, header: { id: number; kind: number }): number {
  const count = r.varint();
  if (count < 1 || count > MAX_MULTI_CHUNKS) throw new WireError('MESSAGE_MALFORMED', 'multi count', header);
  return count;
}

/** A range start: like a key, but it may be empty. */
function boundedLength(r: Reader, header: { id: number; kind: number }): number {
  const len = r.varint();
  if (len > MAX_KEY_LEN) throw new WireError('MESSAGE_MALFORMED', 'range start too long', header);
  return len;
}

/**
 * Encodes a response body; `payload` only with status OK.
 *
 * @example
 * ```ts
 * encodeResponse({ id: 7, kind: Kind.Chunk, status: Status.Ok }, envelope);
 * ```
 */
export function encodeResponse(
  head: { id: number; kind: Kind; status: Status },
  payload: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const w = new Writer().u8(WIRE_VERSION).u8(head.kind).varint(head.id).u8(head.status);
  return head.status === Status.Ok ? w.push(payload).finish() : w.finish();
}

/**
 * The whole response frame, `uvarint(length) ‖ body`, with the body as
 * {@link encodeResponse} makes it: the same bytes as
 * `encodeFrame(encodeResponse(head, payload))`, in one allocation and one
 * copy of the payload (a serving peer's hot path: chunk envelopes are
 * ~100 KB each). `alloc(size)` may supply the memory (a reused buffer): it
 * returns at least `size` bytes, and the frame is its first `size`.
 *
 * @example
 * ```ts
 * conn.send(encodeResponseFrame({ id: 7, kind: Kind.Chunk, status: Status.Ok }, envelope));
 * ```
 */
export function encodeResponseFrame(
  head: { id: number; kind: Kind; status: Status },
  payload: Uint8Array = new Uint8Array(0),
  alloc: (size: number) => Uint8Array = (size) => new Uint8Array(size),
): Uint8Array {
  if (!Number.isSafeInteger(head.id) || head.id < 0) throw new RangeError('response id: expected a safe non-negative integer');
  const body = head.status === Status.Ok ? payload : undefined;
  const bodyLength = 3 + varintLength(head.id) + (body?.length ?? 0);
  const size = varintLength(bodyLength) + bodyLength;
  const space = alloc(size);
  if (space.length < size) throw new RangeError('encodeResponseFrame: alloc returned too few bytes');
  const out = space.length === size ? space : space.subarray(0, size);
  let at = putVarint(out, 0, bodyLength);
  out[at++] = WIRE_VERSION;
  out[at++] = head.kind;
  at = putVarint(out, at, head.id);
  out[at++] = head.status;
  if (body) out.set(body, at);
  return out;
}

function varintLength(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

function putVarint(out: Uint8Array, at: number, v: number): number {
  while (v >= 0x80) {
    out[at++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  out[at++] = v;
  return at;
}

/**
 * Decodes a response body (client side). Throws `WireError` on anything
 * off-spec; the payload is returned as a view for the kind's decoder.
 */
export function decodeResponse(body: Uint8Array): Response {
  const r = new Reader(body);
  const [version, kind, id, status] = parse(() => [r.u8(), r.u8(), r.varint(), r.u8()] as const);
  if (version !== WIRE_VERSION) throw new WireError('VERSION_UNSUPPORTED', `version ${version}`);
  if (!isKind(kind)) throw new WireError('MESSAGE_MALFORMED', `kind ${kind}`);
  if (status > Status.BadRequest) throw new WireError('MESSAGE_MALFORMED', `status ${status}`);
  const payload = body.subarray(r.pos);
  if (status !== Status.Ok && payload.length > 0) throw new WireError('MESSAGE_MALFORMED', 'payload after an error status');
  return { id, kind, status: status as Status, payload };
}

/** Encodes a `PROOF` payload. */
export function encodeProofPayload(p: ProofPayload): Uint8Array {
  const w = new Writer().u8(p.present ? 1 : 0);
  if (p.present) w.bytes(p.value ?? new Uint8Array(0));
  return w.push(p.proof).finish();
}

/** Decodes a `PROOF` payload (the proof itself is verified by the caller). */
export function decodeProofPayload(payload: Uint8Array): ProofPayload {
  const r = new Reader(payload);
  return parse(() => {
    const present = r.u8();
    if (present > 1) throw new WireError('MESSAGE_MALFORMED', 'present flag');
    if (present === 0) return { present: false, proof: payload.subarray(r.pos) };
    const value = r.value();
    return { present: true, value, proof: payload.subarray(r.pos) };
  });
}

/** A `MULTIPROOF` payload: the multiproof (`0x0D`, verified by the caller) of the first `count` asked keys. */
export interface MultiproofPayload {
  count: number;
  proof: Uint8Array;
}

/** Encodes a `MULTIPROOF` payload. */
export function encodeMultiproofPayload(p: MultiproofPayload): Uint8Array {
  return new Writer().varint(p.count).push(p.proof).finish();
}

/**
 * Decodes a `MULTIPROOF` payload for a request of `asked` keys. Throws
 * `MESSAGE_MALFORMED` for a count that is not 1 … `asked`; the proof is
 * passed on as it is, for the caller to verify with the first `count` keys.
 */
export function decodeMultiproofPayload(payload: Uint8Array, asked: number): MultiproofPayload {
  const r = new Reader(payload);
  return parse(() => {
    const count = r.varint();
    if (count < 1 || count > asked) throw new WireError('MESSAGE_MALFORMED', `a multiproof of ${count} keys for ${asked} asked`);
    return { count, proof: payload.subarray(r.pos) };
  });
}

/**
 * Encodes a `MULTILEAVES` or `MULTIENTRIES` payload from its parts (each a
 * `LEAVES` or `ENTRIES` body): `k varint ‖ k × (length varint ‖ part)`.
 */
export function encodeMultiPayload(parts: readonly Uint8Array[]): Uint8Array {
  const w = new Writer().varint(parts.length);
  for (const p of parts) w.bytes(p);
  return w.finish();
}

/**
 * The parts of a `MULTILEAVES` or `MULTIENTRIES` payload for `asked`
 * chunks, read one at a time (`spec/wire.md`, "Catch-up": each part is
 * checked before the next is read). Throws `WireError` `MESSAGE_MALFORMED`
 * for k = 0 or k > asked, a part longer than what is left, or bytes after
 * the k-th part.
 *
 * @example
 * ```ts
 * for (const leaves of multiParts(payload, paths.length)) session.add(leaves);
 * ```
 */
export function* multiParts(payload: Uint8Array, asked: number): Generator<Uint8Array, void, undefined> {
  const r = new Reader(payload);
  const count = parse(() => r.varint());
  if (count < 1 || count > asked) throw new WireError('MESSAGE_MALFORMED', `${count} parts for ${asked} chunks asked`);
  for (let i = 0; i < count; i++) yield parse(() => r.take(r.varint()));
  parse(() => r.finish());
}

/** Encodes a `ROOTS` payload. */
export function encodeRootsPayload(roots: readonly RootInfo[]): Uint8Array {
  const w = new Writer().varint(roots.length);
  for (const r of roots) w.push(r.root).varint(r.version).varint(r.chunkCount);
  return w.finish();
}

/** Decodes a `ROOTS` payload (a hint, never trusted). */
export function decodeRootsPayload(payload: Uint8Array): RootInfo[] {
  const r = new Reader(payload);
  return parse(() => {
    const count = r.varint();
    const roots: RootInfo[] = [];
    for (let i = 0; i < count; i++) roots.push({ root: r.take(HASH_LEN), version: r.varint(), chunkCount: r.varint() });
    r.finish();
    return roots;
  });
}
