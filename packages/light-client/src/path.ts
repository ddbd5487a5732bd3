/**
 * The chunk path: a chunk's AVL ancestors, bottom-up. Decoding follows
 * `spec/encoding.md` ("Chunk path", with every structural check in order);
 * folding follows `spec/hashing.md` ("Chunk path (chunk → root)") and yields
 * the root, the chunk's index, the totals and the chunk's key-height.
 * @module
 */

import type { Reader } from './codec.js';
import { HASH_LEN, MAX_CHUNKS, MAX_ENTRIES, MAX_HEIGHT } from './constants.js';
import { fail } from './errors.js';
import { innerHashInPlace, rootHash } from './hash.js';

/**
 * One ancestor of a chunk: the parent's height and the sibling subtree.
 *
 * @example
 * ```ts
 * const step: PathStep = {
 *   siblingIsLeft: true, parentHeight: 1, siblingChunks: 1, siblingEntries: 2,
 *   siblingHash: new Uint8Array(32),
 * };
 * ```
 */
export interface PathStep {
  /** The sibling is the parent's left child (flags bit 7). */
  readonly siblingIsLeft: boolean;
  /** The parent's height, 1 … 48 (flags bits 0–6). */
  readonly parentHeight: number;
  /** Chunks in the sibling subtree. */
  readonly siblingChunks: number;
  /** Entries in the sibling subtree. */
  readonly siblingEntries: number;
  /** The sibling subtree's hash: a 32-byte view into the decoded input. */
  readonly siblingHash: Uint8Array;
}

/**
 * What folding a chunk path yields; all of it is authenticated once `root`
 * equals the trusted root.
 *
 * @example
 * ```ts
 * const { root, index, chunkCount, entryCount, keyHeight } = foldPath(steps, 4, 3, chunkHash);
 * ```
 */
export interface Folded {
  /** The root the path leads to. */
  readonly root: Uint8Array;
  /** The chunk's index. */
  readonly index: number;
  /** Total chunks in the tree. */
  readonly chunkCount: number;
  /** Total entries in the tree. */
  readonly entryCount: number;
  /** Height of the lowest ancestor whose right subtree holds the chunk (0 for chunk 0). */
  readonly keyHeight: number;
}

/**
 * Decodes a chunk path for a chunk of `m` entries in a tree of capacity
 * `capacity` (both decoded before it), throwing the first failing check:
 * `PATH_TOO_LONG`, `CHUNK_FILL`, then per step `HEIGHT_INVALID`,
 * `COUNT_INVALID` (and `TRUNCATED` / varint codes as the bytes run).
 *
 * @example
 * ```ts
 * const r = new Reader(proof, 0x04);
 * const c = r.capacity(), m = r.chunkSize(c); r.hashes(1);
 * const steps = decodePath(r, c, m);
 * ```
 */
export function decodePath(r: Reader, capacity: number, m: number): PathStep[] {
  const len = r.varint();
  if (len > MAX_HEIGHT) fail('PATH_TOO_LONG');
  const fill = Math.ceil(capacity / 2);
  if (len > 0 && m < fill) fail('CHUNK_FILL');
  let height = 0;
  let chunks = 1;
  let entries = m;
  const steps: PathStep[] = [];
  for (let s = 0; s < len; s++) {
    const flags = r.u8();
    const parentHeight = flags & 0x7f;
    if (parentHeight <= height || parentHeight > Math.min(height + 2, MAX_HEIGHT)) fail('HEIGHT_INVALID');
    const siblingChunks = r.varint();
    if (siblingChunks === 0) fail('COUNT_INVALID');
    const siblingEntries = r.varint();
    // A sibling above 2^32 − 1 chunks fails either the count range or the
    // totals (both COUNT_INVALID); testing it first keeps the products below
    // exact: ≤ 2^32 · 4096 = 2^44.
    if (
      siblingChunks > MAX_CHUNKS ||
      siblingEntries < siblingChunks * fill ||
      siblingEntries > siblingChunks * capacity
    )
      fail('COUNT_INVALID');
    chunks += siblingChunks;
    // May round above 2^53, but only when the exact sum is already too big.
    entries += siblingEntries;
    if (chunks > MAX_CHUNKS || entries > MAX_ENTRIES) fail('COUNT_INVALID');
    const siblingHash = r.take(HASH_LEN);
    steps.push({ siblingIsLeft: (flags & 0x80) !== 0, parentHeight, siblingChunks, siblingEntries, siblingHash });
    height = parentHeight;
  }
  return steps;
}

/**
 * Folds `chunkHash` (the hash of a chunk of `m` entries; overwritten) up the
 * decoded path `steps` to the root of a tree of capacity `capacity`.
 *
 * @example
 * ```ts
 * const f = foldPath(steps, capacity, m, chunkHash);
 * if (!equalBytes(f.root, trustedRoot)) throw new ProofError('ROOT_MISMATCH');
 * ```
 */
export function foldPath(steps: readonly PathStep[], capacity: number, m: number, chunkHash: Uint8Array): Folded {
  const h = chunkHash;
  let chunks = 1;
  let entries = m;
  let index = 0;
  let keyHeight = 0;
  for (const s of steps) {
    chunks += s.siblingChunks;
    entries += s.siblingEntries;
    if (s.siblingIsLeft) {
      index += s.siblingChunks;
      if (keyHeight === 0) keyHeight = s.parentHeight;
    }
    innerHashInPlace(s.parentHeight, chunks, entries, h, s.siblingHash, s.siblingIsLeft);
  }
  return { root: rootHash(capacity, chunks, entries, h), index, chunkCount: chunks, entryCount: entries, keyHeight };
}
