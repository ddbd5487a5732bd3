/**
 * Stand-alone verifiers of four proof formats of `spec/proof-format.md`:
 * existence (`0x01`), absence (`0x02`), range (`0x03`) and chunk (`0x04`);
 * the multiproof (`0x0D`) has its own module, `multiproof.ts`.
 * Each checks its arguments, decodes (first failing check wins), then runs
 * the spec's numbered checks in order. Only the trusted root is needed.
 *
 * Keys and values returned are views into the proof bytes, not copies.
 * @module
 */

import { checkKey, checkValue, compareBytes, equalBytes, Reader } from './codec.js';
import {
  FORMAT_ABSENCE,
  FORMAT_CHUNK_PROOF,
  FORMAT_EXISTENCE,
  FORMAT_RANGE,
  HASH_LEN,
  MAX_KEY_LEN,
  MAX_RANGE_LIMIT,
} from './constants.js';
import { fail } from './errors.js';
import { chunkHashInto, emptyRoot, entryHashInto } from './hash.js';
import { multiproofLen, multiproofRoot } from './inchunk.js';
import { bytesArg, limitArg, optBytesArg, rootArg } from './input.js';
import { decodePath, foldPath, type Folded, type PathStep } from './path.js';

/**
 * One entry as a `[key, value]` pair (the shape `@bpavl/wasm` and the Rust
 * core use); both are views into the bytes they were decoded from.
 *
 * @example
 * ```ts
 * const [key, value]: KeyValue = result.entries[0];
 * ```
 */
export type KeyValue = [key: Uint8Array, value: Uint8Array];

/**
 * Where a proven entry sits, authenticated by the root.
 *
 * @example
 * ```ts
 * const { chunkIndex, position, chunkCount, entryCount }: EntryPosition = verifyExistence(root, key, value, proof);
 * ```
 */
export interface EntryPosition {
  /** Index of the chunk holding the entry. */
  readonly chunkIndex: number;
  /** The entry's position in its chunk. */
  readonly position: number;
  /** Total chunks in the tree. */
  readonly chunkCount: number;
  /** Total entries in the tree. */
  readonly entryCount: number;
}

/**
 * A neighbour of an absent key, as proven.
 *
 * @example
 * ```ts
 * const { left } = verifyAbsence(root, key, proof);
 * if (left) console.log(left.key, left.chunkIndex, left.position);
 * ```
 */
