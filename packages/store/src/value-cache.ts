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

/**
 * Bytes counted for an answer besides its key and value: V8's map entry,
 * the answer object, its two views and their buffer. `heapUsed` plus
 * `arrayBuffers` after a full collection grow by 157 bytes an answer
 * beyond its key and value (Node 24, 100,000 answers of 32-byte keys and
 * 512-byte values); the margin is for the allocator's own headers, which
 * neither shows.
 */
const ANSWER_BYTES = 320;

/** The default budget of the value cache. */
export const DEFAULT_VALUE_CACHE_BYTES = 16 << 20;

/** A key as a set member: one char a byte, so distinct keys never collide. */
export function cacheKey(key: Uint8Array): string {
  return String.fromCharCode.apply(null, key as unknown as number[]);
}

/** The key a {@link cacheKey} was made from. */
const keyOf = (id: string): Uint8Array => Uint8Array.from(id, (c) => c.charCodeAt(0));

/**
 * Answers whose keys share a hash that a chain holds at most: a read then
 * compares at most this many keys, however the keys were chosen (a remote
 * client picks the keys `bpavl serve --db` proves, and their answers are
 * kept). An answer that would make a chain longer is not kept.
 */
export const MAX_CHAIN = 4;

/** Drawn once per process, so that which keys share a hash cannot be known ahead. */
const SEED = crypto.getRandomValues(new Uint32Array(1))[0]!;

/**
 * FNV-1a of `key` from a random start, cut to 30 bits so that V8 keeps it
 * a small integer: a map by number costs a warm get about 0.2 µs less than
 * one by a string of the key, made for each lookup (measured). Distinct
 * keys may share a hash: they share a chain.
 */
function hashKey(key: Uint8Array): number {
  let h = 0x811c9dc5 ^ SEED;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key[i]!, 0x01000193);
  return h & 0x3fffffff;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

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

/**
 * An answer: its key, the value (`null` for a key the version lacks), both
 * views on one buffer; `used` if read since the sweep passed it; the next
 * answer whose key has the same hash.
 */
interface Answer {
  readonly key: Uint8Array;
  readonly value: Uint8Array | null;
  used: boolean;
  next: Answer | undefined;
}

const answerBytes = (a: Answer): number => a.key.length + (a.value?.length ?? 0) + ANSWER_BYTES;

export class ValueCache {
  readonly budget: number;
  readonly #hash: (key: Uint8Array) => number;
  /** The root of the version whose answers these are; `undefined` holds nothing. */
  #root: Uint8Array | undefined;
  /** A caller's array last found equal to `#root` (callers never change a root's bytes); cleared when the root changes. */
  #rootSeen: Uint8Array | undefined;
  /** Chains of answers by `hashKey`, in the order the sweep meets them. */
  readonly #answers = new Map<number, Answer>();
  #count = 0;
  #bytes = 0;
  hits = 0;
  misses = 0;

  /** `hash` is for tests, which make keys collide. */
  constructor(budget: number, hash: (key: Uint8Array) => number = hashKey) {
    this.budget = budget;
    this.#hash = hash;
  }

  /** Bytes of answers held now, never above the budget. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Answers held now. */
  get count(): number {
    return this.#count;
  }

  /**
   * `key`'s answer in the version whose root is `root`: a copy of its value,
   * `null` for an absent key, `undefined` when not cached.
   */
  get(root: Uint8Array, key: Uint8Array): Uint8Array | null | undefined {
    const answer = this.#find(root, key);
    if (answer === undefined) {
      this.misses++;
      return undefined;
    }
    answer.used = true;
    this.hits++;
    return answer.value === null ? null : copyOut(answer.value);
  }

  /**
   * `key`'s value in the version whose root is `root`, if cached and
   * present, as `get` finds it but neither counted as a read nor kept from
   * eviction, and not copied: the caller must not change it.
   */
  peek(root: Uint8Array, key: Uint8Array): Uint8Array | undefined {
    return this.#find(root, key)?.value ?? undefined;
  }

  #find(root: Uint8Array, key: Uint8Array): Answer | undefined {
    let answer = this.#isRoot(root) ? this.#answers.get(this.#hash(key)) : undefined;
    while (answer !== undefined && !equal(answer.key, key)) answer = answer.next;
    return answer;
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
    this.#remove(key);
    const h = this.#hash(key);
    const chain = this.#answers.get(h);
    let length = 0;
    for (let a = chain; a !== undefined; a = a.next) length++;
    if (length >= MAX_CHAIN) return;
    const both = new Uint8Array(key.length + (value?.length ?? 0));
    both.set(key);
    if (value !== null) both.set(value, key.length);
    const answer: Answer = { key: both.subarray(0, key.length), value: value === null ? null : both.subarray(key.length), used: false, next: chain };
    const bytes = answerBytes(answer);
    if (bytes > this.budget) return;
    // Set again, so that the chain goes to the back of the sweep's order.
    this.#answers.delete(h);
    this.#answers.set(h, answer);
    this.#count++;
    this.#bytes += bytes;
    this.#sweep();
  }

  /** Evicts down to the budget: a chain read since the last pass goes to the back once, unflagged. */
  #sweep(): void {
    while (this.#bytes > this.budget) {
      const [h, chain] = this.#answers.entries().next().value!;
      this.#answers.delete(h);
      let used = false;
      for (let a: Answer | undefined = chain; a !== undefined; a = a.next) {
        used ||= a.used;
        a.used = false;
      }
      if (used) {
        this.#answers.set(h, chain);
        continue;
      }
      for (let a: Answer | undefined = chain; a !== undefined; a = a.next) {
        this.#count--;
        this.#bytes -= answerBytes(a);
      }
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
    for (const id of written) this.#remove(keyOf(id));
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
    this.#count = 0;
    this.#bytes = 0;
    this.#root = root.slice();
    this.#rootSeen = undefined;
  }

  #remove(key: Uint8Array): void {
    const h = this.#hash(key);
    let [before, answer]: [Answer | undefined, Answer | undefined] = [undefined, this.#answers.get(h)];
    while (answer !== undefined && !equal(answer.key, key)) [before, answer] = [answer, answer.next];
    if (answer === undefined) return;
    if (before !== undefined) before.next = answer.next;
    else if (answer.next !== undefined) this.#answers.set(h, answer.next);
    else this.#answers.delete(h);
    this.#count--;
    this.#bytes -= answerBytes(answer);
  }
}
