/**
 * The node hashes of `spec/hashing.md` ("Node hashes"): one domain tag per
 * node kind, SHA-256 from `@noble/hashes` (through `sha256.ts`).
 *
 * Speed: a single reusable SHA-256 instance is reset by cloning a pristine
 * one into it (`_cloneInto`, part of noble's public `Hash` interface), and each
 * preimage is assembled in a preallocated buffer and fed in one `update`.
 * This beats the one-shot `sha256(msg)`, most for small preimages such as
 * 65-byte in-chunk nodes, where `sha256.create()` per hash dominates.
 * @module
 */

import { Sha256 } from './sha256.js';
import { HASH_LEN, MAX_CAPACITY, MAX_KEY_LEN, MAX_VALUE_LEN, MIN_CAPACITY } from './constants.js';

const TAG_ENTRY = 0x00;
const TAG_INCHUNK = 0x01;
const TAG_CHUNK = 0x02;
const TAG_INNER = 0x03;
const TAG_ROOT = 0x04;
const TWO_32 = 0x1_0000_0000;

// Lazily created so that importing this module has no side effects.
let pristine: Sha256 | undefined;
let work: Sha256 | undefined;
let entryBuf: Uint8Array | undefined;
let nodeBuf: Uint8Array | undefined;
let digestBuf: Uint8Array | undefined;

/** SHA-256 of `data`, written to `out[off .. off + 32]`. Internal. */
export function sha256Into(data: Uint8Array, out: Uint8Array, off: number): void {
  if (pristine === undefined) {
    pristine = new Sha256();
    work = new Sha256();
    digestBuf = new Uint8Array(HASH_LEN);
  }
  const h = pristine._cloneInto(work);
  h.update(data);
  h.digestInto(digestBuf!);
  out.set(digestBuf!, off);
}

/** A scratch buffer for preimages of fixed-size nodes (≤ 82 bytes). */
function scratch(): Uint8Array {
  return (nodeBuf ??= new Uint8Array(82));
}

function putU32(buf: Uint8Array, off: number, v: number): void {
  buf[off] = v >>> 24;
  buf[off + 1] = (v >>> 16) & 0xff;
  buf[off + 2] = (v >>> 8) & 0xff;
  buf[off + 3] = v & 0xff;
}

/** Writes `v` (an integer ≤ 2^53 − 1) as u64be. */
function putU64(buf: Uint8Array, off: number, v: number): void {
  putU32(buf, off, Math.floor(v / TWO_32));
  putU32(buf, off + 4, v >>> 0);
}

/**
 * `entry_hash(k, v) = H(0x00 ‖ u32be(len k) ‖ k ‖ u32be(len v) ‖ v)`, written
 * to `out[off .. off + 32]`. Internal; lengths must be within the limits.
 */
export function entryHashInto(key: Uint8Array, value: Uint8Array, out: Uint8Array, off: number): void {
  const buf = (entryBuf ??= new Uint8Array(9 + MAX_KEY_LEN + MAX_VALUE_LEN));
  const kl = key.length;
  const vl = value.length;
  buf[0] = TAG_ENTRY;
  putU32(buf, 1, kl);
  buf.set(key, 5);
  putU32(buf, 5 + kl, vl);
  buf.set(value, 9 + kl);
  sha256Into(buf.subarray(0, 9 + kl + vl), out, off);
}

/**
 * The hash of one entry (`spec/hashing.md`, tag `0x00`).
 *
 * @example
 * ```ts
 * const d = entryHash(new TextEncoder().encode('alice'), new TextEncoder().encode('100'));
 * d.length; // 32
 * ```
 */
export function entryHash(key: Uint8Array, value: Uint8Array): Uint8Array {
  if (!(key instanceof Uint8Array) || !(value instanceof Uint8Array))
    throw new TypeError('entryHash: key and value must be Uint8Array');
  if (key.length > MAX_KEY_LEN || value.length > MAX_VALUE_LEN)
    throw new RangeError('entryHash: key or value above the spec limits');
  const out = new Uint8Array(HASH_LEN);
  entryHashInto(key, value, out, 0);
  return out;
}

