/**
 * Deterministic workloads for `bpavl serve` and `bpavl generate`.
 *
 * Seed 0 is exactly the standard workload of `crates/bench/src/workload.rs`:
 *
 * - `key_i = SHA-256(u64be(i))`;
 * - `value_i = u64be(i) ‖ first 504 bytes of (B_0 ‖ … ‖ B_15)`, `B_j = SHA-256(key_i ‖ u8(j))`.
 *
 * Any other seed `S` only changes the keys: `key_i = SHA-256(u64be(S) ‖ u64be(i))`;
 * values are derived from the key the same way (512 bytes each). Entries are
 * inserted in ascending `i`, so a seed, a count and a capacity fix the root.
 * @module
 */

import { hash } from 'node:crypto';
import { Tree } from '@bpavl/wasm';

/** Every value is this long. */
export const VALUE_LEN = 512;

/** A workload: how many entries, with which seed (`0` = the standard workload). */
export interface WorkloadSpec {
  entryCount: number;
  seed: bigint;
}

function be64(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v);
  return b;
}

/**
 * Entry `i` of the workload as `[key, value]`.
 *
 * @example
 * ```ts
 * const [key, value] = workloadEntry(0n, 0); // key = SHA-256(8 zero bytes), value.length = 512
 * ```
 */
export function workloadEntry(seed: bigint, i: number): [Uint8Array, Uint8Array] {
  const index = be64(BigInt(i));
  // crypto.hash (one-shot) is the fastest SHA-256 here for these tiny inputs.
  const key = new Uint8Array(seed === 0n ? hash('sha256', index, 'buffer') : hash('sha256', concat(be64(seed), index), 'buffer'));
  const value = new Uint8Array(VALUE_LEN);
  value.set(index, 0);
  const block = new Uint8Array(key.length + 1);
  block.set(key, 0);
  for (let j = 0; j < 16; j++) {
    block[key.length] = j;
    const b = hash('sha256', block, 'buffer');
    const at = 8 + 32 * j;
    value.set(b.subarray(0, Math.min(32, VALUE_LEN - at)), at);
  }
  return [key, value];
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * Builds and commits the tree of a workload (version 1). Call `init()` from
 * `@bpavl/wasm` first. Throws `RangeError` for a negative or non-integer count
 * or a seed outside u64; a bad capacity throws the WASM `TreeError` `CAPACITY_INVALID`.
 * `onEntry`, if given, also receives every entry in order (e.g. to build the
 * Baseline state from the same entries without generating them twice).
 */
export function buildWorkloadTree(spec: WorkloadSpec, capacity: number, onEntry?: (key: Uint8Array, value: Uint8Array) => void): Tree {
  checkSpec(spec);
  const tree = new Tree(capacity);
  insertEntries(tree, spec.seed, 0, spec.entryCount, onEntry);
  tree.commit();
  return tree;
}

/** Inserts the workload's entries `from` … `to - 1` into `tree`, each also handed to `onEntry`. */
function insertEntries(tree: Tree, seed: bigint, from: number, to: number, onEntry?: (key: Uint8Array, value: Uint8Array) => void): void {
  for (let i = from; i < to; i++) {
    const [key, value] = workloadEntry(seed, i);
    tree.insert(key, value);
    onEntry?.(key, value);
  }
}

function checkSpec(spec: WorkloadSpec): void {
  if (!Number.isSafeInteger(spec.entryCount) || spec.entryCount < 0) throw new RangeError(`entries must be a non-negative integer, got ${spec.entryCount}`);
  if (spec.seed < 0n || spec.seed >= 1n << 64n) throw new RangeError('seed must fit in an unsigned 64-bit integer');
}

/** Entries {@link buildWorkloadTreeInSlices} inserts between two turns of the event loop. */
const BUILD_SLICE = 4096;

/**
 * {@link buildWorkloadTree}, letting the event loop run every few thousand
 * entries (a signal handler, for one) and asking `stopped()` then: resolves
 * to `undefined`, the tree freed, once it says so (`bpavl serve --entries N`
 * stops during its build).
 */
export async function buildWorkloadTreeInSlices(spec: WorkloadSpec, capacity: number, stopped: () => boolean): Promise<Tree | undefined> {
  checkSpec(spec);
  const tree = new Tree(capacity);
  try {
    for (let from = 0; from < spec.entryCount; from += BUILD_SLICE) {
      await new Promise((resolve) => setImmediate(resolve));
      if (stopped()) {
        tree.free();
        return undefined;
      }
      insertEntries(tree, spec.seed, from, Math.min(spec.entryCount, from + BUILD_SLICE));
    }
    tree.commit();
    return tree;
  } catch (e) {
    tree.free();
    throw e;
  }
}

/** One write of a moving head's stream: a put (insert or update) or a delete. */
export type HeadWrite = { key: Uint8Array; value: Uint8Array } | { key: Uint8Array; value: undefined };

/**
 * Batch `step` (1, 2, …) of a moving head's writes over the workload of
 * `seed` with `entryCount` entries: `count` writes, each drawn from
 * `r_j = SHA-256(u64be(seed) ‖ u64be(step) ‖ u64be(j))`. With `x` =
 * `r_j`'s first 8 bytes as an integer and `i = x mod entryCount`: 8 in
 * 10 writes (by `r_j[8] mod 10`, 0 … 7) update `key_i`, 1 in 10 (8)
 * puts the extra key `e_k = SHA-256(u64be(seed) ‖ u64be(0) ‖ u64be(k))`,
 * `k = x mod max(1, ⌊entryCount / 10⌋)` (new the first time, so a head
 * that moves for ever holds at most a tenth more keys than it started
 * with), 1 in 10 (9) deletes `key_i`; a written value is `u64be(step) ‖
 * the first 504 bytes of SHA-256(r_j ‖ 0) ‖ … ‖ SHA-256(r_j ‖ 15)`. Peers
 * that apply the same batches in the same order to the same tree commit
 * the same roots (the demo's moving head, `bpavl-testnet serve
 * --advance-on-stdin`). A delete of an absent key changes nothing.
 */
export function headWrites(seed: bigint, entryCount: number, step: number, count: number): HeadWrite[] {
  if (!Number.isSafeInteger(step) || step < 1) throw new RangeError(`step must be a positive integer, got ${step}`);
  const writes: HeadWrite[] = [];
  const stream = (at: number, j: bigint) => new Uint8Array(hash('sha256', concat(be64(seed), concat(be64(BigInt(at)), be64(j))), 'buffer'));
  const extraKeys = BigInt(Math.max(1, Math.floor(entryCount / 10)));
  for (let j = 0; j < count; j++) {
    const r = stream(step, BigInt(j));
    const x = new DataView(r.buffer).getBigUint64(0);
    const pick = entryCount > 0 ? Number(x % BigInt(entryCount)) : 0;
    const what = r[8]! % 10;
    if (what === 9 && entryCount > 0) writes.push({ key: workloadEntry(seed, pick)[0], value: undefined });
    else {
      const value = new Uint8Array(VALUE_LEN);
      value.set(be64(BigInt(step)), 0);
      const block = new Uint8Array(33);
      block.set(r, 0);
      for (let b = 0; b < 16; b++) {
        block[32] = b;
        const at = 8 + 32 * b;
        value.set(new Uint8Array(hash('sha256', block, 'buffer')).subarray(0, Math.min(32, VALUE_LEN - at)), at);
      }
      writes.push({ key: what === 8 || entryCount === 0 ? stream(0, x % extraKeys) : workloadEntry(seed, pick)[0], value });
    }
  }
  return writes;
}
