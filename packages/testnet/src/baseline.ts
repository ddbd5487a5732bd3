/**
 * The Baseline extension of the wire protocol, for `npm run bench:sync` only
 * (`spec/benchmarks.md`). A peer
 * started with `bpavl-testnet serve --baseline` also serves the B+AVL paper's
 * Baseline state (`crates/baseline` through `@bpavl/baseline-wasm`): the same
 * workload in an IAVL-style AVL+ tree, exported by traversal into fixed-size
 * chunks that carry no proof. Two request kinds, in the version-1 frame and
 * header format:
 *
 * ```
 * 240 BASELINE_CHUNK request root[32] ‖ index varint   →  OK: the chunk's bytes, to the end of the frame
 * 241 BASELINE_ROOTS request (nothing)                 →  OK: count varint ‖ count × (root[32] ‖ chunks varint)
 * ```
 *
 * Statuses as for `CHUNK` and `ROOTS` (`UNKNOWN_ROOT`, `OUT_OF_RANGE`, `BUSY`,
 * `BAD_REQUEST`). Nothing here is verifiable chunk by chunk: that is the
 * point of the Baseline. The verified protocol (kinds 1–5) and its client
 * (`@bpavl/light-client`) do not know these kinds; a peer without
 * `--baseline` answers them `BAD_REQUEST`, as any unknown kind.
 * @module
 */

import { Status, WIRE_VERSION, WireError } from '@bpavl/light-client/wire';

/** The extension's request kinds. */
export const BaselineKind = { Chunk: 240, Roots: 241 } as const;
/** One of `BaselineKind`. */
export type BaselineKind = (typeof BaselineKind)[keyof typeof BaselineKind];

/** A Baseline request (the extension's kinds). */
export type BaselineRequest =
  | { id: number; kind: typeof BaselineKind.Chunk; root: Uint8Array; index: number }
  | { id: number; kind: typeof BaselineKind.Roots };

/** A Baseline response: header and payload (empty unless OK). */
export interface BaselineResponse {
  id: number;
  kind: BaselineKind;
  status: Status;
  payload: Uint8Array;
}

/** What a peer serves for the Baseline: a root and its chunks, chunk i = `chunks[i]`. */
export interface BaselineServed {
  readonly root: Uint8Array;
  readonly chunks: readonly Uint8Array[];
}

/** A minimal unsigned LEB128 varint (`spec/encoding.md`), for 0 … 2^53 − 1. */
export function encodeVarint(v: number): Uint8Array {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`varint out of range: ${v}`);
  const out: number[] = [];
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Uint8Array.from(out);
}

