/**
 * Shared helpers of the cross-package suites in `tests/`: a seeded RNG, byte
 * helpers, the error-code table read from `spec/errors.md`, outcome capture
 * for the two verifiers (pure TS `@bpavl/light-client/verify` and
 * `@bpavl/wasm`), and a field splitter of the v1 encodings that targeted
 * mutations (varints, hashes) use, driven by `spec/layout.json` (the field
 * layout the Rust test kit reads too).
 */

import { readFileSync } from 'node:fs';

// ---------------------------------------------------------------- randomness

/** Deterministic PRNG (mulberry32): fixed seeds, reproducible cases. */
export function rng(seed: number): Rng {
  let s = seed >>> 0;
  const next = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const int = (n: number): number => Math.floor(next() * n);
  return {
    next,
    int,
    range: (lo: number, hi: number) => lo + int(hi - lo + 1),
    pick: <T>(xs: readonly T[]): T => xs[int(xs.length)]!,
    chance: (p: number) => next() < p,
    bytes: (n: number) => {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = int(256);
      return out;
    },
  };
}

export interface Rng {
  next(): number;
  /** 0 … n − 1. */
  int(n: number): number;
  /** lo … hi, inclusive. */
  range(lo: number, hi: number): number;
  pick<T>(xs: readonly T[]): T;
  chance(p: number): boolean;
  bytes(n: number): Uint8Array;
}

export function shuffle<T>(items: readonly T[], r: Rng): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = r.int(i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

// ---------------------------------------------------------------- bytes

export const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.length).toString('hex');
export const hex = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'hex'));
export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Bytewise order, a proper prefix first (spec/chunk-format.md). */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length));
}

export const equalBytes = (a: Uint8Array, b: Uint8Array): boolean => compareBytes(a, b) === 0;

/** Canonical LEB128 (spec/encoding.md) of any value up to 2^64 (as a bigint or a safe number). */
export function encodeVarint(v: number | bigint): Uint8Array {
  let n = BigInt(v);
  const out: number[] = [];
  while (n >= 0x80n) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return Uint8Array.from(out);
}

// ---------------------------------------------------------------- error codes

const errorsMd = readFileSync(new URL('../spec/errors.md', import.meta.url), 'utf8');

function codesOf(section: string): string[] {
  const body = errorsMd.split(/^## /m).find((s) => s.startsWith(section));
  if (body === undefined) throw new Error(`spec/errors.md has no section ${section}`);
  const codes = new Set<string>();
  for (const line of body.split('\n')) {
    const first = /^\|([^|]*)\|/.exec(line)?.[1] ?? '';
    for (const m of first.matchAll(/`([A-Z_]+)`/g)) codes.add(m[1]!);
  }
  return [...codes];
}

/** The codes a verifier may throw: `spec/errors.md`, "Decoding" and "Verification". */
export const PROOF_CODES: ReadonlySet<string> = new Set([...codesOf('Decoding'), ...codesOf('Verification')]);
/** Every code of `spec/errors.md`. */
export const ALL_CODES: ReadonlySet<string> = new Set([
  ...PROOF_CODES,
  ...codesOf('Tree operations'),
  ...codesOf('Rebuild'),
]);

// ---------------------------------------------------------------- outcomes

/**
 * What one verifier call did, as a comparable string:
 * `ok <normalized result>`, `err <CODE>` for a typed ProofError, or
 * `THROW <class>/<name>/<code>: <message>` for anything else.
 */
export type Outcome = string;

export function isTypedTsError(e: unknown, ProofErrorClass: new (...a: never[]) => Error): boolean {
  return e instanceof ProofErrorClass && PROOF_CODES.has((e as { code?: string }).code ?? '');
}

export function isTypedWasmError(e: unknown): boolean {
  return e instanceof Error && e.name === 'ProofError' && PROOF_CODES.has((e as { code?: string }).code ?? '');
}

export function describeThrow(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return `THROW ${e.constructor?.name}/${e.name}/${String(code)}: ${e.message.slice(0, 200)}`;
  }
  return `THROW non-Error: ${String(e).slice(0, 200)}`;
}

