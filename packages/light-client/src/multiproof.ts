/**
 * The stand-alone verifier of multiproofs (`spec/proof-format.md`, format
 * `0x0D`): many keys' values or absences, proven by one pruned copy of the
 * tree above the revealed entries. Arguments are checked first, then the
 * proof is decoded (first failing check wins), then the spec's numbered
 * checks run in order. Values returned are views into the proof bytes.
 * @module
 */

import { checkKey, compareBytes, equalBytes, Reader } from './codec.js';
import { FORMAT_MULTIPROOF, HASH_LEN, MAX_CHUNKS, MAX_ENTRIES, MAX_HEIGHT, MAX_MULTIPROOF_KEYS } from './constants.js';
import { fail } from './errors.js';
import { chunkHashInto, emptyRoot, entryHashInto, innerHashInPlace, rootHash } from './hash.js';
import { inchunkParent, leftSize } from './inchunk.js';
import { bytesArg, rootArg } from './input.js';

/**
 * What {@link verifyMultiproof} returns: per asked key, in order, its value
 * (`undefined` when proven absent), and the tree's totals.
 *
 * @example
 * ```ts
 * const { values }: MultiproofResult = verifyMultiproof(root, keys, proof);
 * ```
 */
export interface MultiproofResult {
  readonly values: (Uint8Array | undefined)[];
  readonly chunkCount: number;
  readonly entryCount: number;
}

