/**
 * A durable, versioned bpavl state over a storage backend (`docs/store.md`):
 * reads and proofs at the head or at any retained version, atomic commits,
 * pruning and rollback. The tree logic and every record check live in the
 * core (through `@bpavl/wasm`); this module moves records between the core
 * and the backend.
 *
 * Reads of versions other than the head go through `Pages`: inner nodes
 * loaded on demand, chunks cached under `cacheBytes`, every answer checked
 * against the entry records that prove it. The head (which takes writes)
 * and the versions that proofs are taken from are still loaded whole;
 * paging them too is the next step (docs/store.md, "Status").
 * @module
 */

import { decodeStoreRecord, encodeStoreRecord, entryValue, Loader, Pages, type RecordTable, type Snapshot, Tree, verifyExistence, versionTop } from '@bpavl/wasm';
import type { StorageBackend, WriteBatch } from '../../storage/src/port.ts';
import { StoreError } from './errors.ts';
import { BORN_TABLES, STORE_KEY, staleRecord, staleTable, versionKey, versionOf } from './records.ts';

/** A committed version: its number and root hash. */
export interface VersionInfo {
  readonly version: number;
  readonly root: Uint8Array;
}

/** Which version a read is taken from; the head when omitted. */
export interface AtVersion {
  readonly version?: number;
}

/** Which versions `prune` keeps: the last `keepLast`, or every version from `before` on. */
export type PruneOptions = { readonly keepLast: number } | { readonly before: number };

/** What `stats()` reports. */
export interface StoreStats {
  readonly entryCount: number;
  readonly chunkCount: number;
  readonly versions: number;
  readonly bytesOnDisk: number;
  /** Chunk lookups of paged reads served from the cache, and chunks they loaded. */
  readonly cacheHits: number;
  readonly cacheMisses: number;
  /** Bytes of chunks cached now, counted from their contents (never above the budget). */
  readonly cachedChunkBytes: number;
}

/** The default chunk cache of paged reads. */
export const DEFAULT_CACHE_BYTES = 64 << 20;

/** Records deleted per atomic write when pruning or rolling back. */
const DELETE_BATCH = 10_000;
/** Old versions kept loaded for reads, most recent first. */
const LOADED_VERSIONS = 4;

/** Rounds of record fetches a read may take: 48 levels of nodes, then chunks, bases and entries. */
const MAX_ROUNDS = 64;

/** Fetches `wanted` records (one `getMany` per table) and hands each to `supply`. */
async function fetchRecords(
  backend: StorageBackend,
  wanted: readonly (readonly [RecordTable, Uint8Array])[],
  supply: (table: RecordTable, key: Uint8Array, value: Uint8Array | undefined) => void,
): Promise<void> {
  for (const table of BORN_TABLES) {
    const keys = wanted.filter(([t]) => t === table).map(([, k]) => k);
    if (keys.length === 0) continue;
    const values = await backend.getMany(table, keys);
    keys.forEach((k, i) => supply(table, k, values[i]));
  }
}

/** Loads `version` from `backend`, checking every record (`STORE_CORRUPT`). */
async function loadTree(backend: StorageBackend, version: number, record: Uint8Array, capacity: number): Promise<Tree> {
  const loader = new Loader(version, record, capacity);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const wanted = loader.wanted();
    if (wanted.length === 0) return loader.finish();
    await fetchRecords(backend, wanted, (t, k, v) => loader.supply(t, k, v));
  }
  throw new StoreError('STORE_CORRUPT', `version ${version} is deeper than any tree`);
}

/** The value of the entry record `key` names, checked against `slotKey`. */
async function readEntry(backend: StorageBackend, key: Uint8Array, slotKey: Uint8Array): Promise<Uint8Array> {
  const record = await backend.get('entries', key);
  if (record === undefined) throw new StoreError('STORE_CORRUPT', 'an entry record is missing');
  return entryValue(key, record, slotKey);
}

/** Keys of `table` from `start` on, at most `limit`. */
async function keysFrom(backend: StorageBackend, table: string, start: Uint8Array, end?: Uint8Array): Promise<Uint8Array[]> {
  const keys: Uint8Array[] = [];
  for await (const [key] of backend.scan(table, { start, ...(end && { end }), limit: DELETE_BATCH })) keys.push(key);
  return keys;
}