export function capture(fn: () => string, typed: (e: unknown) => boolean): Outcome {
  try {
    return `ok ${fn()}`;
  } catch (e) {
    if (typed(e)) return `err ${(e as { code: string }).code}`;
    return describeThrow(e);
  }
}

/** Normalizes `[key, value][]` to hex pairs. */
export const pairsHex = (ps: readonly (readonly [Uint8Array, Uint8Array])[]): string[] =>
  ps.map(([k, v]) => `${toHex(k)}:${toHex(v)}`);

// ---------------------------------------------------------------- field splitter

export type FieldKind = 'format' | 'varint' | 'u8' | 'hash' | 'body';

export interface Field {
  kind: FieldKind;
  /** Byte offset in the encoding. */
  off: number;
  len: number;
  /** Its name in `spec/layout.json` (e.g. `capacity`, `step2.entries`, `seg0.key1.len`). */
  name: string;
  /** The decoded value (varints and u8 only). */
  value?: number;
}

/** Number of in-chunk multiproof hashes for leaves [lo, hi) of M (spec/hashing.md). */
export function multiproofCount(m: number, lo: number, hi: number): number {
  const walk = (a: number, b: number): number => {
    if (b <= lo || a >= hi) return 1;
    if (b - a === 1) return 0;
    let k = 1;
    while (k * 2 < b - a) k *= 2;
    return walk(a, a + k) + walk(a + k, b);
  };
  return walk(0, m);
}

/** `spec/layout.json`: the field layout of every format, as data (see its description). */
type LayoutItem =
  | [name: string, type: 'u8' | 'varint' | 'hash' | 'bytes' | 'hashes', role: string, args?: string[]]
  | { piece: string }
  | { repeat: string; as: string; prefix: string; body: LayoutItem[] }
  | { if_bit: [field: string, bit: number]; prefix: string; body: LayoutItem[] };
interface Layout {
  pieces: Record<string, LayoutItem[]>;
  formats: Record<string, { byte: number; fields: LayoutItem[] }>;
}
const LAYOUT: Layout = JSON.parse(readFileSync(new URL('../spec/layout.json', import.meta.url), 'utf8'));

/**
 * Splits a *valid* v1 encoding (any of format bytes 0x01 … 0x05) into its
 * fields, front to back, as `spec/layout.json` lays them out: a `bytes`
 * field becomes its length varint (`NAME.len`) and, if not empty, its body
 * (`NAME`); in-chunk hashes become one field each (`hashes[k]`). Throws (a
 * plain Error) if the bytes do not parse: it is a test tool, not a verifier.
 */
