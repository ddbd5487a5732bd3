/**
 * Canonical decoding primitives of `spec/encoding.md`: minimal varints,
 * length-prefixed bytes, keys, values, capacity and chunk size, read front to
 * back by a {@link Reader} that throws the code of the first failing check.
 *
 * Everything returned is a view into the input, never a copy.
 * @module
 */

import {
  HASH_LEN,
  MAX_CAPACITY,
  MAX_ENTRIES,
  MAX_KEY_LEN,
  MAX_VALUE_LEN,
  MIN_CAPACITY,
} from './constants.js';
import { fail } from './errors.js';

/**
 * Reads one encoded object front to back (`spec/encoding.md`, "Primitives").
 * Every method throws `ProofError` with the code the spec gives for the first
 * check that fails: any read past the end is `TRUNCATED`.
 *
 * @example
 * ```ts
 * const r = new Reader(Uint8Array.of(0x05, 0xac, 0x02), 0x05);
 * r.varint(); // 300
 * r.finish(); // ok: nothing left
 * ```
 */
export class Reader {
  /** The input. */
  readonly buf: Uint8Array;
  /** Offset of the next unread byte. */
  pos: number;

  /**
   * A reader over `buf` whose first byte must be `format`: an empty input is
   * `TRUNCATED`, any other first byte `FORMAT_UNSUPPORTED`. Without `format`
   * the reader starts at byte 0 (for primitives read alone).
   */
  constructor(buf: Uint8Array, format?: number) {
    this.buf = buf;
    this.pos = 0;
    if (format !== undefined && this.u8() !== format) fail('FORMAT_UNSUPPORTED');
  }

  /** `TRAILING_BYTES` unless every byte was read. */
  finish(): void {
    if (this.pos !== this.buf.length) fail('TRAILING_BYTES');
  }

  /** One byte. */
  u8(): number {
    const { buf, pos } = this;
    if (pos >= buf.length) fail('TRUNCATED');
    this.pos = pos + 1;
    return buf[pos]!;
  }

  /** The next `n` bytes, as a view. */
  take(n: number): Uint8Array {
    const { buf, pos } = this;
    if (buf.length - pos < n) fail('TRUNCATED');
    this.pos = pos + n;
    return buf.subarray(pos, pos + n);
  }

  /** `n` consecutive 32-byte hashes without a length prefix, as one flat view. */
  hashes(n: number): Uint8Array {
    return this.take(n * HASH_LEN);
  }

  /** A minimal LEB128 varint of at most 8 bytes and at most 2^53 − 1. */
  varint(): number {
    const { buf } = this;
    let pos = this.pos;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (pos >= buf.length) {
        this.pos = pos;
        fail('TRUNCATED');
      }
      const b = buf[pos++]!;
      // Multiplication, not shifts: 7·i reaches 49 bits. Sums above 2^53 may
      // round, but rounding is monotonic, so the overflow test stays exact.
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        this.pos = pos;
        if (i > 0 && b === 0) fail('VARINT_NON_CANONICAL');
        if (value > MAX_ENTRIES) fail('VARINT_OVERFLOW');
        return value;
      }
      scale *= 128;
    }
    this.pos = pos;
    return fail('VARINT_OVERFLOW');
  }

  /** `key = bytes`: length, then `KEY_EMPTY` if 0, `KEY_TOO_LONG` if > 1024, then the bytes. */
  key(): Uint8Array {
    const len = this.varint();
    if (len === 0) fail('KEY_EMPTY');
    if (len > MAX_KEY_LEN) fail('KEY_TOO_LONG');
    return this.take(len);
  }

  /** `value = bytes`: length, `VALUE_TOO_LONG` if > 65536, then the bytes. */
  value(): Uint8Array {
    const len = this.varint();
    if (len > MAX_VALUE_LEN) fail('VALUE_TOO_LONG');
    return this.take(len);
  }

  /** A capacity `C`: `CAPACITY_INVALID` unless 2 ≤ C ≤ 4096. */
  capacity(): number {
    const c = this.varint();
    if (c < MIN_CAPACITY || c > MAX_CAPACITY) fail('CAPACITY_INVALID');
    return c;
  }

  /** A chunk's entry count `M`: `CHUNK_SIZE_INVALID` unless 1 ≤ M ≤ capacity. */
  chunkSize(capacity: number): number {
    const m = this.varint();
    if (m === 0 || m > capacity) fail('CHUNK_SIZE_INVALID');
    return m;
  }
}

/**
 * Checks a key given to a verifier: `KEY_EMPTY`, then `KEY_TOO_LONG`
 * (`spec/encoding.md`, "Limits").
 *
 * @example
 * ```ts
 * checkKey(new Uint8Array(0)); // throws ProofError KEY_EMPTY
 * ```
 */
export function checkKey(key: Uint8Array): void {
  if (key.length === 0) fail('KEY_EMPTY');
  if (key.length > MAX_KEY_LEN) fail('KEY_TOO_LONG');
}

/**
 * Checks a value given to a verifier: `VALUE_TOO_LONG` above 65536 bytes.
 *
 * @example
 * ```ts
 * checkValue(new Uint8Array(65537)); // throws ProofError VALUE_TOO_LONG
 * ```
 */
export function checkValue(value: Uint8Array): void {
  if (value.length > MAX_VALUE_LEN) fail('VALUE_TOO_LONG');
}

/**
 * Bytewise (`memcmp`) comparison, a proper prefix first: negative, 0 or
 * positive as `a` sorts before, equal to or after `b`.
 *
 * @example
 * ```ts
 * compareBytes(Uint8Array.of(1), Uint8Array.of(1, 0)); // < 0
 * ```
 */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/**
 * Whether two byte strings are equal.
 *
 * @example
 * ```ts
 * equalBytes(Uint8Array.of(1, 2), Uint8Array.of(1, 2)); // true
 * ```
 */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Decodes one varint alone: `bytes` must be exactly one canonical varint.
 * A convenience for tests and tools; decoders use {@link Reader.varint}.
 *
 * @example
 * ```ts
 * decodeVarint(Uint8Array.of(0xac, 0x02)); // 300
 * decodeVarint(Uint8Array.of(0x80, 0x00)); // throws VARINT_NON_CANONICAL
 * ```
 */
export function decodeVarint(bytes: Uint8Array): number {
  const r = new Reader(bytes);
  const v = r.varint();
  r.finish();
  return v;
}

/**
 * The minimal LEB128 encoding of `value` (a safe non-negative integer); the
 * inverse of {@link decodeVarint}.
 *
 * @example
 * ```ts
 * encodeVarint(300); // Uint8Array [0xac, 0x02]
 * ```
 */
export function encodeVarint(value: number): Uint8Array {
  if (typeof value !== 'number') throw new TypeError('varint: expected a number');
  if (!Number.isSafeInteger(value) || value < 0)
    throw new RangeError('varint: expected a safe non-negative integer');
  const out: number[] = [];
  while (value >= 0x80) {
    out.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return Uint8Array.from(out);
}
