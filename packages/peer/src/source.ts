/**
 * What a serving peer serves: one or a few committed roots, each a read-only
 * view that can export chunk envelopes (`spec/chunk-format.md`) and prove
 * entries (`spec/proof-format.md`). `@bpavl/wasm`'s `Snapshot` is one.
 * @module
 */

/** One committed version of a tree; every method may throw a WASM error with a `.code`. */
export interface ServedTree {
  readonly root: Uint8Array;
  readonly version: number;
  readonly chunkCount: number;
  exportChunk(index: number): Uint8Array;
  get(key: Uint8Array): Uint8Array | undefined;
  proveExistence(key: Uint8Array): Uint8Array;
  proveAbsence(key: Uint8Array): Uint8Array;
  proveRange(start: Uint8Array, end: Uint8Array | undefined, limit: number): Uint8Array;
  /** The `MULTIPROOF` payload (`spec/wire.md`) for `keys` (strictly increasing): the multiproof of the first k that fit `maxBytes`, k ≥ 1. */
  proveMulti(keys: Uint8Array[], maxBytes: number): Uint8Array;
  /** Catch-up answers (`spec/wire.md`, "Catch-up"); a tree without them answers `BAD_REQUEST`, as an older peer. */
  exportSubtree?(path: Uint8Array, levels: number, maxBytes: number): Uint8Array;
  exportLeaves?(path: Uint8Array): Uint8Array;
  exportEntries?(path: Uint8Array, bitmap: Uint8Array, maxBytes: number): Uint8Array;
}

/**
 * One committed version read from storage as it is asked for (`bpavl serve
 * --db`): every answer is asynchronous. Methods may reject with an error
 * with a `.code`.
 */
export interface StoredTree {
  readonly stored: true;
  readonly root: Uint8Array;
  readonly version: number;
  readonly chunkCount: number;
  exportChunk(index: number): Promise<Uint8Array>;
  /** The value of `key` (`undefined`: absent) and its existence or absence proof. */
  prove(key: Uint8Array): Promise<{ value: Uint8Array | undefined; proof: Uint8Array }>;
  proveRange(start: Uint8Array, end: Uint8Array | undefined, limit: number): Promise<Uint8Array>;
  /** Catch-up answers, as `ServedTree`'s. */
  exportSubtree?(path: Uint8Array, levels: number, maxBytes: number): Promise<Uint8Array>;
  exportLeaves?(path: Uint8Array): Promise<Uint8Array>;
  exportEntries?(path: Uint8Array, bitmap: Uint8Array, maxBytes: number): Promise<Uint8Array>;
}

/** A version a peer serves, from memory or from storage. */
export type AnyServedTree = ServedTree | StoredTree;

/** The roots a peer serves, looked up by root hash. */
export interface TreeSource {
  /** Every served root, in the order `ROOTS` lists them. */
  trees(): readonly AnyServedTree[];
  /** The tree with this root, or `undefined` (`UNKNOWN_ROOT`). */
  lookup(root: Uint8Array): AnyServedTree | undefined;
  /** Stops serving `tree` (a stored version another process pruned or rolled back). */
  drop?(tree: AnyServedTree): void;
  /**
   * Brings `trees()` and `lookup()` up to date with storage that another
   * process writes (`./followed.ts`): with `fresh`, with what it held when
   * called (the server asks so before it answers `UNKNOWN_ROOT`), else with
   * what it held a moment ago (before `ROOTS`). Never rejects.
   */
  update?(fresh: boolean): Promise<void>;
}