export function splitFields(bytes: Uint8Array): Field[] {
  const format = Object.values(LAYOUT.formats).find((f) => f.byte === bytes[0]);
  if (format === undefined) throw new Error(`splitFields: format byte ${bytes[0]}`);
  const fields: Field[] = [];
  /** The value of every u8 and varint read, by full name. */
  const vars = new Map<string, number>();
  let pos = 0;
  const need = (n: number) => {
    if (pos + n > bytes.length) throw new Error(`splitFields: truncated at ${pos}`);
  };
  const varint = (name: string): number => {
    const start = pos;
    let v = 0;
    let scale = 1;
    for (;;) {
      need(1);
      const b = bytes[pos++]!;
      v += (b & 0x7f) * scale;
      scale *= 128;
      if ((b & 0x80) === 0) break;
    }
    fields.push({ kind: 'varint', off: start, len: pos - start, name, value: v });
    return v;
  };
  const hash = (name: string) => {
    need(32);
    fields.push({ kind: 'hash', off: pos, len: 32, name });
    pos += 32;
  };
  /** A number, the value of a field under `prefix`, or two of these joined by + or -. */
  const evaluate = (e: string, prefix: string): number => {
    const [a, op, b] = e.split(/([+-])/);
    if (op !== undefined) return evaluate(a!, prefix) + (op === '+' ? 1 : -1) * evaluate(b!, prefix);
    if (/^\d+$/.test(e)) return Number(e);
    const v = vars.get(prefix + e);
    if (v === undefined) throw new Error(`splitFields: spec/layout.json names no field ${prefix + e}`);
    return v;
  };
  /** `template` with each `{v}` replaced by its index, innermost repeat first. */
  const fill = (template: string, index: [string, number][]) =>
    index.reduceRight((t, [v, k]) => t.replaceAll(`{${v}}`, String(k)), template);
  const read = (items: LayoutItem[], prefix: string, index: [string, number][]): void => {
    for (const item of items) {
      if (Array.isArray(item)) {
        const [template, type, role, args] = item;
        const name = prefix + fill(template, index);
        if (type === 'u8') {
          need(1);
          vars.set(name, bytes[pos]!);
          fields.push({ kind: role === 'Format' ? 'format' : 'u8', off: pos, len: 1, name, value: bytes[pos]! });
          pos += 1;
        } else if (type === 'varint') {
          vars.set(name, varint(name));
        } else if (type === 'hash') {
          hash(name);
        } else if (type === 'bytes') {
          const n = varint(`${name}.len`);
          need(n);
          if (n > 0) fields.push({ kind: 'body', off: pos, len: n, name });
          pos += n;
        } else {
          const [m, lo, hi] = args!.map((e) => evaluate(e, prefix)) as [number, number, number];
          for (let k = 0; k < multiproofCount(m, lo, hi); k++) hash(`${name}[${k}]`);
        }
      } else if ('piece' in item) {
        read(LAYOUT.pieces[item.piece]!, prefix, index);
      } else if ('repeat' in item) {
        const n = evaluate(item.repeat, prefix);
        for (let k = 0; k < n; k++) {
          const inner: [string, number][] = [...index, [item.as, k]];
          read(item.body, prefix + fill(item.prefix, inner), inner);
        }
      } else if ((evaluate(item.if_bit[0], prefix) >> item.if_bit[1]) & 1) {
        read(item.body, prefix + item.prefix, index);
      }
    }
  };
  read(format.fields, '', []);
  if (pos !== bytes.length) throw new Error(`splitFields: ${bytes.length - pos} trailing bytes`);
  return fields;
}

// ---------------------------------------------------------------- mutations

export interface Mutation {
  name: string;
  bytes: Uint8Array;
}

const splice = (b: Uint8Array, off: number, del: number, ins: Uint8Array): Uint8Array =>
  concat(b.subarray(0, off), ins, b.subarray(off + del));

/** A non-canonical spelling of the varint `v` (an extra zero group), or an overflowing one if that would exceed 8 bytes. */
export function nonCanonicalVarint(v: number): Uint8Array {
  const c = encodeVarint(v);
  const out = new Uint8Array(c.length + 1);
  out.set(c);
  out[c.length - 1]! |= 0x80;
  out[c.length] = 0x00;
  return out;
}

/** Overflowing varints: 9 groups, 8 groups with the continuation bit set, or 8 bytes decoding to 2^53 and more. */
export const OVERFLOW_VARINTS: readonly Uint8Array[] = [
  Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
  Uint8Array.of(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80),
  encodeVarint(2n ** 53n),
  encodeVarint(2n ** 56n - 1n),
  encodeVarint(2n ** 53n + 1n),
];

/** In-range but interesting varint values around every width the implementations might use internally. */
export function interestingValues(v: number): number[] {
  return [0, 1, 2, v - 1, v + 1, 127, 128, 255, 256, 4096, 4097, 2 ** 16, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + v, 2 ** 53 - 1, 2 ** 53 - 2]
    .filter((x) => x >= 0 && x !== v);
}

/**
 * One random mutation of `bytes` (whose fields are `fields`), drawn from
 * single-byte changes (flip, overwrite), structural changes (truncate,
 * extend, delete, insert, duplicate a slice) and targeted ones (swap two
 * hashes, a non-canonical / overflowing / out-of-range varint, the format
 * byte). Never returns the input unchanged.
 */
export function mutate(bytes: Uint8Array, fields: readonly Field[], r: Rng): Mutation {
  const n = bytes.length;
  for (;;) {
    const m = mutateOnce(bytes, fields, r, n);
    if (m !== undefined && !equalBytes(m.bytes, bytes)) return m;
  }
}

