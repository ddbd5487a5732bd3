/**
 * Framing of `spec/wire.md`: `frame = uvarint(length) ‖ body`, with a
 * minimal prefix of at most 4 bytes and a per-direction body limit.
 *
 * Hand-written rather than `it-length-prefixed` because the same push-based
 * decoder serves WebSocket messages and libp2p stream chunks, and the spec's
 * prefix rules (minimal, ≤ 4 bytes) must be enforced exactly. It holds at most
 * one unfinished frame, so memory is bounded by the limit.
 * @module
 */

import { MAX_PREFIX_BYTES } from './constants.js';
import { WireError } from './errors.js';

/**
 * `uvarint(body.length) ‖ body`.
 *
 * @example
 * ```ts
 * encodeFrame(Uint8Array.of(1, 2)); // Uint8Array [2, 1, 2]
 * ```
 */
export function encodeFrame(body: Uint8Array): Uint8Array {
  let n = body.length;
  const prefix: number[] = [];
  while (n >= 0x80) {
    prefix.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  prefix.push(n);
  const out = new Uint8Array(prefix.length + body.length);
  out.set(prefix, 0);
  out.set(body, prefix.length);
  return out;
}

/**
 * Splits a byte stream, pushed in arbitrary pieces, into frame bodies.
 *
 * @example
 * ```ts
 * const d = new FrameDecoder(4096);
 * d.push(Uint8Array.of(2, 1)); // []
 * d.push(Uint8Array.of(2));    // [Uint8Array [1, 2]]
 * ```
 */
export class FrameDecoder {
  private readonly maxBody: number;
  /** Bytes of the frame in progress (prefix and body so far). */
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  /** Total size of the frame in progress once its prefix is known, else 0. */
  private need = 0;

  /** A decoder that rejects bodies longer than `maxBody` bytes. */
  constructor(maxBody: number) {
    this.maxBody = maxBody;
  }

  /** Whether a frame is partly received. */
  get busy(): boolean {
    return this.pendingBytes > 0;
  }

  /**
   * Adds bytes and returns every frame body they complete, in order. Throws
   * `WireError` (`FRAME_MALFORMED`, `FRAME_TOO_LARGE`) as soon as a prefix
   * breaks the rules, before the body arrives.
   */
  push(bytes: Uint8Array): Uint8Array[] {
    return [...this.frames(bytes)];
  }

  /**
   * {@link push}, one body at a time: a receiver that stops at its first
   * bad frame never reads the rest of the bytes (a message of a million
   * tiny frames then costs one). Iterate each result to its end before the
   * next call; a decoder left mid-iteration (at a fault) is not to be used again.
   */
  *frames(bytes: Uint8Array): Generator<Uint8Array, void, undefined> {
    if (this.need > 0 && this.pendingBytes + bytes.length < this.need) {
      // Still inside a known-length body: keep the piece, copy once at the end.
      this.pending.push(bytes);
      this.pendingBytes += bytes.length;
      return;
    }
    let data = bytes;
    if (this.pendingBytes > 0) {
      data = concat([...this.pending, bytes], this.pendingBytes + bytes.length);
    }
    this.pending = [];
    this.pendingBytes = 0;
    this.need = 0;
    let pos = 0;
    while (pos < data.length) {
      const header = this.readPrefix(data, pos);
      if (header === undefined) break; // prefix incomplete
      const [len, prefixLen] = header;
      const end = pos + prefixLen + len;
      if (end > data.length) {
        this.need = prefixLen + len;
        break; // body incomplete
      }
      const body = data.subarray(pos + prefixLen, end);
      pos = end;
      yield body;
    }
    if (pos < data.length) {
      this.pending = [data.subarray(pos)];
      this.pendingBytes = data.length - pos;
    }
  }

  /** `[length, prefix bytes]`, or `undefined` if the prefix is incomplete. */
  private readPrefix(data: Uint8Array, pos: number): [number, number] | undefined {
    let len = 0;
    for (let i = 0; i < MAX_PREFIX_BYTES; i++) {
      if (pos + i >= data.length) return undefined;
      const b = data[pos + i]!;
      len += (b & 0x7f) * 2 ** (7 * i);
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) throw new WireError('FRAME_MALFORMED', 'non-minimal length prefix');
        if (len > this.maxBody) throw new WireError('FRAME_TOO_LARGE', `frame of ${len} bytes`);
        return [len, i + 1];
      }
    }
    throw new WireError('FRAME_MALFORMED', 'length prefix longer than 4 bytes');
  }
}

function concat(parts: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