/**
 * In-chunk inner node `H(0x01 ‖ left ‖ right)` of the 32-byte hashes at
 * `left[lOff ..]` and `right[rOff ..]`, written to `out[off .. off + 32]`
 * (which may overlap either input). Internal.
 */
export function inchunkNode(
  left: Uint8Array,
  lOff: number,
  right: Uint8Array,
  rOff: number,
  out: Uint8Array,
  off: number,
): void {
  const buf = scratch();
  buf[0] = TAG_INCHUNK;
  for (let i = 0; i < 32; i++) buf[1 + i] = left[lOff + i]!;
  for (let i = 0; i < 32; i++) buf[33 + i] = right[rOff + i]!;
  sha256Into(buf.subarray(0, 65), out, off);
}

/** `H(0x02 ‖ u32be(M) ‖ chunk_root)`, into `out[off ..]`. Internal. */
export function chunkHashInto(m: number, chunkRoot: Uint8Array, rootOff: number, out: Uint8Array, off: number): void {
  const buf = scratch();
  buf[0] = TAG_CHUNK;
  putU32(buf, 1, m);
  for (let i = 0; i < 32; i++) buf[5 + i] = chunkRoot[rootOff + i]!;
  sha256Into(buf.subarray(0, 37), out, off);
}

/**
 * `H(0x03 ‖ u8(height) ‖ u64be(chunk_count) ‖ u64be(entry_count) ‖ left ‖ right)`
 * where the path's running hash `h` is `left` unless `hIsRight`; written back
 * into `h`. Internal.
 */
export function innerHashInPlace(
  height: number,
  chunkCount: number,
  entryCount: number,
  h: Uint8Array,
  sibling: Uint8Array,
  hIsRight: boolean,
): void {
  const buf = scratch();
  buf[0] = TAG_INNER;
  buf[1] = height;
  putU64(buf, 2, chunkCount);
  putU64(buf, 10, entryCount);
  buf.set(hIsRight ? sibling : h, 18);
  buf.set(hIsRight ? h : sibling, 50);
  sha256Into(buf.subarray(0, 82), h, 0);
}

/** `H(0x04 ‖ u32be(C) ‖ u64be(chunk_count) ‖ u64be(entry_count) ‖ top)`, as a new array. Internal. */
export function rootHash(capacity: number, chunkCount: number, entryCount: number, top: Uint8Array): Uint8Array {
  const buf = scratch();
  buf[0] = TAG_ROOT;
  putU32(buf, 1, capacity);
  putU64(buf, 5, chunkCount);
  putU64(buf, 13, entryCount);
  buf.set(top, 21);
  const out = new Uint8Array(HASH_LEN);
  sha256Into(buf.subarray(0, 53), out, 0);
  return out;
}

/**
 * The root of the empty tree of capacity `capacity`:
 * `H(0x04 ‖ u32be(C) ‖ u64be(0) ‖ u64be(0) ‖ 0^32)`.
 *
 * @throws {TypeError} `capacity` is not a number.
 * @throws {RangeError} `capacity` is not an integer in 2 … 4096.
 * @example
 * ```ts
 * emptyRoot(256); // the root every empty tree of capacity 256 commits to
 * ```
 */
export function emptyRoot(capacity: number): Uint8Array {
  if (typeof capacity !== 'number') throw new TypeError('emptyRoot: capacity must be a number');
  if (!Number.isInteger(capacity) || capacity < MIN_CAPACITY || capacity > MAX_CAPACITY)
    throw new RangeError('emptyRoot: capacity must be an integer in 2 … 4096');
  return rootHash(capacity, 0, 0, new Uint8Array(HASH_LEN));
}