interface Revealed {
  readonly pos: number;
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

type MultiNode =
  | { readonly tag: 0; readonly chunks: number; readonly entries: number; readonly hash: Uint8Array }
  | { readonly tag: 1; readonly height: number; readonly left: MultiNode; readonly right: MultiNode; readonly chunks: number; readonly entries: number }
  | { readonly tag: 2; readonly m: number; readonly revealed: Revealed[]; readonly hashes: Uint8Array; readonly chunks: 1; readonly entries: number };

/** A revealed entry and where it sits. */
interface Placed extends Revealed {
  readonly index: number;
  readonly m: number;
}

/**
 * `sparse(M, P)`: how many in-chunk hashes a revealed chunk with the
 * (increasing) positions `positions` carries (`spec/hashing.md`).
 *
 * @example
 * ```ts
 * sparseLen(5, [2]); // 3, as multiproofLen(5, 2, 3)
 * ```
 */
export function sparseLen(m: number, positions: readonly number[]): number {
  const walk = (a: number, n: number, lo: number, hi: number): number => {
    if (lo === hi) return 1;
    if (n === 1) return 0;
    const k = leftSize(n);
    const split = splitAt(positions, lo, hi, a + k);
    return walk(a, k, lo, split) + walk(a + k, n - k, split, hi);
  };
  return walk(0, m, 0, positions.length);
}

/** The first index in `[lo, hi)` of the increasing `positions` whose position is ≥ `bound`. */
function splitAt(positions: readonly number[], lo: number, hi: number, bound: number): number {
  let i = lo;
  while (i < hi && positions[i]! < bound) i++;
  return i;
}

/** Multiproof query checks, before decoding, in the spec's order. Internal. */
export function checkMultiproofQuery(keys: readonly Uint8Array[]): void {
  if (keys.length === 0 || keys.length > MAX_MULTIPROOF_KEYS) fail('QUERY_INVALID');
  for (let i = 0; i < keys.length; i++) {
    checkKey(keys[i]!);
    if (i > 0 && compareBytes(keys[i - 1]!, keys[i]!) >= 0) fail('KEYS_NOT_SORTED');
  }
}

/**
 * Checks a multiproof (`0x0D`) for `keys` (strictly increasing) against
 * `root`; returns each key's value (`undefined` when absent) and the totals.
 *
 * @throws {TypeError} an argument is not a Uint8Array (or `keys` not an array of them).
 * @throws {RangeError} `root` is not 32 bytes.
 * @throws {ProofError} `ROOT_MISMATCH`, `ABSENCE_INVALID`, `MULTIPROOF_INVALID`, a decoding code, …
 * @example
 * ```ts
 * const { values } = verifyMultiproof(root, [keyA, keyB], proof);
 * ```
 */
export function verifyMultiproof(root: Uint8Array, keys: readonly Uint8Array[], proof: Uint8Array): MultiproofResult {
  root = rootArg(root);
  if (!Array.isArray(keys)) throw new TypeError('keys must be an array of Uint8Array');
  keys = keys.map((k) => bytesArg(k, 'key'));
  proof = bytesArg(proof, 'proof');
  checkMultiproofQuery(keys);
  const r = new Reader(proof, FORMAT_MULTIPROOF);
  const capacity = r.capacity();
  const top = decodeNode(r, capacity, undefined, { prev: undefined });
  r.finish();
  // 1. The empty tree.
  if (top === undefined) {
    if (!equalBytes(emptyRoot(capacity), root)) fail('ROOT_MISMATCH');
    return { values: keys.map(() => undefined), chunkCount: 0, entryCount: 0 };
  }
  // 2. Hash bottom-up.
  const placed: Placed[] = [];
  const topHash = hashNode(top, { index: 0 }, placed);
  if (!equalBytes(rootHash(capacity, top.chunks, top.entries, topHash), root)) fail('ROOT_MISMATCH');
  // 3 and 4. Each key's answer, and nothing revealed in vain.
  return { values: answer(keys, placed, top.chunks), chunkCount: top.chunks, entryCount: top.entries };
}

function decodeNode(r: Reader, capacity: number, parent: number | undefined, last: { prev: Uint8Array | undefined }): MultiNode | undefined {
  const tag = r.u8();
  let node: MultiNode;
  if (tag === 3 && parent === undefined) return undefined;
  if (tag === 0 && parent !== undefined) {
    const chunks = r.varint();
    if (chunks === 0) fail('COUNT_INVALID');
    const entries = r.varint();
    if (chunks > MAX_CHUNKS || entries < chunks * Math.ceil(capacity / 2) || entries > chunks * capacity) fail('COUNT_INVALID');
    node = { tag, chunks, entries, hash: r.take(HASH_LEN) };
  } else if (tag === 1) {
    const height = r.u8();
    if (height === 0 || height > MAX_HEIGHT || (parent !== undefined && !(height < parent && parent <= height + 2))) fail('HEIGHT_INVALID');
    const left = decodeNode(r, capacity, height, last)!;
    const right = decodeNode(r, capacity, height, last)!;
    if (left.tag === 0 && right.tag === 0) fail('MULTIPROOF_INVALID');
    node = { tag, height, left, right, chunks: left.chunks + right.chunks, entries: left.entries + right.entries };
  } else if (tag === 2) {
    const m = r.chunkSize(capacity);
    if (parent !== undefined) {
      if (m < Math.ceil(capacity / 2)) fail('CHUNK_FILL');
      if (parent > 2) fail('HEIGHT_INVALID');
    }
    const count = r.varint();
    if (count === 0 || count > m) fail('POSITION_INVALID');
    const revealed: Revealed[] = [];
    for (let i = 0; i < count; i++) {
      const pos = r.varint();
      if (pos >= m || (i > 0 && pos <= revealed[i - 1]!.pos)) fail('POSITION_INVALID');
      const key = r.key();
      if (last.prev !== undefined && compareBytes(key, last.prev) <= 0) fail('KEYS_NOT_SORTED');
      last.prev = key;
      revealed.push({ pos, key, value: r.value() });
    }
    const hashes = r.hashes(sparseLen(m, revealed.map((e) => e.pos)));
    node = { tag, m, revealed, hashes, chunks: 1, entries: m };
  } else {
    return fail('FLAGS_INVALID');
  }
  if (node.chunks > MAX_CHUNKS || node.entries > MAX_ENTRIES) fail('COUNT_INVALID');
  return node;
}

/** The node's hash; `at.index` counts the chunks left of it, `placed` collects revealed entries in key order. */
function hashNode(node: MultiNode, at: { index: number }, placed: Placed[]): Uint8Array {
  switch (node.tag) {
    case 0:
      at.index += node.chunks;
      return node.hash;
    case 1: {
      // A copy to hash into: `slice` of a Node Buffer (a proof passed as one) would share its bytes.
      const left = new Uint8Array(hashNode(node.left, at, placed));
      const right = hashNode(node.right, at, placed);
      innerHashInPlace(node.height, node.chunks, node.entries, left, right, false);
      return left;
    }
    case 2: {
      for (const e of node.revealed) placed.push({ ...e, index: at.index, m: node.m });
      at.index += 1;
      const leaves = node.revealed.map((e) => {
        const h = new Uint8Array(HASH_LEN);
        entryHashInto(e.key, e.value, h, 0);
        return h;
      });
      const positions = node.revealed.map((e) => e.pos);
      let cursor = 0;
      const walk = (a: number, n: number, lo: number, hi: number): Uint8Array => {
        if (lo === hi) return node.hashes.subarray(cursor, (cursor += HASH_LEN));
        if (n === 1) return leaves[lo]!;
        const k = leftSize(n);
        const split = splitAt(positions, lo, hi, a + k);
        const left = walk(a, k, lo, split);
        return inchunkParent(left, walk(a + k, n - k, split, hi));
      };
      const chunkRoot = walk(0, node.m, 0, leaves.length);
      const out = new Uint8Array(HASH_LEN);
      chunkHashInto(node.m, chunkRoot, 0, out, 0);
      return out;
    }
  }
}

/** Steps 3 and 4: each key's value or proven absence, and every revealed entry needed. */
function answer(keys: readonly Uint8Array[], placed: readonly Placed[], chunkCount: number): (Uint8Array | undefined)[] {
  const adjacent = (a: Placed, b: Placed) =>
    a.index === b.index ? b.pos === a.pos + 1 : b.index === a.index + 1 && a.pos + 1 === a.m && b.pos === 0;
  const used = new Array<boolean>(placed.length).fill(false);
  const values: (Uint8Array | undefined)[] = [];
  let i = 0;
  for (const key of keys) {
    while (i < placed.length && compareBytes(placed[i]!.key, key) < 0) i++;
    if (i < placed.length && equalBytes(placed[i]!.key, key)) {
      used[i] = true;
      values.push(placed[i]!.value);
      continue;
    }
    const left = i > 0 ? placed[i - 1] : undefined;
    const right = placed[i];
    const ok =
      left && right
        ? adjacent(left, right)
        : left
          ? left.index + 1 === chunkCount && left.pos + 1 === left.m
          : right
            ? right.index === 0 && right.pos === 0
            : false;
    if (!ok) fail('ABSENCE_INVALID');
    if (left) used[i - 1] = true;
    if (right) used[i] = true;
    values.push(undefined);
  }
  if (used.includes(false)) fail('MULTIPROOF_INVALID');
  return values;
}