/** Lower-case hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/** Bytes of a hex string; throws `RangeError` if it is not hex of even length. */
export function fromHex(hex: string): Uint8Array {
  if (!/^([0-9a-fA-F]{2})*$/.test(hex)) throw new RangeError('not a hex string');
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

/**
 * A fixed set of served trees (e.g. `Snapshot`s from `tree.head()`, or
 * stored versions).
 *
 * @example
 * ```ts
 * tree.commit();
 * const source = new StaticTreeSource([tree.head()]);
 * ```
 */
export class StaticTreeSource implements TreeSource {
  readonly #trees: readonly AnyServedTree[];
  readonly #byRoot = new Map<string, AnyServedTree>();

  constructor(trees: readonly AnyServedTree[]) {
    this.#trees = [...trees];
    for (const t of this.#trees) this.#byRoot.set(toHex(t.root), t);
  }

  trees(): readonly AnyServedTree[] {
    return this.#trees;
  }

  lookup(root: Uint8Array): AnyServedTree | undefined {
    return this.#byRoot.get(toHex(root));
  }
}

/**
 * The versions a peer serves while its head moves: `add` serves a newly
 * committed head and stops serving the oldest versions beyond `keep`, so
 * that memory stays bounded while clients still catching up to a recent
 * root find it (`bpavl-testnet serve --advance-on-stdin`).
 *
 * @example
 * ```ts
 * const source = new MovingHead([tree.head()]);
 * tree.insert(key, value);
 * tree.commit();
 * source.add(tree.head(), 8);
 * ```
 */
export class MovingHead implements TreeSource {
  #served: StaticTreeSource;

  constructor(trees: readonly AnyServedTree[]) {
    this.#served = new StaticTreeSource(trees);
  }

  trees(): readonly AnyServedTree[] {
    return this.#served.trees();
  }

  lookup(root: Uint8Array): AnyServedTree | undefined {
    return this.#served.lookup(root);
  }

  /** Serves `tree` as the newest version, and only the newest `keep` (≥ 1) versions; returns the versions no longer served. */
  add(tree: AnyServedTree, keep: number): AnyServedTree[] {
    const trees = [...this.#served.trees(), tree];
    const dropped = trees.splice(0, Math.max(0, trees.length - Math.max(1, keep)));
    this.#served = new StaticTreeSource(trees);
    return dropped;
  }

  drop(tree: AnyServedTree): void {
    this.#served = new StaticTreeSource(this.#served.trees().filter((t) => t !== tree));
  }
}

/**
 * A served tree whose chunk envelopes are all exported once, up front, and
 * then served from memory (`bpavl serve --cache-chunks`; about the size of
 * the state). Everything else is delegated to `tree`.
 *
 * @example
 * ```ts
 * const source = new StaticTreeSource([new CachedTree(tree.head())]);
 * ```
 */
export class CachedTree implements ServedTree {
  readonly #tree: ServedTree;
  readonly #chunks: Uint8Array[];

  constructor(tree: ServedTree) {
    this.#tree = tree;
    this.#chunks = Array.from({ length: tree.chunkCount }, (_, i) => tree.exportChunk(i));
  }

  get root(): Uint8Array {
    return this.#tree.root;
  }
  get version(): number {
    return this.#tree.version;
  }
  get chunkCount(): number {
    return this.#chunks.length;
  }
  /** The cached envelope (shared: callers must not modify it). */
  exportChunk(index: number): Uint8Array {
    const c = this.#chunks[index];
    if (c === undefined) return this.#tree.exportChunk(index); // out of range: the tree's own error
    return c;
  }
  get(key: Uint8Array): Uint8Array | undefined {
    return this.#tree.get(key);
  }
  proveExistence(key: Uint8Array): Uint8Array {
    return this.#tree.proveExistence(key);
  }
  proveAbsence(key: Uint8Array): Uint8Array {
    return this.#tree.proveAbsence(key);
  }
  proveRange(start: Uint8Array, end: Uint8Array | undefined, limit: number): Uint8Array {
    return this.#tree.proveRange(start, end, limit);
  }
  proveMulti(keys: Uint8Array[], maxBytes: number): Uint8Array {
    return this.#tree.proveMulti(keys, maxBytes);
  }
  exportSubtree(path: Uint8Array, levels: number, maxBytes: number): Uint8Array {
    return catchUpAnswer(this.#tree.exportSubtree?.(path, levels, maxBytes));
  }
  exportLeaves(path: Uint8Array): Uint8Array {
    return catchUpAnswer(this.#tree.exportLeaves?.(path));
  }
  exportEntries(path: Uint8Array, bitmap: Uint8Array, maxBytes: number): Uint8Array {
    return catchUpAnswer(this.#tree.exportEntries?.(path, bitmap, maxBytes));
  }
}

/** A delegated catch-up answer; a tree without them makes the request a `BAD_REQUEST`. */
function catchUpAnswer(answer: Uint8Array | undefined): Uint8Array {
  if (answer === undefined) throw Object.assign(new Error('this tree serves no catch-up'), { code: 'QUERY_INVALID' });
  return answer;
}
