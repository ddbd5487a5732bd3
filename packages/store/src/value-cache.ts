/**
 * The answers of reads at the head, kept for the next read of the same key
 * (`docs/store.md`, "The value cache"): a hit answers from memory, with no
 * chunk lookup, no entry record and no hashing. Every answer here was
 * checked against the version's records when it was read.
 *
 * The cache belongs to one root: a version with another root never reads
 * it, so a rollback, a catch-up or a sync cannot leave a stale answer. A
 * commit carries it to the new root without the keys it wrote. Bounded in
 * bytes; the answers evicted first are the oldest not read since the
 * eviction sweep last passed them (second chance: a hit only sets a flag,
 * which costs less than moving the answer to the back on every read).
 * @module
 */

import { compareBytes } from '../../storage/src/checks.ts';

/**
 * Bytes counted for an answer besides its key and value: V8's map entry,
 * key string, typed array and buffer headers (measured with `heapUsed` and
 * `arrayBuffers` on Node 24: about 290 bytes for a 32-byte key).
 */
const ANSWER_BYTES = 320;

/** The default budget of the value cache. */
export const DEFAULT_VALUE_CACHE_BYTES = 16 << 20;

/** A key as a map key: one char a byte, so distinct keys never collide. */
export function cacheKey(key: Uint8Array): string {
  return String.fromCharCode.apply(null, key as unknown as number[]);
}

const answerBytes = (id: string, value: Uint8Array | null): number => id.length + (value?.length ?? 0) + ANSWER_BYTES;

const equal = (a: Uint8Array, b: Uint8Array): boolean => compareBytes(a, b) === 0;

/**
 * Copies of cached values are cut from shared 8 KiB buffers, as Node's
 * `Buffer` pool does: a typed array of its own costs about 1.3 µs to
 * allocate, a view 0.4 µs, and a warm get is a few µs in all. A copy
 * shares its `buffer` with others (read it through `byteOffset` and
 * `byteLength`); values above 1 KiB get their own.
 */
const SLAB_BYTES = 8192;
const SLAB_MAX_VALUE = SLAB_BYTES >> 3;
let slab = new ArrayBuffer(SLAB_BYTES);
let slabUsed = 0;

function copyOut(value: Uint8Array): Uint8Array {
  if (value.length > SLAB_MAX_VALUE) return value.slice();
  if (slabUsed + value.length > SLAB_BYTES) {
    slab = new ArrayBuffer(SLAB_BYTES);
    slabUsed = 0;
  }
  const copy = new Uint8Array(slab, slabUsed, value.length);
  copy.set(value);
  // Each copy starts 8-byte aligned, so that a reader can put any typed view on it.
  slabUsed += (value.length + 7) & ~7;
  return copy;
}

/** An answer: the value, or `null` for a key the version lacks; `used` if read since the sweep passed it. */
interface Answer {
  readonly value: Uint8Array | null;
  used: boolean;
}

export class ValueCache {
  readonly budget: number;
  /** The root of the version whose answers these are; `undefined` holds nothing. */
  #root: Uint8Array | undefined;
  /** A caller's array last found equal to `#root` (callers never change a root's bytes); cleared when the root changes. */
  #rootSeen: Uint8Array | undefined;
  /** By `cacheKey`, in the order the sweep meets them. */
  readonly #answers = new Map<string, Answer>();
  #bytes = 0;
  hits = 0;
  misses = 0;

  constructor(budget: number) {
    this.budget = budget;
  }

  /** Bytes of answers held now, never above the budget. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Answers held now. */
  get count(): number {
    return this.#answers.size;
  }

  /**
   * `key`'s answer in the version whose root is `root`: a copy of its value,
   * `null` for an absent key, `undefined` when not cached.
   */
  get(root: Uint8Array, key: Uint8Array): Uint8Array | null | undefined {
    const id = this.#isRoot(root) ? cacheKey(key) : undefined;
    const answer = id === undefined ? undefined : this.#answers.get(id);
    if (answer === undefined) {
      this.misses++;
      return undefined;
    }
    answer.used = true;
    this.hits++;
    return answer.value === null ? null : copyOut(answer.value);
  }

  /**
   * Keeps `value` (`null`: absent) as `key`'s answer in the version whose
   * root is `root`, if that is the cache's root or the head's (`headRoot`):
   * a cache of another root is dropped for the head's.
   */
  set(root: Uint8Array, headRoot: Uint8Array | undefined, key: Uint8Array, value: Uint8Array | null): void {
    if (this.#root === undefined || !equal(root, this.#root)) {
      if (headRoot === undefined || !equal(root, headRoot)) return;
      this.#rebind(root);
    }
    const id = cacheKey(key);
    this.#remove(id);
    const bytes = answerBytes(id, value);
    if (bytes > this.budget) return;
    this.#answers.set(id, { value: value === null ? null : value.slice(), used: false });
    this.#bytes += bytes;
    this.#sweep();
  }

  /** Evicts down to the budget: an answer read since the last pass goes to the back once, unflagged. */
  #sweep(): void {
    while (this.#bytes > this.budget) {
      const [oldest, answer] = this.#answers.entries().next().value!;
      this.#answers.delete(oldest);
      if (answer.used) {
        answer.used = false;
        this.#answers.set(oldest, answer);
      } else this.#bytes -= answerBytes(oldest, answer.value);
    }
  }

  /**
   * A commit made `to` the head's root from `from`, writing the keys
   * `written` (as `cacheKey`s; `'all'`: keys not listed, every answer
   * goes): the other answers of `from` hold in `to`.
   */
  advance(from: Uint8Array | undefined, to: Uint8Array, written: Iterable<string> | 'all'): void {
    if (written === 'all' || from === undefined || this.#root === undefined || !equal(from, this.#root)) {
      this.#rebind(to);
      return;
    }
    for (const id of written) this.#remove(id);
    this.#root = to.slice();
    this.#rootSeen = undefined;
  }

  /** Whether `root` is the cache's root; the array last found equal is remembered, so that the reads of one version compare no bytes. */
  #isRoot(root: Uint8Array): boolean {
    if (root === this.#rootSeen) return true;
    if (this.#root === undefined || !equal(root, this.#root)) return false;
    this.#rootSeen = root;
    return true;
  }

  #rebind(root: Uint8Array): void {
    this.#answers.clear();
    this.#bytes = 0;
    this.#root = root.slice();
    this.#rootSeen = undefined;
  }

  #remove(id: string): void {
    const answer = this.#answers.get(id);
    if (answer === undefined) return;
    this.#answers.delete(id);
    this.#bytes -= answerBytes(id, answer.value);
  }
}