function mutateOnce(bytes: Uint8Array, fields: readonly Field[], r: Rng, n: number): Mutation | undefined {
  const kind = r.int(14);
  switch (kind) {
    case 0:
    case 1: {
      const i = r.int(n);
      const mask = r.chance(0.5) ? 1 << r.int(8) : 1 + r.int(255);
      const b = bytes.slice();
      b[i]! ^= mask;
      return { name: `flip@${i}^${mask}`, bytes: b };
    }
    case 2: {
      const i = r.int(n);
      const b = bytes.slice();
      b[i] = r.pick([0x00, 0xff, 0x80, 0x7f, r.int(256)]);
      return { name: `overwrite@${i}=${b[i]}`, bytes: b };
    }
    case 3: {
      const len = r.chance(0.3) ? r.int(Math.min(n, 12)) : r.int(n);
      return { name: `truncate@${len}`, bytes: bytes.slice(0, len) };
    }
    case 4: {
      const extra = r.chance(0.5) ? new Uint8Array(r.range(1, 4)) : r.bytes(r.range(1, 64));
      return { name: `extend+${extra.length}`, bytes: concat(bytes, extra) };
    }
    case 5: {
      const i = r.int(n);
      return { name: `delete@${i}`, bytes: splice(bytes, i, 1, new Uint8Array(0)) };
    }
    case 6: {
      const i = r.int(n + 1);
      return { name: `insert@${i}`, bytes: splice(bytes, i, 0, Uint8Array.of(r.int(256))) };
    }
    case 7: {
      const a = r.int(n);
      const b = Math.min(n, a + r.range(1, r.chance(0.5) ? 8 : 80));
      return { name: `duplicate[${a},${b})`, bytes: splice(bytes, b, 0, bytes.slice(a, b)) };
    }
    case 8: {
      const hs = fields.filter((f) => f.kind === 'hash');
      if (hs.length < 2) return undefined;
      const x = r.pick(hs);
      const y = r.pick(hs);
      if (x === y) return undefined;
      const b = bytes.slice();
      b.set(bytes.subarray(y.off, y.off + 32), x.off);
      b.set(bytes.subarray(x.off, x.off + 32), y.off);
      return { name: `swap(${x.name},${y.name})`, bytes: b };
    }
    case 9: {
      const f = pickVarint(fields, r);
      if (f === undefined) return undefined;
      return { name: `noncanonical(${f.name})`, bytes: splice(bytes, f.off, f.len, nonCanonicalVarint(f.value!)) };
    }
    case 10: {
      const f = pickVarint(fields, r);
      if (f === undefined) return undefined;
      const o = r.pick(OVERFLOW_VARINTS);
      return { name: `overflow(${f.name},${toHex(o)})`, bytes: splice(bytes, f.off, f.len, o) };
    }
    case 11:
    case 12: {
      const f = pickVarint(fields, r);
      if (f === undefined) return undefined;
      const v = r.pick(interestingValues(f.value!));
      return { name: `value(${f.name}=${v})`, bytes: splice(bytes, f.off, f.len, encodeVarint(v)) };
    }
    default: {
      const u8s = fields.filter((f) => f.kind === 'u8' || f.kind === 'format');
      if (u8s.length === 0) return undefined; // no field layout (a multiproof): byte-level mutations only
      const f = r.pick(u8s);
      const b = bytes.slice();
      b[f.off] = f.kind === 'format' ? r.pick([0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x11, 0x15, 0xff]) : r.pick([0, 1, 2, 3, 0x80, 0x81, 0x04, 0x30, 0x31, 0x7f, 0xff, r.int(256)]);
      return { name: `u8(${f.name}=${b[f.off]})`, bytes: b };
    }
  }
}

function pickVarint(fields: readonly Field[], r: Rng): Field | undefined {
  const vs = fields.filter((f) => f.kind === 'varint');
  return vs.length === 0 ? undefined : r.pick(vs);
}

/**
 * The same bytes as a view at a non-zero offset of a larger buffer, or as a
 * Node `Buffer`, or unchanged: inputs users actually pass.
 */
export function asInput(bytes: Uint8Array, r: Rng): Uint8Array {
  const k = r.int(8);
  if (k === 0) {
    const big = new Uint8Array(bytes.length + 13);
    big.fill(0xa5);
    big.set(bytes, 5);
    return big.subarray(5, 5 + bytes.length);
  }
  if (k === 1) return Buffer.from(bytes);
  return bytes;
}