export class State {
  readonly #backend: StorageBackend;
  readonly capacity: number;
  /** The head: committed versions plus the writes of the pending batch. */
  #tree: Tree;
  /** Version → root of every retained version, ascending. */
  #versions: Map<number, Uint8Array>;
  #loaded = new Map<number, Snapshot>();
  readonly #pages: Pages;
  #closed = false;

  private constructor(backend: StorageBackend, capacity: number, tree: Tree, versions: Map<number, Uint8Array>, cacheBytes: number) {
    this.#backend = backend;
    this.capacity = capacity;
    this.#tree = tree;
    this.#versions = versions;
    this.#pages = new Pages(capacity, cacheBytes);
  }

  /** Opens the state a backend holds, or starts one (`capacity`, default 256). */
  static async open(backend: StorageBackend, capacity = 256, cacheBytes = DEFAULT_CACHE_BYTES): Promise<State> {
    let meta = await backend.get('meta', STORE_KEY);
    if (meta === undefined) {
      if (backend.readOnly) throw new StoreError('STORE_CORRUPT', 'a read-only open of an empty store');
      meta = encodeStoreRecord(capacity);
      await backend.write({ puts: [['meta', STORE_KEY, meta]] });
    }
    const stored = decodeStoreRecord(meta);
    const versions = new Map<number, Uint8Array>();
    const records = new Map<number, Uint8Array>();
    for await (const [key, record] of backend.scan('versions')) {
      records.set(versionOf(key), record);
    }
    const head = Math.max(0, ...records.keys());
    if (!backend.readOnly) await removeUnborn(backend, head);
    const tree = head === 0 ? new Tree(stored) : await loadTree(backend, head, records.get(head)!, stored);
    for (const [version, record] of records) {
      // The head is checked by its load; the others by theirs, when read.
      versions.set(version, version === head ? tree.head().root : rootOf(record));
    }
    return new State(backend, stored, tree, versions, cacheBytes);
  }