export interface Neighbour extends EntryPosition {
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

/**
 * What `verifyAbsence` returns: the proven neighbours of the absent key
 * (`undefined` where the key is beyond the tree's edge; both for the empty tree).
 *
 * @example
 * ```ts
 * const { left, right }: AbsenceResult = verifyAbsence(root, key, proof);
 * ```
 */
export interface AbsenceResult {
  /** The largest entry below the key. */
  readonly left: Neighbour | undefined;
  /** The smallest entry above the key. */
  readonly right: Neighbour | undefined;
}

/**
 * What `verifyRange` returns.
 *
 * @example
 * ```ts
 * const { entries, complete, resumeKey }: RangeResult = verifyRange(root, start, end, 100, proof);
 * ```
 */
export interface RangeResult {
  /** The proven entries with `start ≤ key < end`, in key order. */
  readonly entries: KeyValue[];
  /** True if no entry of the range was left out. */
  readonly complete: boolean;
  /** When incomplete: the first key not returned, where the next query starts. */
  readonly resumeKey: Uint8Array | undefined;
}

/**
 * What `verifyChunkProof` returns, authenticated by the root.
 *
 * @example
 * ```ts
 * const { index, chunkCount, entryCount, keyHeight }: ChunkPosition = verifyChunkProof(root, proof);
 * ```
 */
export interface ChunkPosition {
  /** The chunk's index. */
  readonly index: number;
  /** Total chunks in the tree. */
  readonly chunkCount: number;
  /** Total entries in the tree. */
  readonly entryCount: number;
  /** Height of the inner node holding the chunk's smallest key (0 for chunk 0). */
  readonly keyHeight: number;
}

/** `M, pos, hashes, chunk path` of one entry. */
interface Witness {
  readonly m: number;
  readonly pos: number;
  readonly hashes: Uint8Array;
  readonly path: PathStep[];
}

function decodeWitness(r: Reader, capacity: number): Witness {
  const m = r.chunkSize(capacity);
  const pos = r.varint();
  if (pos >= m) fail('POSITION_INVALID');
  const hashes = r.hashes(multiproofLen(m, pos, pos + 1));
  const path = decodePath(r, capacity, m);
  return { m, pos, hashes, path };
}

/** Folds in-range leaf hashes `[lo, lo + n)` of a chunk of `m` entries up to the root. */
function foldLeaves(capacity: number, m: number, lo: number, leaves: Uint8Array, hashes: Uint8Array, path: PathStep[]): Folded {
  const inchunk = multiproofRoot(m, lo, leaves, hashes);
  chunkHashInto(m, inchunk, 0, inchunk, 0);
  return foldPath(path, capacity, m, inchunk);
}

/** Folds one entry through its witness; `ROOT_MISMATCH` unless it reaches `root`. */
function foldEntry(root: Uint8Array, capacity: number, w: Witness, key: Uint8Array, value: Uint8Array): EntryPosition {
  const leaf = new Uint8Array(HASH_LEN);
  entryHashInto(key, value, leaf, 0);
  const f = foldLeaves(capacity, w.m, w.pos, leaf, w.hashes, w.path);
  if (!equalBytes(f.root, root)) fail('ROOT_MISMATCH');
  return { chunkIndex: f.index, position: w.pos, chunkCount: f.chunkCount, entryCount: f.entryCount };
}

/**
 * Checks that `key` holds `value` in the tree with root `root`, given an
 * existence proof (`0x01`). Inputs are checked before decoding (`KEY_EMPTY`,
 * `KEY_TOO_LONG`, `VALUE_TOO_LONG`).
 *
 * @throws {TypeError} an argument is not a Uint8Array.
 * @throws {RangeError} `root` is not 32 bytes.
 * @throws {ProofError} with the first failing check's code (`ROOT_MISMATCH`, a decoding code, …).
 * @example
 * ```ts
 * const { chunkIndex, position, chunkCount, entryCount } = verifyExistence(root, key, value, proof);
 * ```
 */
export function verifyExistence(root: Uint8Array, key: Uint8Array, value: Uint8Array, proof: Uint8Array): EntryPosition {
  root = rootArg(root);
  key = bytesArg(key, 'key');
  value = bytesArg(value, 'value');
  proof = bytesArg(proof, 'proof');
  checkKey(key);
  checkValue(value);
  const r = new Reader(proof, FORMAT_EXISTENCE);
  const capacity = r.capacity();
  const w = decodeWitness(r, capacity);
  r.finish();
  return foldEntry(root, capacity, w, key, value);
}

interface DecodedNeighbour {
  readonly key: Uint8Array;
  readonly value: Uint8Array;
  readonly w: Witness;
}

function decodeNeighbour(r: Reader, capacity: number): DecodedNeighbour {
  const key = r.key();
  const value = r.value();
  return { key, value, w: decodeWitness(r, capacity) };
}

function foldNeighbour(root: Uint8Array, capacity: number, n: DecodedNeighbour): Neighbour {
  const p = foldEntry(root, capacity, n.w, n.key, n.value);
  return { key: n.key, value: n.value, ...p };
}

/**
 * Checks that `key` is absent from the tree with root `root`, given an
 * absence proof (`0x02`); returns the proven neighbours. The key is checked
 * first (`KEY_EMPTY`, `KEY_TOO_LONG`).
 *
 * @throws {TypeError} an argument is not a Uint8Array.
 * @throws {RangeError} `root` is not 32 bytes.
 * @throws {ProofError} `ROOT_MISMATCH`, `ABSENCE_INVALID`, `FLAGS_INVALID`, a decoding code, …
 * @example
 * ```ts
 * verifyAbsence(root, new TextEncoder().encode('mallory'), proof); // throws unless absent
 * ```
 */
export function verifyAbsence(root: Uint8Array, key: Uint8Array, proof: Uint8Array): AbsenceResult {
  root = rootArg(root);
  key = bytesArg(key, 'key');
  proof = bytesArg(proof, 'proof');
  checkKey(key);
  const r = new Reader(proof, FORMAT_ABSENCE);
  const capacity = r.capacity();
  const flags = r.u8();
  if ((flags & ~0b11) !== 0) fail('FLAGS_INVALID');
  const dl = flags & 1 ? decodeNeighbour(r, capacity) : undefined;
  const dr = flags & 2 ? decodeNeighbour(r, capacity) : undefined;
  r.finish();
  // 1. No neighbour: the empty tree.
  if (dl === undefined && dr === undefined) {
    if (!equalBytes(emptyRoot(capacity), root)) fail('ROOT_MISMATCH');
    return { left: undefined, right: undefined };
  }
  // 2. Each neighbour present, left first, folds to the root.
  const left = dl && foldNeighbour(root, capacity, dl);
  const right = dr && foldNeighbour(root, capacity, dr);
  // 3. Order, adjacency, edges.
  let ok: boolean;
  if (left && right) {
    ok = compareBytes(left.key, key) < 0 && compareBytes(key, right.key) < 0 && adjacent(left, dl!.w.m, right);
  } else if (left) {
    ok = compareBytes(left.key, key) < 0 && left.chunkIndex + 1 === left.chunkCount && left.position + 1 === dl!.w.m;
  } else {
    ok = compareBytes(key, right!.key) < 0 && right!.chunkIndex === 0 && right!.position === 0;
  }
  if (!ok) fail('ABSENCE_INVALID');
  return { left, right };
}

/** Whether the entry at `b` directly follows the one at `a` (in a chunk of `aM` entries). */
function adjacent(a: EntryPosition, aM: number, b: EntryPosition): boolean {
  if (a.chunkIndex === b.chunkIndex) return b.position === a.position + 1;
  return b.chunkIndex === a.chunkIndex + 1 && a.position + 1 === aM && b.position === 0;
}

/** Range-query checks, before decoding, in the spec's order (also run by the query client before it asks). Internal. */
export function checkRangeQuery(start: Uint8Array, end: Uint8Array | undefined, limit: number): void {
  if (start.length > MAX_KEY_LEN) fail('KEY_TOO_LONG');
  if (end !== undefined) checkKey(end);
  if (limit < 1 || limit > MAX_RANGE_LIMIT || (end !== undefined && compareBytes(end, start) <= 0))
    fail('QUERY_INVALID');
}

interface Segment {
  readonly m: number;
  readonly lo: number;
  readonly entries: KeyValue[];
  readonly hashes: Uint8Array;
  readonly path: PathStep[];
}

/**
 * Checks a range proof (`0x03`) for the query `start ≤ key < end` (`end`
 * `undefined` or `null`: unbounded; `start` may be empty), at most `limit`
 * entries, against `root`; returns the proven entries. The query is checked
 * before decoding: `KEY_TOO_LONG`, `KEY_EMPTY` (empty `end`), `QUERY_INVALID`
 * (`limit` outside 1 … 65536, or `end ≤ start`).
 *
 * @throws {TypeError} a byte argument is not a Uint8Array, or `limit` is not an integer.
 * @throws {RangeError} `root` is not 32 bytes.
 * @throws {ProofError} `ROOT_MISMATCH`, `RANGE_INVALID`, `QUERY_INVALID`, a decoding code, …
 * @example
 * ```ts
 * let start = new Uint8Array(0), all = [];
 * for (;;) {
 *   const { entries, complete, resumeKey } = verifyRange(root, start, undefined, 100, await fetchRange(start));
 *   all.push(...entries);
 *   if (complete) break;
 *   start = resumeKey!;
 * }
 * ```
 */
export function verifyRange(
  root: Uint8Array,
  start: Uint8Array,
  end: Uint8Array | undefined | null,
  limit: number,
  proof: Uint8Array,
): RangeResult {
  root = rootArg(root);
  start = bytesArg(start, 'start');
  const endKey = optBytesArg(end, 'end');
  limit = limitArg(limit);
  proof = bytesArg(proof, 'proof');
  checkRangeQuery(start, endKey, limit);
  const { capacity, segments } = decodeRange(proof);

  // 1. No segments: the empty tree.
  if (segments.length === 0) {
    if (!equalBytes(emptyRoot(capacity), root)) fail('ROOT_MISMATCH');
    return { entries: [], complete: true, resumeKey: undefined };
  }
  // 2. Every segment folds to the root.
  const folds: Folded[] = [];
  for (const s of segments) {
    const leaves = new Uint8Array(s.entries.length * HASH_LEN);
    s.entries.forEach(([k, v], i) => entryHashInto(k, v, leaves, i * HASH_LEN));
    const f = foldLeaves(capacity, s.m, s.lo, leaves, s.hashes, s.path);
    if (!equalBytes(f.root, root)) fail('ROOT_MISMATCH');
    folds.push(f);
  }
  // 3. Contiguous: next chunk, previous ends at hi = M, next starts at lo = 0.
  for (let i = 1; i < segments.length; i++) {
    const a = segments[i - 1]!;
    if (folds[i]!.index !== folds[i - 1]!.index + 1 || a.lo + a.entries.length !== a.m || segments[i]!.lo !== 0)
      fail('RANGE_INVALID');
  }
  // 4. The window is exactly what a prover builds.
  const first = segments[0]!;
  const last = segments[segments.length - 1]!;
  const lastFold = folds[folds.length - 1]!;
  const startsTree = folds[0]!.index === 0 && first.lo === 0;
  const endsTree = lastFold.index + 1 === lastFold.chunkCount && last.lo + last.entries.length === last.m;
  const window = segments.length === 1 ? first.entries : segments.flatMap((s) => s.entries);
  return checkWindow(window, start, endKey, limit, startsTree, endsTree);
}

/** Decodes a range proof (`0x03`) without checking it against a root; throws the decoding codes. */
function decodeRange(proof: Uint8Array): { capacity: number; segments: Segment[] } {
  const r = new Reader(proof, FORMAT_RANGE);
  const capacity = r.capacity();
  const count = r.varint();
  const segments: Segment[] = [];
  let prev: Uint8Array | undefined;
  // Every segment takes bytes, so a huge count ends in TRUNCATED.
  for (let s = 0; s < count; s++) {
    const m = r.chunkSize(capacity);
    const lo = r.varint();
    if (lo >= m) fail('POSITION_INVALID');
    const hi = r.varint();
    if (hi <= lo || hi > m) fail('POSITION_INVALID');
    const entries: KeyValue[] = [];
    for (let i = lo; i < hi; i++) {
      const key = r.key();
      if (prev !== undefined && compareBytes(key, prev) <= 0) fail('KEYS_NOT_SORTED');
      prev = key;
      entries.push([key, r.value()]);
    }
    const hashes = r.hashes(multiproofLen(m, lo, hi));
    const path = decodePath(r, capacity, m);
    segments.push({ m, lo, entries, hashes, path });
  }
  r.finish();
  return { capacity, segments };
}

/**
 * How many entries of a range proof's window fall in `[start, end)`: its
 * results, plus its successor when that is below `end`. Decodes only, checks
 * nothing against a root; for a `RANGE` answer cut to fit (`spec/wire.md`,
 * "Requests"), this count minus one is the `limit` it was built for.
 *
 * @throws {ProofError} a decoding code.
 * @example
 * ```ts
 * const k = rangeWindowCount(proof, start, end) - 1; // then verifyRange(root, start, end, k, proof)
 * ```
 */
export function rangeWindowCount(proof: Uint8Array, start: Uint8Array, end: Uint8Array | undefined): number {
  let n = 0;
  for (const s of decodeRange(proof).segments) {
    for (const [k] of s.entries) if (compareBytes(k, start) >= 0 && (end === undefined || compareBytes(k, end) < 0)) n++;
  }
  return n;
}

/** Checks that an authenticated, contiguous window is exactly the prover's, and extracts the results. */
function checkWindow(
  window: KeyValue[],
  start: Uint8Array,
  end: Uint8Array | undefined,
  limit: number,
  startsTree: boolean,
  endsTree: boolean,
): RangeResult {
  const belowEnd = (k: Uint8Array): boolean => end === undefined || compareBytes(k, end) < 0;
  let i = 0;
  if (compareBytes(window[0]![0], start) < 0) i = 1; // the left neighbour
  else if (!startsTree) fail('RANGE_INVALID');
  const entries: KeyValue[] = [];
  while (i < window.length && belowEnd(window[i]![0]) && entries.length < limit) {
    if (compareBytes(window[i]![0], start) < 0) fail('RANGE_INVALID');
    entries.push(window[i]!);
    i++;
  }
  const rest = window.length - i;
  if (rest === 0 && endsTree) return { entries, complete: true, resumeKey: undefined };
  if (rest === 1) {
    const succ = window[i]![0];
    if (!belowEnd(succ)) return { entries, complete: true, resumeKey: undefined };
    return { entries, complete: false, resumeKey: succ };
  }
  return fail('RANGE_INVALID');
}

/**
 * Checks a chunk proof (`0x04`) against `root`: a chunk of `M` entries with
 * the proof's in-chunk root sits at the returned index. Returns the index,
 * the totals and the chunk's key-height, all authenticated.
 *
 * @throws {TypeError} an argument is not a Uint8Array.
 * @throws {RangeError} `root` is not 32 bytes.
 * @throws {ProofError} `ROOT_MISMATCH` or a decoding code.
 * @example
 * ```ts
 * const { index, chunkCount, entryCount, keyHeight } = verifyChunkProof(root, proof);
 * ```
 */
export function verifyChunkProof(root: Uint8Array, proof: Uint8Array): ChunkPosition {
  root = rootArg(root);
  proof = bytesArg(proof, 'proof');
  const r = new Reader(proof, FORMAT_CHUNK_PROOF);
  const capacity = r.capacity();
  const m = r.chunkSize(capacity);
  const chunkRoot = r.take(HASH_LEN);
  const path = decodePath(r, capacity, m);
  r.finish();
  const h = new Uint8Array(HASH_LEN);
  chunkHashInto(m, chunkRoot, 0, h, 0);
  const f = foldPath(path, capacity, m, h);
  if (!equalBytes(f.root, root)) fail('ROOT_MISMATCH');
  return { index: f.index, chunkCount: f.chunkCount, entryCount: f.entryCount, keyHeight: f.keyHeight };
}