/** A bounded reader; any failure throws `RangeError` (callers map it to a `WireError`). */
class Reader {
  readonly buf: Uint8Array;
  pos = 0;
  constructor(buf: Uint8Array) {
    this.buf = buf;
  }
  u8(): number {
    if (this.pos >= this.buf.length) throw new RangeError('truncated');
    return this.buf[this.pos++]!;
  }
  /** A minimal varint of at most 8 bytes and at most 2^53 − 1 (`spec/encoding.md`). */
  varint(): number {
    let v = 0;
    for (let i = 0; i < 8; i++) {
      const b = this.u8();
      if (i > 0 && b === 0) throw new RangeError('non-canonical varint');
      v += (b & 0x7f) * 2 ** (7 * i);
      if ((b & 0x80) === 0) {
        if (v > Number.MAX_SAFE_INTEGER) throw new RangeError('varint overflow');
        return v;
      }
    }
    throw new RangeError('varint overflow');
  }
  take(n: number): Uint8Array {
    if (this.pos + n > this.buf.length) throw new RangeError('truncated');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  finish(): void {
    if (this.pos !== this.buf.length) throw new RangeError('trailing bytes');
  }
}

/** Whether a request body (version, kind, …) is one of the extension's kinds. */
export function isBaselineBody(body: Uint8Array): boolean {
  return body.length >= 2 && body[0] === WIRE_VERSION && (body[1] === BaselineKind.Chunk || body[1] === BaselineKind.Roots);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Encodes a Baseline request body. */
export function encodeBaselineRequest(req: BaselineRequest): Uint8Array {
  const head = [Uint8Array.of(WIRE_VERSION, req.kind), encodeVarint(req.id)];
  if (req.kind === BaselineKind.Roots) return concat(head);
  if (req.root.length !== 32) throw new RangeError('root must be 32 bytes');
  return concat([...head, req.root, encodeVarint(req.index)]);
}

/**
 * Decodes a Baseline request body (server side). Throws `WireError`
 * `MESSAGE_MALFORMED`, with `request` set once the id is known.
 */
export function decodeBaselineRequest(body: Uint8Array): BaselineRequest {
  const r = new Reader(body);
  let id: number;
  let kind: number;
  try {
    r.u8();
    kind = r.u8();
    id = r.varint();
  } catch {
    throw new WireError('MESSAGE_MALFORMED', 'baseline request header');
  }
  const header = { id, kind };
  try {
    let req: BaselineRequest;
    if (kind === BaselineKind.Chunk) req = { id, kind, root: r.take(32), index: r.varint() };
    else if (kind === BaselineKind.Roots) req = { id, kind };
    else throw new Error('not a baseline kind');
    r.finish();
    return req;
  } catch {
    throw new WireError('MESSAGE_MALFORMED', 'malformed baseline request', header);
  }
}

/** Encodes a Baseline response body; `payload` only with status OK. */
export function encodeBaselineResponse(head: { id: number; kind: BaselineKind; status: Status }, payload?: Uint8Array): Uint8Array {
  const parts = [Uint8Array.of(WIRE_VERSION, head.kind), encodeVarint(head.id), Uint8Array.of(head.status)];
  if (head.status === Status.Ok && payload !== undefined) parts.push(payload);
  return concat(parts);
}

/** Decodes a Baseline response body (client side); throws `WireError` on anything off-spec. */
export function decodeBaselineResponse(body: Uint8Array): BaselineResponse {
  const r = new Reader(body);
  let version: number, kind: number, id: number, status: number;
  try {
    version = r.u8();
    kind = r.u8();
    id = r.varint();
    status = r.u8();
  } catch {
    throw new WireError('MESSAGE_MALFORMED', 'baseline response header');
  }
  if (version !== WIRE_VERSION) throw new WireError('VERSION_UNSUPPORTED', `version ${version}`);
  if (kind !== BaselineKind.Chunk && kind !== BaselineKind.Roots) throw new WireError('MESSAGE_MALFORMED', `kind ${kind}`);
  if (status > Status.BadRequest) throw new WireError('MESSAGE_MALFORMED', `status ${status}`);
  const payload = body.subarray(r.pos);
  if (status !== Status.Ok && payload.length > 0) throw new WireError('MESSAGE_MALFORMED', 'payload after an error status');
  return { id, kind: kind as BaselineKind, status: status as Status, payload };
}

/** One Baseline root a peer offers (a hint, never trusted). */
export interface BaselineRootInfo {
  root: Uint8Array;
  chunkCount: number;
}

/** Encodes a `BASELINE_ROOTS` payload. */
export function encodeBaselineRootsPayload(roots: readonly BaselineRootInfo[]): Uint8Array {
  const parts = [encodeVarint(roots.length)];
  for (const r of roots) parts.push(r.root, encodeVarint(r.chunkCount));
  return concat(parts);
}

/** Decodes a `BASELINE_ROOTS` payload. */
export function decodeBaselineRootsPayload(payload: Uint8Array): BaselineRootInfo[] {
  const r = new Reader(payload);
  try {
    const count = r.varint();
    const out: BaselineRootInfo[] = [];
    for (let i = 0; i < count; i++) out.push({ root: r.take(32), chunkCount: r.varint() });
    r.finish();
    return out;
  } catch {
    throw new WireError('MESSAGE_MALFORMED', 'malformed BASELINE_ROOTS payload');
  }
}

/** The Baseline's default chunk size (crates/baseline `DEFAULT_CHUNK_BYTES`). */
export const DEFAULT_BASELINE_CHUNK_BYTES = 100 * 1024;

/** A Baseline state being built entry by entry (see `baselineBuilder`). */
export interface BaselineBuilder {
  insert(key: Uint8Array, value: Uint8Array): void;
  /** Commits, exports the chunks, frees the tree. */
  finish(): BaselineServed & { bytes: number };
}

/** What `baselineBuilder` uses of `@bpavl/baseline-wasm` (see its index.d.ts). */
interface BaselineWasm {
  init(): Promise<void>;
  BaselineTree: new () => {
    insert(key: Uint8Array, value: Uint8Array): boolean;
    commit(): Uint8Array;
    exportChunks(chunkBytes: number): Uint8Array[];
    free(): void;
  };
}

/**
 * A builder for the Baseline state over `@bpavl/baseline-wasm` (loaded here,
 * on demand, so that a peer without `--baseline` never needs it built).
 */
export async function baselineBuilder(chunkBytes = DEFAULT_BASELINE_CHUNK_BYTES): Promise<BaselineBuilder> {
  let mod: BaselineWasm;
  try {
    // A computed specifier: type-checking and building this package must not need pkg/ of @bpavl/baseline-wasm.
    const specifier: string = '@bpavl/baseline-wasm';
    mod = (await import(specifier)) as BaselineWasm;
    await mod.init();
  } catch (e) {
    throw new Error(
      `--baseline needs @bpavl/baseline-wasm built (npm run build -w @bpavl/baseline-wasm): ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  const tree = new mod.BaselineTree();
  return {
    insert: (key, value) => void tree.insert(key, value),
    finish() {
      const root = tree.commit();
      const chunks = tree.exportChunks(chunkBytes);
      tree.free();
      return { root, chunks, bytes: chunks.reduce((s, c) => s + c.length, 0) };
    },
  };
}