  #open(): void {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the store is closed');
  }

  #writable(): void {
    this.#open();
    if (this.#backend.readOnly) throw new StoreError('STORE_READ_ONLY', 'the store is open for reading only');
  }

  /** The head version, or `undefined` before the first commit. */
  head(): VersionInfo | undefined {
    this.#open();
    const version = this.#tree.head().version;
    return version === 0 ? undefined : { version, root: this.#tree.head().root };
  }

  /** Every retained version with its root, oldest first. */
  versions(): VersionInfo[] {
    this.#open();
    return [...this.#versions].map(([version, root]) => ({ version, root }));
  }

  /** The committed version `at` names (the head by default). */
  async snapshot(at: AtVersion = {}): Promise<Snapshot> {
    this.#open();
    const version = at.version ?? this.#tree.head().version;
    if (version === this.#tree.head().version) return this.#tree.head();
    if (!this.#versions.has(version)) throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
    let snapshot = this.#loaded.get(version);
    if (snapshot === undefined) {
      snapshot = await this.#load(version);
      this.#loaded.set(version, snapshot);
      for (const old of [...this.#loaded.keys()].slice(0, -LOADED_VERSIONS)) {
        this.#loaded.get(old)!.free();
        this.#loaded.delete(old);
      }
    }
    return snapshot;
  }

  /**
   * The retained `version` (the head included), every record checked, as a
   * snapshot that the caller owns and frees: unlike `snapshot()`, the state
   * never frees it, so it can be served for as long as the caller wants.
   */
  async loadSnapshot(version: number): Promise<Snapshot> {
    this.#open();
    if (version === this.#tree.head().version) return this.#tree.head();
    if (!this.#versions.has(version)) throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
    return this.#load(version);
  }

  /** Loads the stored `version` whole (`STORE_CORRUPT` on any bad record). */
  async #load(version: number): Promise<Snapshot> {
    const record = await this.#backend.get('versions', versionKey(version));
    if (record === undefined) throw new StoreError('STORE_CORRUPT', `version ${version} has no record`);
    const tree = await loadTree(this.#backend, version, record, this.capacity);
    const snapshot = tree.head();
    tree.free();
    return snapshot;
  }

  async get(key: Uint8Array, at: AtVersion = {}): Promise<Uint8Array | undefined> {
    this.#open();
    const version = at.version ?? this.#tree.head().version;
    if (version === this.#tree.head().version) return this.#tree.head().get(key);
    return this.#pagedGet(version, key);
  }

  /** The top of a retained stored version (`undefined`: the empty tree). */
  async #top(version: number): Promise<[RecordTable, Uint8Array] | undefined> {
    if (!this.#versions.has(version)) throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
    const record = await this.#backend.get('versions', versionKey(version));
    if (record === undefined) throw new StoreError('STORE_CORRUPT', `version ${version} has no record`);
    return versionTop(record, this.capacity);
  }

  /**
   * The value of `key` and its existence proof (`spec/proof-format.md`),
   * which verifies against the version's root; old versions are read
   * through the chunk cache, and their proofs are verified before they are
   * returned. Throws StoreError `KEY_NOT_FOUND` if the key is absent.
   */
  async proveExistence(key: Uint8Array, at: AtVersion = {}): Promise<{ value: Uint8Array; proof: Uint8Array }> {
    this.#open();
    const version = at.version ?? this.#tree.head().version;
    if (version === this.#tree.head().version) {
      const snapshot = this.#tree.head();
      const value = snapshot.get(key);
      if (value === undefined) throw new StoreError('KEY_NOT_FOUND', 'the key is absent');
      return { value, proof: snapshot.proveExistence(key) };
    }
    const top = await this.#top(version);
    for (let round = 0; top !== undefined && round < MAX_ROUNDS; round++) {
      const answer = this.#pages.proveExistence(top[0], top[1], key);
      if ('notFound' in answer) break;
      if ('found' in answer) {
        const value = await readEntry(this.#backend, answer.found, key);
        try {
          verifyExistence(this.#versions.get(version)!, key, value, answer.proof);
        } catch {
          throw new StoreError('STORE_CORRUPT', `a record of version ${version} does not prove its entry`);
        }
        return { value, proof: answer.proof };
      }
      await fetchRecords(this.#backend, answer.need, (t, k, v) => this.#pages.supply(t, k, v));
    }
    throw new StoreError('KEY_NOT_FOUND', 'the key is absent');
  }

  /** A read of a stored version through the chunk cache. */
  async #pagedGet(version: number, key: Uint8Array): Promise<Uint8Array | undefined> {
    const top = await this.#top(version);
    if (top === undefined) return undefined;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const answer = this.#pages.lookup(top[0], top[1], key);
      if ('found' in answer) return readEntry(this.#backend, answer.found, key);
      if ('absent' in answer) {
        for (const [entry, slotKey] of answer.absent) await readEntry(this.#backend, entry, slotKey);
        return undefined;
      }
      await fetchRecords(this.#backend, answer.need, (t, k, v) => this.#pages.supply(t, k, v));
    }
    throw new StoreError('STORE_CORRUPT', `version ${version} is deeper than any tree`);
  }

  async has(key: Uint8Array, at?: AtVersion): Promise<boolean> {
    return (await this.get(key, at)) !== undefined;
  }

  /** Sets `key` → `value` in the pending batch (TreeError `KEY_TOO_LONG`, … leave it unchanged). */
  put(key: Uint8Array, value: Uint8Array): void {
    this.#writable();
    this.#tree.insert(key, value);
  }

  /** Deletes `key` in the pending batch; returns whether it was present. */
  delete(key: Uint8Array): boolean {
    this.#writable();
    return this.#tree.remove(key);
  }

  /**
   * Commits the pending batch as the next version, in one atomic write of
   * the backend: the version record in it makes the version visible. If the
   * write fails, the pending batch is dropped and the head stays as stored.
   */
  async commit(): Promise<VersionInfo> {
    this.#writable();
    const w = this.#tree.commitToStore();
    const batch: WriteBatch = {
      puts: [
        ...w.puts,
        ...w.stale.map((key) => ['stale', key, new Uint8Array()] as const),
        ['versions', versionKey(w.version), w.versionRecord],
      ],
    };
    try {
      await this.#backend.write(batch);
    } catch (e) {
      await this.#reload(w.version - 1);
      throw e;
    }
    this.#versions.set(w.version, w.root);
    return { version: w.version, root: w.root };
  }

  /** Makes the stored version `version` the head (0: the empty tree). */
  async #reload(version: number): Promise<void> {
    let tree: Tree;
    if (version === 0) tree = new Tree(this.capacity);
    else {
      const record = await this.#backend.get('versions', versionKey(version));
      if (record === undefined) throw new StoreError('STORE_CORRUPT', `version ${version} has no record`);
      tree = await loadTree(this.#backend, version, record, this.capacity);
    }
    this.#tree.free();
    this.#tree = tree;
  }

  /**
   * Reclaims what only older versions use: keeps the last `keepLast`
   * versions, or every version from `before` on. The version records go
   * first (one atomic write), then the records their stale marks name, and
   * the backend gives their space back (`compact`).
   */
  async prune(options: PruneOptions): Promise<void> {
    this.#writable();
    const retained = [...this.#versions.keys()];
    let keepFrom: number;
    if ('keepLast' in options) {
      if (!Number.isSafeInteger(options.keepLast) || options.keepLast < 1) throw new RangeError('keepLast must be a positive integer');
      keepFrom = retained[Math.max(0, retained.length - options.keepLast)] ?? 0;
    } else {
      if (!Number.isSafeInteger(options.before) || options.before < 0) throw new RangeError('before must be a version number');
      keepFrom = Math.min(options.before, this.#tree.head().version);
    }
    const dropped = retained.filter((v) => v < keepFrom);
    if (dropped.length > 0) await this.#backend.write({ deletes: dropped.map((v) => ['versions', versionKey(v)] as const) });
    for (const v of dropped) {
      this.#versions.delete(v);
      this.#loaded.get(v)?.free();
      this.#loaded.delete(v);
    }
    // Stale at s ≤ keepFrom: used only by versions before keepFrom.
    const end = versionKey(keepFrom + 1);
    for (let batch = await keysFrom(this.#backend, 'stale', new Uint8Array(), end); batch.length > 0; batch = await keysFrom(this.#backend, 'stale', new Uint8Array(), end)) {
      const deletes = batch.flatMap((k) => [['stale', k] as const, [staleTable(k), staleRecord(k)] as const]);
      await this.#backend.write({ deletes });
    }
    await this.#backend.compact();
  }

  /** Makes the retained `version` the head and discards every later version. */
  async rollback(version: number): Promise<void> {
    this.#writable();
    if (!this.#versions.has(version)) throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
    const later = [...this.#versions.keys()].filter((v) => v > version);
    const after = versionKey(version + 1);
    const staleLater = await keysFrom(this.#backend, 'stale', after);
    // First the versions and the marks that said their records replaced older ones…
    await this.#backend.write({
      deletes: [...later.map((v) => ['versions', versionKey(v)] as const), ...staleLater.map((k) => ['stale', k] as const)],
    });
    for (const v of later) {
      this.#versions.delete(v);
      this.#loaded.get(v)?.free();
      this.#loaded.delete(v);
    }
    // …then what those versions wrote (a crash here leaves garbage that the next open removes).
    await removeUnborn(this.#backend, version);
    await this.#reload(version);
  }

  async stats(): Promise<StoreStats> {
    this.#open();
    const snapshot = this.#tree.head();
    const pages = this.#pages;
    const stats = {
      entryCount: snapshot.len,
      chunkCount: snapshot.chunkCount,
      versions: this.#versions.size,
      bytesOnDisk: await this.#backend.sizeBytes(),
      cacheHits: pages.hits,
      cacheMisses: pages.misses,
      cachedChunkBytes: pages.residentBytes,
    };
    snapshot.free();
    return stats;
  }

  /** Drops the pending batch, frees the loaded trees and closes the backend. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#tree.free();
    for (const s of this.#loaded.values()) s.free();
    this.#loaded.clear();
    this.#pages.free();
    await this.#backend.close();
  }
}

/** The root a version record ends with (checked when the version is loaded). */
function rootOf(record: Uint8Array): Uint8Array {
  return record.slice(record.length - 32);
}

/** Deletes every record born after `head` (left by a torn import or rollback) and their stale marks. */
async function removeUnborn(backend: StorageBackend, head: number): Promise<void> {
  const after = versionKey(head + 1);
  for (const table of [...BORN_TABLES, 'stale']) {
    for (let keys = await keysFrom(backend, table, after); keys.length > 0; keys = await keysFrom(backend, table, after)) {
      await backend.write({ deletes: keys.map((k) => [table, k] as const) });
    }
  }
}
