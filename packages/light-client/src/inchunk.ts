/**
 * The in-chunk tree of `spec/hashing.md` ("In-chunk tree", "In-chunk
 * multiproof"): a left-balanced binary Merkle tree (RFC 6962 §2.1 shape)
 * over a chunk's entry hashes, and the multiproof walk over a leaf range.
 * @module
 */

import { HASH_LEN } from './constants.js';
import { inchunkNode } from './hash.js';

/**
 * The largest power of two strictly less than `n` (`n ≥ 2`): the number of
 * leaves in the left subtree of an in-chunk node over `n` leaves.
 *
 * @example
 * ```ts
 * leftSize(5); // 4
 * leftSize(8); // 4
 * ```
 */
export function leftSize(n: number): number {
  return 1 << (31 - Math.clz32(n - 1));
}

/**
 * How many hashes the multiproof for leaves `[lo, hi)` of a chunk of `m`
 * entries has: `count(M, lo, hi)`, a function of these three alone.
 *
 * @example
 * ```ts
 * multiproofLen(5, 2, 3); // 3, the spec's worked example
 * ```
 */
export function multiproofLen(m: number, lo: number, hi: number): number {
  return countWalk(0, m, lo, hi);
}

function countWalk(a: number, n: number, lo: number, hi: number): number {
  if (a + n <= lo || a >= hi) return 1;
  if (n === 1) return 0;
  const k = leftSize(n);
  return countWalk(a, k, lo, hi) + countWalk(a + k, n - k, lo, hi);
}

/**
 * `mth(d[0..M])` computed bottom-up, in place: `level` holds the `M` leaf
 * hashes back to back (`M · 32` bytes) and on return its first 32 bytes are
 * the chunk root (the rest is overwritten).
 *
 * Pairing neighbours level by level and carrying an odd last node up
 * unchanged builds exactly the RFC 6962 tree: the left `k` (a power of two)
 * leaves pair among themselves at every level, so the split falls where
 * `mth` puts it. No recursion and no allocation.
 *
 * @example
 * ```ts
 * const level = new Uint8Array(3 * 32); // d0 ‖ d1 ‖ d2
 * chunkRootInPlace(level, 3);           // level[0..32] = H(H(d0,d1), d2)
 * ```
 */
export function chunkRootInPlace(level: Uint8Array, m: number): void {
  let n = m;
  while (n > 1) {
    const half = n >>> 1;
    for (let i = 0; i < half; i++) inchunkNode(level, 2 * i * HASH_LEN, level, (2 * i + 1) * HASH_LEN, level, i * HASH_LEN);
    if (n & 1) level.copyWithin(half * HASH_LEN, (n - 1) * HASH_LEN, n * HASH_LEN);
    n = half + (n & 1);
  }
}

/**
 * The in-chunk root from the in-range leaf hashes and the multiproof, by the
 * spec's walk: `leaves` holds the `hi − lo` entry hashes of `[lo, hi)` back
 * to back and `proof` exactly `multiproofLen(m, lo, hi)` hashes, in walk
 * order (the decoder has taken exactly that many). Returns a new 32-byte hash.
 *
 * @example
 * ```ts
 * // M = 5, position 2: proof = H(d0,d1) ‖ d3 ‖ d4
 * const root = multiproofRoot(5, 2, d2, proof);
 * ```
 */
export function multiproofRoot(m: number, lo: number, leaves: Uint8Array, proof: Uint8Array): Uint8Array {
  const hi = lo + leaves.length / HASH_LEN;
  // One 64-byte slot (left ‖ right) per depth; depth ≤ log2(4096) + 1.
  const stack = new Uint8Array(64 * 14);
  let cursor = 0;
  const out = new Uint8Array(HASH_LEN);
  const walk = (a: number, n: number, depth: number, dst: Uint8Array, dstOff: number): void => {
    if (a + n <= lo || a >= hi) {
      dst.set(proof.subarray(cursor, cursor + HASH_LEN), dstOff);
      cursor += HASH_LEN;
    } else if (n === 1) {
      const at = (a - lo) * HASH_LEN;
      dst.set(leaves.subarray(at, at + HASH_LEN), dstOff);
    } else {
      const k = leftSize(n);
      const slot = depth * 64;
      walk(a, k, depth + 1, stack, slot);
      walk(a + k, n - k, depth + 1, stack, slot + HASH_LEN);
      inchunkNode(stack, slot, stack, slot + HASH_LEN, dst, dstOff);
    }
  };
  walk(0, m, 0, out, 0);
  return out;
}

/**
 * `H(0x01 ‖ left ‖ right)` of two 32-byte hashes, as a new array; for tests
 * and tools.
 *
 * @example
 * ```ts
 * const parent = inchunkParent(d0, d1);
 * ```
 */
export function inchunkParent(left: Uint8Array, right: Uint8Array): Uint8Array {
  const out = new Uint8Array(HASH_LEN);
  inchunkNode(left, 0, right, 0, out, 0);
  return out;
}
