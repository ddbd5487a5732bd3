/**
 * A durable, versioned bpavl state over a storage backend (`docs/store.md`):
 * reads and proofs at the head or at any retained version, atomic commits,
 * pruning and rollback. The tree logic and every record check live in the
 * core (through `@bpavl/wasm`); this module moves records between the core
 * and the backend.
 *
 * Opening reads only the version records. Reads and proofs at any version,
 * the head included, go through `Pages`: inner nodes loaded on demand,
 * chunks cached under `cacheBytes`, every answer checked against the entry
 * records that prove it. The writable head is paged too: its inner nodes
 * load at the first write after an open, a commit failure or a rollback;
 * each write loads the chunks it changes, and each commit unloads the
 * oldest down to `cacheBytes` (docs/store.md, "The writable head, paged").
 * @module
 */

import {
  checkKey,
  decodeStoreRecord,
  decodeVersionRecord,
  encodeStoreRecord,
  entryValue,
  heldValue,
  Loader,
  PagedRange,
  Pages,
  type RangeResult,
  type RecordTable,
  type Snapshot,
  StoredHead,
  Tree,
  verifyAbsence,
  verifyChunkProof,
  verifyExistence,
  verifyRange,
  type VersionRecord,
  type WriteSet,
} from '@bpavl/wasm';
import { compareBytes } from '../../storage/src/checks.ts';
import type { StorageBackend } from '../../storage/src/port.ts';
import { StoreError } from './errors.ts';
import { BORN_TABLES, CATCHUP_KEY, CATCHUP_PROGRESS_END, CATCHUP_PROGRESS_START, fetchRecords, valuesKeys, PROGRESS_END, PROGRESS_START, STORE_KEY, staleMarks, staleRecord, staleTable, SYNC_KEY, versionKey, versionOf } from './records.ts';
import { type CatchUpHost, StoreCatchUp } from './catchup.ts';
import { type SinkHost, StoreSink, Synced } from './sync.ts';
import { type BulkLoadOptions, type SortedEntries, writeBulkLoad } from './bulk-load.ts';
import { cacheKey, DEFAULT_VALUE_CACHE_BYTES, ValueCache } from './value-cache.ts';

/** A committed version: its number, root hash and counts. */
export interface VersionInfo {
  readonly version: number;
  readonly root: Uint8Array;
  readonly chunkCount: number;
  readonly entryCount: number;
}

/**
 * A version whose record fails its checks: left out of the versions, so
 * that the others stay readable, with the `STORE_CORRUPT` that names it.
 */
export interface DamagedVersion {
  readonly version: number;
  readonly error: StoreError;
}

/**
 * Which version a read is taken from; the head when omitted. With `root`,
 * only while that version has this root: a version the state lists with
 * another root (rolled back and committed again by another process, and
 * refreshed) is `VERSION_UNKNOWN`, as is one that such a change replaces
 * while the read runs, so that a read never answers from another root's
 * records (docs/store.md, "A version committed again under its number").
 * A `root` that is no `Uint8Array` is a `TypeError`, one not 32 bytes
 * long a `RangeError`.
 */
export interface AtVersion {
  readonly version?: number;
  readonly root?: Uint8Array;
}

/** Which version `range()` reads, and how many entries each of its proofs holds. */
export interface RangeOptions extends AtVersion {
  readonly pageSize?: number;
}

/**
 * Which versions `prune` keeps: the last `keepLast`, or every version from
 * `before` on (the head stays whatever `before` is); one of the two, not
 * both (`RangeError`). With `vacuum`, the backend also packs what is left
 * (`StorageBackend.compact({ full: true })`: SQLite rewrites the database,
 * which takes as long as writing it and twice its size on disk meanwhile).
 */
export type PruneOptions = ({ readonly keepLast: number } | { readonly before: number }) & { readonly vacuum?: boolean };

/** What `stats()` reports. */
export interface StoreStats {
  readonly entryCount: number;
  readonly chunkCount: number;
  readonly versions: number;
  readonly bytesOnDisk: number;
  /** Gets, `has` and existence proofs answered from a chunk cached before them (`cacheHits`), and chunks loaded by any paged read (`cacheMisses`). */
  readonly cacheHits: number;
  readonly cacheMisses: number;
  /** Bytes of chunks cached now, counted from their contents (never above the budget). */
  readonly cachedChunkBytes: number;
  /**
   * Bytes of the chunks the writable head holds, counted from their
   * contents too: what the pending batch changed, and after a commit at
   * most `cacheBytes`.
   */
  readonly headChunkBytes: number;
  /** Reads of the head answered by the value cache, and reads it could not answer. */
  readonly valueCacheHits: number;
  readonly valueCacheMisses: number;
  /** Bytes of answers the value cache holds now (never above `valueCacheBytes`). */
  readonly cachedValueBytes: number;
}

/** The memory a state may use, each bound counted from contents (never through RSS). */
export interface StateSizes {
  /** Bytes of chunks that paged reads may cache, and that the head keeps after a commit (default 64 MiB). */
  readonly cacheBytes?: number;
  /**
   * Bytes of answers of reads at the head kept for the next read of the
   * same key (default 16 MiB; 0 keeps none). About 320 bytes an answer
   * besides its key and value.
   */
  readonly valueCacheBytes?: number;
  /**
   * Bytes of chunks a batch not committed yet may hold (default 1 GiB).
   * Past it (the chunks writes load count as they land, `putMany` loading
   * 64 writes' chunks at a time), the batch writes changed chunks ahead,
   * born at the coming version and invisible until its commit, and holds
   * at most half the bound again; if that write fails, the batch is
   * dropped (as by a failed commit) and the write rejects. A chunk the
   * batch changes again is loaded and written again, so a batch of random
   * keys far larger than the bound costs more writes (docs/store.md, "A
   * batch of any size").
   */
  readonly batchBytes?: number;
}

/** An unfinished sync that the store holds: its root and the chunks it has stored. */
export interface PendingSync {
  readonly root: Uint8Array;
  readonly chunksStored: number;
}

/** The default chunk cache of paged reads. */
export const DEFAULT_CACHE_BYTES = 64 << 20;

/**
 * The default bound on the chunks a pending batch holds: a bulk import of
 * 1M standard entries (about 620 MB) stays whole until its commit, and a
 * batch of any size fits the 4 GiB of WASM memory.
 */
export const DEFAULT_BATCH_BYTES = 1 << 30;

/**
 * Single writes (`put`, `delete`) between two counts of the head's loaded
 * chunks, which walk them all (too slow for every write): the chunks that
 * writes load are counted as they land, and the values they add at these
 * counts.
 */
const BATCH_CHECK_WRITES = 1024;

/**
 * Records deleted per atomic write when pruning or rolling back. Each write
 * of SQLite rewrites every page it touches, and random deletes touch most
 * pages of a table, so fewer, larger writes cost less: pruning 100 versions
 * of 10,000 updates of 100,000 entries to the last 10 took 87 s in writes
 * of 10,000 stale marks, 44 s in writes of 100,000 (docs/store.md).
 */
const DELETE_BATCH = 100_000;
/** Entries per range proof that `range()` reads. */
const RANGE_PAGE = 1024;
/** Old versions kept loaded for reads, most recent first. */
const LOADED_VERSIONS = 4;

/** Rounds of record fetches a read may take: 48 levels of nodes, then chunks, bases and entries. */
const MAX_ROUNDS = 64;

/** A `Pages` answer that names the records to fetch first. */
type Needs = { need: [RecordTable, Uint8Array][] };

/**
 * A commit's piece: once the head's chunks outgrow the chunk cache by more
 * than a piece, it writes changed chunks ahead a piece at a time (records
 * written or bytes unloaded) until they fit again, then commits the rest.
 * A piece is the cache's size, kept between these bounds. Why: a batch of
 * 1M random keys into 10M entries changes all 56,800 chunks, and held
 * until one write with all their records they outgrew the 4 GiB of WASM
 * memory (docs/store.md, "A large batch is written ahead").
 */
const COMMIT_PIECE_BYTES = { min: 1 << 20, max: 64 << 20 };

/** The most bytes of records a bulk load writes at a time (the WASM side holds about three times a write while it is handed over). */
const BULK_WRITE_BYTES = 16 << 20;

/** Writes of `putMany`/`deleteMany` whose chunks are fetched in one round: a batch exceeds its bound by at most a round's chunks. */
const PREFETCH_KEYS = 64;

/** The most writes of `putMany`/`deleteMany` applied between two checks of the batch (each walks every loaded chunk). */
const PREFETCH_WRITES = 16_384;

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

/**
 * Every version record `backend` holds, each checked at `capacity`. One
 * that fails is returned apart, not thrown (one damaged record leaves the
 * other versions readable); a key that is not 8 bytes names no version,
 * so it fails the whole read.
 */
async function readVersions(backend: StorageBackend, capacity: number): Promise<{ versions: Map<number, VersionRecord>; damaged: DamagedVersion[] }> {
  const versions = new Map<number, VersionRecord>();
  const damaged: DamagedVersion[] = [];
  for await (const [key, record] of backend.scan('versions')) {
    if (key.length !== 8) throw new StoreError('STORE_CORRUPT', 'a version key is not 8 bytes');
    const version = versionOf(key);
    try {
      versions.set(version, decodeVersionRecord(record, capacity));
    } catch (e) {
      if ((e as { code?: unknown } | null)?.code !== 'STORE_CORRUPT') throw e;
      damaged.push({ version, error: new StoreError('STORE_CORRUPT', `the record of version ${version}: ${(e as Error).message}`) });
    }
  }
  return { versions, damaged };
}

/** The value of the entry record `key` names, checked against `slotKey`. */
async function readEntry(backend: StorageBackend, key: Uint8Array, slotKey: Uint8Array): Promise<Uint8Array> {
  const record = await backend.get('entries', key);
  if (record === undefined) throw new StoreError('STORE_CORRUPT', 'an entry record is missing');
  return entryValue(key, record, slotKey);
}

/** The value values record `key` holds for `slotKey`, checked against the entry hash `hash`. */
async function readHeld(backend: StorageBackend, key: Uint8Array, slotKey: Uint8Array, hash: Uint8Array): Promise<Uint8Array> {
  const record = await backend.get('values', key);
  if (record === undefined) throw new StoreError('STORE_CORRUPT', 'a values record is missing');
  return heldValue(record, slotKey, hash);
}

/** Keys of `table` from `start` on (before `end`), at most `limit`. */
async function keysFrom(backend: StorageBackend, table: string, start: Uint8Array, end?: Uint8Array, limit = DELETE_BATCH): Promise<Uint8Array[]> {
  const keys: Uint8Array[] = [];
  for await (const [key] of backend.scan(table, { start, ...(end && { end }), limit })) keys.push(key);
  return keys;
}

/** A root argument: `TypeError` unless a `Uint8Array`, `RangeError` unless 32 bytes long (as `@bpavl/wasm` and the light client). */
function rootArg(root: unknown): void {
  if (!(root instanceof Uint8Array)) throw new TypeError('root must be a Uint8Array');
  if (root.length !== 32) throw new RangeError(`root must be 32 bytes, got ${root.length}`);
}

/** A version argument: `TypeError` unless a number (one that no commit made, or that is pruned, is `VERSION_UNKNOWN`). */
function versionArg(version: unknown): number {
  if (typeof version !== 'number') throw new TypeError(`version must be a number, got ${typeof version}`);
  return version;
}

export class State {
  readonly #backend: StorageBackend;
  /** Set by the store record; a sync into an empty store takes the synced tree's. */
  #capacity: number;
  readonly #cacheBytes: number;
  /** Bytes of chunks a pending batch holds before it writes some ahead. */
  readonly #batchBytes: number;
  /** The bound of one piece written ahead (`COMMIT_PIECE_BYTES`). */
  readonly #pieceBytes: number;
  /** Single writes since the pending batch was last checked against `#batchBytes`. */
  #writesUnchecked = 0;
  /** Bytes of the head's loaded chunks when last counted (at most: a count walks them all), and loaded since. */
  #residentChecked = 0;
  #loadedUnchecked = 0;
  /** Whether the pending batch wrote pieces ahead: dropping it deletes them. */
  #wroteAhead = false;
  /** Every retained version's record (checked when decoded), ascending. */
  #versions: Map<number, VersionRecord>;
  /** The version records that failed their checks at open or at the last refresh, ascending. */
  #damaged: DamagedVersion[];
  /** The head version (0: nothing committed). */
  #head: number;
  /** The head plus the pending batch, paged, loaded at the first write; a failed load is not kept. */
  #tree: Promise<StoredHead> | undefined;
  /** The write running now: writes and commits run one at a time, since each loads chunks first. */
  #writing: Promise<unknown> = Promise.resolve();
  #loaded = new Map<number, Snapshot>();
  #pages: Pages;
  /** Answers of reads at the head (`value-cache.ts`). */
  readonly #values: ValueCache;
  /** The keys written since the last commit (as `cacheKey`s): a commit drops their answers. */
  readonly #written = new Set<string>();
  /** Whether the batch wrote more keys than the value cache holds answers: its commit drops them all. */
  #writtenPastCache = false;
  /** The root of the unfinished sync the store holds: no writes until it finishes or is discarded. */
  #syncing: Uint8Array | undefined;
  /** The sink of the sync running now, if one is (or one is being opened). */
  #sink: StoreSink | undefined;
  /** Whether a catch-up runs (or is being opened): it takes no other write meanwhile. */
  #catchingUp = false;
  /** The root of the unfinished catch-up the store holds: no writes until it finishes or is discarded. */
  #catchUpRoot: Uint8Array | undefined;
  #sinkOpening = false;
  /** Whether a catch-up session is being opened (from its call until its turn among the writes has run). */
  #catchUpOpening = false;
  /** Whether a bulk load runs: it takes no other write meanwhile. */
  #bulkLoading = false;
  /**
   * One list per `refresh` running, of the versions (and roots) that reads
   * found pruned or rolled back meanwhile (`#reading`): the records that
   * refresh read may predate that, and it must not list them again.
   */
  readonly #goneWhileRefreshing = new Set<Array<readonly [number, Uint8Array]>>();
  /** The question `Pages` is answering now (`#ask`). */
  #asking: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(
    backend: StorageBackend,
    capacity: number,
    versions: Map<number, VersionRecord>,
    damaged: DamagedVersion[],
    sizes: Required<StateSizes>,
    syncing: Uint8Array | undefined,
    catchUpRoot: Uint8Array | undefined,
  ) {
    const { cacheBytes, valueCacheBytes, batchBytes } = sizes;
    this.#backend = backend;
    this.#capacity = capacity;
    this.#cacheBytes = cacheBytes;
    this.#batchBytes = batchBytes;
    this.#pieceBytes = Math.min(COMMIT_PIECE_BYTES.max, Math.max(COMMIT_PIECE_BYTES.min, cacheBytes));
    this.#versions = versions;
    this.#damaged = damaged;
    this.#head = lastKey(versions);
    this.#pages = new Pages(capacity, cacheBytes);
    this.#values = new ValueCache(valueCacheBytes);
    this.#syncing = syncing;
    this.#catchUpRoot = catchUpRoot;
  }

  /** The chunk capacity of every version of this store. */
  get capacity(): number {
    return this.#capacity;
  }

  /**
   * Opens the state a backend holds, or starts one (`capacity`, default
   * 256). Reads only the version records: the records they name are
   * checked when a read or a write reaches them. A version record that
   * fails its checks is left out (`damagedVersions()`), as by `refresh`;
   * while one is, a writable state takes no change but a prune or a
   * rollback that drops every damaged one.
   */
  static async open(backend: StorageBackend, capacity = 256, sizes: StateSizes = {}): Promise<State> {
    // First, whether the store is new or not: a capacity outside 2 … 4096 is TreeError
    // `CAPACITY_INVALID`, and a new store never gets a record that no open would read.
    const fresh = encodeStoreRecord(capacity);
    let meta = await backend.get('meta', STORE_KEY);
    if (meta === undefined) {
      // A store whose writer has not written its first record (or was killed first): a reader finds it empty.
      meta = fresh;
      if (!backend.readOnly) await backend.write({ puts: [['meta', STORE_KEY, meta]] });
    }
    const stored = decodeStoreRecord(meta);
    const { versions, damaged } = await readVersions(backend, stored);
    const syncing = await backend.get('meta', SYNC_KEY);
    const catchingUp = await backend.get('meta', CATCHUP_KEY);
    if (!backend.readOnly) {
      // An unfinished sync's or catch-up's records are born at the next version: kept for its resume.
      // After the last record, damaged or not: a damaged head's records stay for a rollback or a resync to judge.
      await removeUnborn(backend, lastStored(versions, damaged) + (syncing === undefined && catchingUp === undefined ? 0 : 1));
      if (syncing === undefined) await removeProgress(backend);
      if (catchingUp === undefined) await removeKeys(backend, 'meta', CATCHUP_PROGRESS_START, CATCHUP_PROGRESS_END);
    }
    const { cacheBytes = DEFAULT_CACHE_BYTES, valueCacheBytes = DEFAULT_VALUE_CACHE_BYTES, batchBytes = DEFAULT_BATCH_BYTES } = sizes;
    return new State(backend, stored, versions, damaged, { cacheBytes, valueCacheBytes, batchBytes }, syncing, catchingUp);
  }

  #open(): void {
    if (this.#closed) throw new StoreError('STORE_CLOSED', 'the store is closed');
  }

  /**
   * Checks that the state may change: open, writable, no sync unfinished,
   * and no damaged version record but those `drops` (a prune or a
   * rollback) removes.
   */
  #writer(drops?: (version: number) => boolean): void {
    this.#open();
    if (this.#backend.readOnly) throw new StoreError('STORE_READ_ONLY', 'the store is open for reading only');
    this.#undamaged(drops);
    if (this.#syncing !== undefined) throw new StoreError('SYNC_PENDING', 'a sync into this store is unfinished: finish it (the same sync again) or discard it');
    if (this.#catchingUp) throw new StoreError('SYNC_PENDING', 'a catch-up of this store is running');
    if (this.#catchUpRoot !== undefined) throw new StoreError('SYNC_PENDING', 'a catch-up of this store is unfinished: run it again or discard it');
    if (this.#bulkLoading) throw new StoreError('SYNC_PENDING', 'a bulk load into this store is running');
  }

  /**
   * Refuses a change while a version record is damaged, unless `drops`
   * says the change removes it: a commit on top of a damaged head could
   * take a wrong number or parent, and what a damaged record names is
   * unknown (docs/store.md, "A damaged version record").
   */
  #undamaged(drops: (version: number) => boolean = () => false): void {
    const kept = this.#damaged.find((d) => !drops(d.version));
    if (kept !== undefined) {
      throw new StoreError('STORE_CORRUPT', `${kept.error.message} (a writer takes only a prune or a rollback that drops it)`);
    }
  }

  /** The last version with a record, damaged or not (0: none). */
  #lastStored(): number {
    return lastStored(this.#versions, this.#damaged);
  }

  /**
   * Loads `entries` (pairs, or buffers of records as `sortRecords` of
   * `@bpavl/store/sort` hands them out), in strictly ascending key order, into a store that
   * holds no version, as its first version (`docs/store.md`, "A bulk
   * load"): chunks of C − ⌊C/16⌋, each written once, under a balanced
   * inner tree, so the root depends on the entries and the capacity alone.
   * Nothing is visible until the last write; if the load fails or the
   * store closes first, what it wrote is removed and the store stays empty.
   * `STORE_NOT_EMPTY` if the store holds a version, `SYNC_PENDING` while a
   * sync, catch-up or another bulk load is unfinished or runs, TreeError
   * `KEYS_NOT_SORTED` for a key not above the one before (and the entry
   * checks of `put`). It starts once the writes called before it have run,
   * and checks the store then (a commit among them makes it
   * `STORE_NOT_EMPTY`, a `discardSync` lets it load), and writes called
   * while it runs wait for it. A batch of puts and deletes not committed
   * yet is dropped: the loaded state replaces it. Records go in writes of the
   * size of a piece written ahead (`cacheBytes`, within 1 … 16 MiB), each
   * chunk its record and the values records of its groups.
   */
  async bulkLoad(entries: SortedEntries, options: BulkLoadOptions = {}): Promise<VersionInfo> {
    this.#open();
    if (this.#backend.readOnly) throw new StoreError('STORE_READ_ONLY', 'the store is open for reading only');
    // Refused while another load, a sync or a catch-up runs or is being opened; the rest at its turn.
    if (this.#bulkLoading) throw new StoreError('SYNC_PENDING', 'a bulk load into this store is running');
    if (this.#sink !== undefined || this.#sinkOpening) throw new StoreError('SYNC_PENDING', 'a sync into this store is running');
    if (this.#catchingUp || this.#catchUpOpening) throw new StoreError('SYNC_PENDING', 'a catch-up of this store is running');
    return this.#serially(async () => {
      // Checked once the writes called before it have run: a commit among them makes a version.
      this.#writer();
      if (this.#versions.size > 0) throw new StoreError('STORE_NOT_EMPTY', `the store holds a state (version ${this.#head}); bulk-load into an empty store`);
      this.#bulkLoading = true;
      try {
        await this.#dropBatch();
        const version = this.#head + 1;
        const where = { capacity: this.#capacity, version, writeBytes: Math.min(this.#pieceBytes, BULK_WRITE_BYTES) };
        const w = await writeBulkLoad(this.#backend, where, entries, options, () => this.#open());
        this.#open();
        await this.#backend.write({ puts: [...w.puts, ['versions', versionKey(version), w.versionRecord]] });
        const record = decodeVersionRecord(w.versionRecord, this.#capacity);
        this.#versions.set(version, record);
        this.#head = version;
        return info(version, record);
      } catch (e) {
        // The records written so far belong to no version: a crash would leave them to the next open,
        // and a failed removal (a full disk) to the next write, which removes them first.
        this.#wroteAhead = true;
        await this.#removeWrittenAhead().catch(() => {});
        throw e;
      } finally {
        this.#bulkLoading = false;
      }
    });
  }

  /** The unfinished sync this store holds, if any. */
  async pendingSync(): Promise<PendingSync | undefined> {
    this.#open();
    if (this.#syncing === undefined) return undefined;
    let chunksStored = 0;
    for await (const _ of this.#backend.scan('meta', { start: PROGRESS_START, end: PROGRESS_END })) chunksStored++;
    return { root: this.#syncing.slice(), chunksStored };
  }

  /** The root of an unfinished catch-up this store keeps (run it again to finish it, or `discardSync()`), or `undefined`. */
  pendingCatchUp(): Uint8Array | undefined {
    this.#open();
    return this.#catchUpRoot?.slice();
  }

  /**
   * The sink that `syncState({ store })` writes the state under `root`
   * into (`docs/store.md`, "Syncing into a store"): a new sync into an
   * empty store, or the resume of the unfinished sync of the same root.
   * With `asNextVersion`, a store that holds another state takes the sync
   * as its next version, sharing every chunk its head holds: the fallback
   * of `catchUp` when no peer serves the catch-up requests (docs/catchup.md).
   * `SYNC_PENDING` while another root's sync or catch-up is unfinished or
   * running, `STORE_NOT_EMPTY` if the store holds another state (and
   * `asNextVersion` is not set); a store whose head is `root` already is a
   * sync with nothing left to fetch. A batch of puts and deletes not
   * committed yet is dropped: the synced state replaces it. The store is
   * judged once the writes called before it have run (a sync, catch-up or
   * bulk load running at the call is `SYNC_PENDING` at once), and writes
   * called after it wait for the sink to open. A `root` that is no
   * `Uint8Array` is a `TypeError`, one not 32 bytes long a `RangeError`.
   */
  async syncSink(root: Uint8Array, options: { asNextVersion?: boolean } = {}): Promise<StoreSink | Synced> {
    this.#open();
    if (this.#backend.readOnly) throw new StoreError('STORE_READ_ONLY', 'the store is open for reading only');
    rootArg(root);
    if (options.asNextVersion !== undefined && typeof options.asNextVersion !== 'boolean') throw new TypeError('asNextVersion must be a boolean');
    if (this.#sink !== undefined || this.#sinkOpening || this.#catchingUp || this.#catchUpOpening) throw new StoreError('SYNC_PENDING', 'a sync or catch-up of this store is running');
    if (this.#bulkLoading) throw new StoreError('SYNC_PENDING', 'a bulk load into this store is running');
    const asked = root.slice();
    const asNextVersion = options.asNextVersion === true;
    this.#sinkOpening = true;
    try {
      // The store is judged at its turn, once the writes called before it have run (a commit, a rollback, a discard).
      return await this.#serially(() => this.#openSink(asked, asNextVersion));
    } finally {
      this.#sinkOpening = false;
    }
  }

  async #openSink(root: Uint8Array, asNextVersion: boolean): Promise<StoreSink | Synced> {
    this.#open();
    this.#undamaged();
    const head = this.#versions.get(this.#head);
    const resume = this.#syncing !== undefined && equal(this.#syncing, root);
    if (head !== undefined && equal(head.root, root) && !resume) return new Synced(this.#head, head.chunkCount);
    if (this.#syncing !== undefined && !resume) {
      throw new StoreError('SYNC_PENDING', `an unfinished sync of another root (${hex(this.#syncing)}) is stored: discard it first`);
    }
    // A sync into a store that holds a version is that version's next: asked for, or an unfinished one resumed.
    const next = head !== undefined;
    if (next && !resume && !asNextVersion) {
      throw new StoreError('STORE_NOT_EMPTY', `the store holds another state (version ${this.#head}); sync into an empty store, or catch it up`);
    }
    if (next && equal(root, this.#rootOf(undefined))) throw new RangeError("the empty tree's root needs no sync: catchUp reaches it without a request");
    const pending = this.#catchUpRoot;
    if (pending !== undefined && !equal(pending, root)) {
      throw new StoreError('SYNC_PENDING', `an unfinished catch-up to another root (${hex(pending)}) is stored: discard it first`);
    }
    // The synced state replaces a batch not committed yet; an unfinished catch-up of the same root is given up.
    await this.#dropBatch();
    if (pending !== undefined) await this.#forgetUnfinished();
    // The head's smallest key (read and checked as any read): its first chunk is shared too, if unchanged.
    const firstKey = next ? await this.#firstKey() : undefined;
    const tree = next ? await this.#loadHead() : undefined;
    try {
      const onto = tree === undefined ? undefined : { tree, capacity: this.#capacity, firstKey };
      const sink = await StoreSink.open(this.#sinkHost(), root, this.#head + 1, resume, onto);
      this.#syncing = root;
      this.#sink = sink;
      return sink;
    } finally {
      tree?.free();
    }
  }

  /** The smallest key of the head, or `undefined` if it holds none. */
  async #firstKey(): Promise<Uint8Array | undefined> {
    for await (const [key] of this.range(undefined, undefined, { pageSize: 1 })) return key;
    return undefined;
  }

  #sinkHost(): SinkHost {
    return {
      backend: this.#backend,
      commitSynced: async (batch, version, versionRecord, capacity) => {
        this.#open();
        // The store is empty: it takes the synced tree's capacity.
        const puts = capacity === this.#capacity ? batch.puts! : [...batch.puts!, ['meta', STORE_KEY, encodeStoreRecord(capacity)] as const];
        await this.#backend.write({ ...batch, puts });
        if (capacity !== this.#capacity) {
          this.#pages.free();
          this.#pages = new Pages(capacity, this.#cacheBytes);
          this.#capacity = capacity;
        }
        this.#versions.set(version, decodeVersionRecord(versionRecord, capacity));
        this.#head = version;
        this.#syncing = undefined;
        this.#dropTree();
      },
      commitEmpty: async (root) => {
        if (!equal(this.#rootOf(undefined), root)) {
          throw new StoreError('CAPACITY_MISMATCH', `the root is not that of an empty tree of capacity ${this.#capacity}, this store's`);
        }
        await this.#backend.write({ deletes: [['meta', SYNC_KEY]] });
        this.#syncing = undefined;
        return (await this.commit()).version;
      },
      release: () => {
        this.#sink = undefined;
      },
      abandon: () => this.#forgetUnfinished(),
    };
  }

  /**
   * The session that `catchUp({ store })` drives to move the head to
   * `root` (`docs/catchup.md`): a new version that shares every record the
   * head holds and the new tree keeps. `VERSION_UNKNOWN` if the store holds
   * no version (sync into it instead), `SYNC_PENDING` while a sync is
   * unfinished or a sync or catch-up runs. A batch of puts and deletes not
   * committed yet is dropped: the caught-up state replaces it. As for
   * `syncSink`, the store is judged once the writes called before it have
   * run, writes called after it wait for the session to open (and are then
   * `SYNC_PENDING` until it is released), and a `root` that is no
   * `Uint8Array` is a `TypeError`, one not 32 bytes long a `RangeError`.
   */
  async catchUpSession(root: Uint8Array): Promise<StoreCatchUp> {
    this.#open();
    if (this.#backend.readOnly) throw new StoreError('STORE_READ_ONLY', 'the store is open for reading only');
    rootArg(root);
    if (this.#sink !== undefined || this.#sinkOpening || this.#catchingUp || this.#catchUpOpening || this.#bulkLoading) throw new StoreError('SYNC_PENDING', 'a sync, catch-up or bulk load of this store is running');
    const asked = root.slice();
    this.#catchUpOpening = true;
    try {
      // The store is judged at its turn, once the writes called before it have run (a commit, a rollback, a discard).
      return await this.#serially(() => this.#openCatchUp(asked));
    } finally {
      this.#catchUpOpening = false;
    }
  }

  async #openCatchUp(root: Uint8Array): Promise<StoreCatchUp> {
    this.#open();
    if (this.#syncing !== undefined) throw new StoreError('SYNC_PENDING', 'a sync into this store is unfinished: finish it (the same sync again) or discard it');
    this.#undamaged();
    const pending = this.#catchUpRoot;
    if (pending !== undefined && !equal(pending, root)) {
      throw new StoreError('SYNC_PENDING', `an unfinished catch-up to another root (${hex(pending)}) is stored: discard it first`);
    }
    const head = this.#versions.get(this.#head);
    if (head === undefined) throw new StoreError('VERSION_UNKNOWN', 'the store holds no version to catch up from: sync into it instead');
    // From here until the session is released, every other write is SYNC_PENDING.
    this.#catchingUp = true;
    try {
      await this.#dropBatch();
      const host: CatchUpHost = {
        backend: this.#backend,
        commitCaughtUp: async (batch, version, versionRecord) => {
          this.#open();
          await this.#backend.write(batch);
          this.#versions.set(version, decodeVersionRecord(versionRecord, this.#capacity));
          this.#head = version;
          this.#catchUpRoot = undefined;
        },
        release: () => {
          this.#catchingUp = false;
        },
        abandon: () => this.#forgetUnfinished(),
      };
      if (equal(head.root, root) && pending === undefined) return StoreCatchUp.upToDate(host, root, this.#head);
      const tree = await this.#loadHead();
      try {
        const session = await StoreCatchUp.open(host, tree, root, this.#head, pending !== undefined);
        this.#catchUpRoot = root;
        return session;
      } finally {
        tree.free();
      }
    } catch (e) {
      this.#catchingUp = false;
      throw e;
    }
  }

  /**
   * Deletes the unfinished sync or catch-up and every record it stored
   * (`SYNC_PENDING` while one runs). A write like the others: it runs
   * once the writes called before it have run (a sync or catch-up opened
   * by one of them is running then), and those called after it wait for it.
   */
  async discardSync(): Promise<void> {
    this.#open();
    if (this.#backend.readOnly) throw new StoreError('STORE_READ_ONLY', 'the store is open for reading only');
    return this.#serially(async () => {
      this.#open();
      if (this.#sink !== undefined || this.#catchingUp) throw new StoreError('SYNC_PENDING', 'a sync or catch-up of this store is running');
      if (this.#syncing === undefined && this.#catchUpRoot === undefined) return;
      await this.#forgetUnfinished();
    });
  }

  /** Drops an unfinished sync or catch-up and every record it stored. */
  async #forgetUnfinished(): Promise<void> {
    // The markers first: a crash after them leaves records that the next open removes.
    await this.#backend.write({ deletes: [['meta', SYNC_KEY], ['meta', CATCHUP_KEY]] });
    this.#syncing = undefined;
    this.#catchUpRoot = undefined;
    await removeProgress(this.#backend);
    await removeKeys(this.#backend, 'meta', CATCHUP_PROGRESS_START, CATCHUP_PROGRESS_END);
    await removeUnborn(this.#backend, this.#lastStored());
  }

  /** The head with the pending batch, loaded if it is not (STORE_READ_ONLY on a reader). */
  async #writable(): Promise<StoredHead> {
    this.#open();
    this.#writer();
    if (this.#tree === undefined) {
      // What a dropped batch wrote ahead goes first, if removing it failed then (a full disk): left,
      // its stale marks would count as the next version's and a prune would delete records it uses.
      const loading = this.#removeWrittenAhead().then(() => this.#loadHead());
      this.#tree = loading;
      loading.catch(() => {
        if (this.#tree === loading) this.#tree = undefined;
      });
    }
    return this.#tree;
  }

  async #loadHead(): Promise<StoredHead> {
    if (this.#head === 0) return new StoredHead(this.capacity);
    const loader = Loader.head(this.#head, await this.#versionRecord(this.#head), this.capacity);
    try {
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const wanted = loader.wanted();
        if (wanted.length === 0) return loader.finishHead();
        await fetchRecords(this.#backend, wanted, (t, k, v) => loader.supply(t, k, v));
      }
    } finally {
      loader.free();
    }
    throw new StoreError('STORE_CORRUPT', `version ${this.#head} is deeper than any tree`);
  }

  /** Runs `write` of `key` on the head after the writes before it. */
  #write(key: Uint8Array, write: (head: StoredHead) => boolean | [RecordTable, Uint8Array][]): Promise<boolean> {
    return this.#serially(async () => {
      const head = await this.#writable();
      this.#wrote(key);
      const done = await this.#apply(head, write);
      if (++this.#writesUnchecked >= BATCH_CHECK_WRITES || this.#pastBound()) await this.#bound(head);
      return done;
    });
  }

  /** Notes a key written since the last commit (bad input included: the write itself refuses it). */
  #wrote(key: Uint8Array): void {
    if (!(key instanceof Uint8Array) || this.#values.budget === 0 || this.#writtenPastCache) return;
    this.#written.add(cacheKey(key));
    // A batch larger than the cache (a bulk import) keeps no set of its keys (a string each, a million of them).
    if (this.#written.size > this.#values.count) {
      this.#writtenPastCache = true;
      this.#written.clear();
    }
  }

  /** Runs `write` on `head`, fetching the records it names until it applies. */
  async #apply(head: StoredHead, write: (head: StoredHead) => boolean | [RecordTable, Uint8Array][]): Promise<boolean> {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const done = write(head);
      if (typeof done === 'boolean') return done;
      await fetchRecords(this.#backend, done, this.#supplier(head));
    }
    throw new StoreError('STORE_CORRUPT', 'a write needs more chunks than a tree holds');
  }

  /** Hands fetched records to `head`, counting the bytes of the chunks they load. */
  #supplier(head: StoredHead): (table: RecordTable, key: Uint8Array, value: Uint8Array | undefined) => void {
    return (t, k, v) => {
      this.#loadedUnchecked += head.supply(t, k, v);
    };
  }

  /** Whether the head's chunks may have passed `batchBytes` since they were last counted. */
  #pastBound(): boolean {
    return this.#residentChecked + this.#loadedUnchecked > this.#batchBytes;
  }

  /**
   * Runs the writes of `batch` in order after the writes before it: puts of
   * its `[key, value]`s, or (`deletes`) deletes of its `[key]`s. The chunks of
   * `PREFETCH_KEYS` writes are fetched together (a round of reads, where
   * each write alone takes one), and what each round loads counts against
   * `batchBytes` as it lands: past the bound, or after `PREFETCH_WRITES`,
   * the loading stops, the writes loaded so far apply, and the batch is
   * checked (and written ahead) before more loads. So a batch of random
   * keys holds at most its bound and one round's chunks.
   */
  #writeMany(batch: readonly (readonly [Uint8Array, Uint8Array?])[], deletes: boolean): Promise<void> {
    return this.#serially(async () => {
      const head = await this.#writable();
      for (let at = 0; at < batch.length; ) {
        let loaded = at;
        while (loaded < batch.length && loaded - at < PREFETCH_WRITES && (loaded === at || !this.#pastBound())) {
          const keys = batch.slice(loaded, loaded + PREFETCH_KEYS).map(([key]) => key);
          for (let fetches = 0, wanted = head.prefetch(keys); wanted.length > 0; wanted = head.prefetch(keys)) {
            if (++fetches > MAX_ROUNDS) throw new StoreError('STORE_CORRUPT', 'a write needs more chunks than a tree holds');
            await fetchRecords(this.#backend, wanted, this.#supplier(head));
          }
          loaded += keys.length;
        }
        for (const [key, value] of batch.slice(at, loaded)) {
          this.#wrote(key);
          // The tree refuses a bad key in a put (and a missing value); a delete of one would answer "absent".
          if (deletes) checkKey(key);
          await this.#apply(head, (h) => (deletes ? h.remove(key, this.#headRead(key)) : h.insert(key, value!, this.#headRead(key))));
        }
        at = loaded;
        await this.#bound(head);
      }
    });
  }

  /**
   * Keeps a pending batch within `batchBytes` (docs/store.md, "A batch of
   * any size"): past it, the loaded chunks it did not change go, then the
   * changed ones are written ahead, born at the coming version, until the
   * batch holds at most half the bound. If a write fails, the pending
   * batch is dropped, as a failed commit drops it.
   */
  async #bound(head: StoredHead): Promise<void> {
    this.#counted(head.residentBytes);
    if (this.#residentChecked <= this.#batchBytes) return;
    const target = Math.floor(this.#batchBytes / 2);
    try {
      // The slot keys the writes so far relied on: a piece may discard their records.
      await fetchRecords(this.#backend, head.unconfirmed(), (t, k, v) => head.supply(t, k, v));
      head.evict(target);
      await this.#writeAhead(head, target);
    } catch (e) {
      await this.#dropBatch().catch(() => {});
      throw e;
    }
    this.#counted(head.residentBytes);
  }

  /** Notes that the head's loaded chunks count `bytes` now (at most). */
  #counted(bytes: number): void {
    this.#residentChecked = bytes;
    this.#loadedUnchecked = 0;
    this.#writesUnchecked = 0;
  }

  /** Writes changed chunks of `head` ahead, a piece a write, until it holds at most `limit` bytes. */
  async #writeAhead(head: StoredHead, limit: number): Promise<void> {
    // Counted once: each piece says what it unloaded (a count walks every loaded chunk).
    for (let resident = head.residentBytes; resident > limit; ) {
      const piece = head.writeAhead(this.#pieceBytes);
      if (piece.puts.length === 0 && piece.discarded.length === 0) break;
      resident -= piece.unloaded;
      this.#wroteAhead = true;
      await this.#backend.write({ deletes: piece.discarded, puts: [...piece.puts, ...staleMarks(piece.stale)] });
    }
  }

  /** Drops the pending batch and deletes what it wrote ahead (a crash leaves that to the next open). */
  async #dropBatch(): Promise<void> {
    this.#dropTree();
    await this.#removeWrittenAhead();
  }

  /**
   * Deletes what a batch wrote ahead, born at the coming version. While this
   * fails (`#wroteAhead` stays set), the next write, commit, sync, catch-up
   * or bulk load tries again first and fails the same way if it fails.
   */
  async #removeWrittenAhead(): Promise<void> {
    if (!this.#wroteAhead) return;
    await removeUnborn(this.#backend, this.#head);
    this.#wroteAhead = false;
  }

  /** Runs `f` once the writes, commits and rollbacks called before it end. */
  #serially<T>(f: () => Promise<T>): Promise<T> {
    const done = this.#writing.then(f);
    this.#writing = done.catch(() => {});
    return done;
  }

  /** Frees the loaded head and its pending batch; the next write loads the head again. */
  #dropTree(): void {
    const tree = this.#tree;
    this.#tree = undefined;
    this.#counted(0);
    tree?.then((t) => t.free(), () => {});
  }

  async #versionRecord(version: number): Promise<Uint8Array> {
    const record = await this.#backend.get('versions', versionKey(version));
    if (record === undefined) throw new StoreError('STORE_CORRUPT', `version ${version} has no record`);
    return record;
  }

  /**
   * The retained version `at` names (the head by default) and its record
   * (`undefined`: nothing committed yet). A read takes it once: every step
   * of the read uses this record (its top, its root), never the version's
   * number again, and `#again` checks between steps that the version
   * still has its root.
   */
  #at(at: AtVersion): [number, VersionRecord | undefined] {
    this.#open();
    const version = at.version === undefined ? this.#head : versionArg(at.version);
    const record = this.#versions.get(version);
    if (record === undefined && version !== this.#head) {
      const damaged = this.#damaged.find((d) => d.version === version);
      if (damaged !== undefined) throw new StoreError('STORE_CORRUPT', damaged.error.message);
      throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
    }
    if (at.root !== undefined) {
      rootArg(at.root);
      if (compareBytes(record?.root ?? this.#rootOf(undefined), at.root) !== 0) {
        throw new StoreError('VERSION_UNKNOWN', `version ${version} does not have root ${hex(at.root)} (rolled back and committed again by another process, or not committed yet)`);
      }
    }
    return [version, record];
  }

  /**
   * The record of `version` again, for the next step of a read that began
   * at `record`: `VERSION_UNKNOWN` if the version no longer has that root
   * (pruned, or rolled back and committed again), as `#at` for a pruned one.
   */
  #again(version: number, record: VersionRecord | undefined): VersionRecord | undefined {
    const [, now] = this.#at({ version });
    if (!sameRoot(now, record)) throw new StoreError('VERSION_UNKNOWN', `version ${version} was rolled back and committed again with another root by another process`);
    return now;
  }

  /** The head version, or `undefined` before the first commit. */
  head(): VersionInfo | undefined {
    this.#open();
    const record = this.#versions.get(this.#head);
    return record && info(this.#head, record);
  }

  /**
   * Whether the database still holds `version` with `root` (by default the
   * root this state knows it by): read from storage, so that a read-only
   * state learns of a prune or a rollback by the writer (its own list of
   * versions is the one it opened or last refreshed with). Without `root`,
   * a version this state does not know counts if stored. A stored record
   * that fails its checks counts (damaged, not gone).
   */
  async isRetained(version: number, root?: Uint8Array): Promise<boolean> {
    this.#open();
    versionArg(version);
    if (root !== undefined) rootArg(root);
    return this.#holds(version, root ?? this.#versions.get(version)?.root);
  }

  /** Whether storage holds `version` with `root` (any root: `undefined`); a damaged record counts. */
  async #holds(version: number, root: Uint8Array | undefined): Promise<boolean> {
    const stored = await this.#backend.get('versions', versionKey(version));
    if (stored === undefined || root === undefined) return stored !== undefined;
    try {
      return compareBytes(decodeVersionRecord(stored, this.#capacity).root, root) === 0;
    } catch {
      return true; // damaged, not gone: the read's own error stands
    }
  }

  /**
   * Reads the version records again, for a state opened read-only beside a
   * writer (its list is otherwise the one it opened with): versions the
   * writer committed since join the list, and those it pruned or rolled
   * back leave it, as does one committed again under its number with
   * another root (the new record takes its place). Each record is checked
   * as at open, but a record that fails is left out, not thrown: it is
   * returned with its `STORE_CORRUPT`, and the other versions stay
   * readable. A version that a read of this state found pruned or rolled
   * back while the records were read (`VERSION_UNKNOWN`) is not listed
   * again from records read before that. A writable state holds the
   * writer's lock, so its list is the database's already: it returns at
   * once.
   */
  async refresh(): Promise<DamagedVersion[]> {
    this.#open();
    if (!this.#backend.readOnly) return [];
    const gone: Array<readonly [number, Uint8Array]> = [];
    this.#goneWhileRefreshing.add(gone);
    let read: Awaited<ReturnType<typeof readVersions>>;
    try {
      const meta = await this.#backend.get('meta', STORE_KEY);
      // An empty store takes the capacity of the first tree synced into it (`commitSynced`).
      if (meta !== undefined && this.#versions.size === 0) {
        const capacity = decodeStoreRecord(meta);
        if (capacity !== this.#capacity) {
          this.#pages.free();
          this.#pages = new Pages(capacity, this.#cacheBytes);
          this.#capacity = capacity;
        }
      }
      read = await readVersions(this.#backend, this.#capacity);
    } finally {
      this.#goneWhileRefreshing.delete(gone);
    }
    const { versions, damaged } = read;
    this.#open();
    // A version that a read found gone while these records were read (pruned or rolled back after
    // the scan passed it) stays out: that read saw the database later than the scan did.
    for (const [version, root] of gone) {
      const stored = versions.get(version);
      if (stored !== undefined && compareBytes(stored.root, root) === 0) versions.delete(version);
    }
    for (const [version, held] of [...this.#versions]) {
      const stored = versions.get(version);
      if (stored === undefined || compareBytes(stored.root, held.root) !== 0) this.#forget(version);
      else versions.set(version, held); // unchanged: the value cache still knows its root without comparing bytes
    }
    this.#versions = versions;
    this.#damaged = damaged;
    this.#head = lastKey(versions);
    return [...damaged];
  }

  /**
   * The version records left out at open or at the last `refresh` because
   * they failed their checks, oldest first, each with its `STORE_CORRUPT`
   * naming the version. Reading one of these versions throws that error.
   */
  damagedVersions(): DamagedVersion[] {
    this.#open();
    return [...this.#damaged];
  }

  /**
   * Runs a read of `version` from `record` (the version record it began
   * with). Its `STORE_CORRUPT` is `VERSION_UNKNOWN` when storage no longer
   * holds the version with that record's root: another process pruned it,
   * or rolled it back (and maybe committed it again with another root)
   * meanwhile. It then leaves this state's list, unless a refresh has put
   * the new record in its place (that one is the database's). So a reader
   * beside a writer never reports routine upkeep as damage, whichever
   * record its list holds when the read fails.
   */
  async #reading<T>(version: number, record: VersionRecord | undefined, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (e) {
      // Errors come from this package and from the WASM core: told by their code. Judged by the
      // read's own root: the list may hold another record of this number by now (a refresh).
      if ((e as { code?: unknown } | null)?.code !== 'STORE_CORRUPT' || record === undefined || (await this.#holds(version, record.root).catch(() => true))) throw e;
      for (const gone of this.#goneWhileRefreshing) gone.push([version, record.root]);
      if (sameRoot(this.#versions.get(version), record)) {
        this.#forget(version);
        if (version === this.#head) this.#head = lastKey(this.#versions);
      }
      throw new StoreError('VERSION_UNKNOWN', `version ${version} was pruned or rolled back by another process`);
    }
  }

  /** Every retained version with its root, oldest first. */
  versions(): VersionInfo[] {
    this.#open();
    return [...this.#versions].map(([version, record]) => info(version, record));
  }

  /**
   * The committed version `at` names (the head by default), loaded whole
   * and kept for later calls (the last few versions asked for); the state
   * frees it when it drops it.
   */
  async snapshot(at: AtVersion = {}): Promise<Snapshot> {
    const [version, record] = this.#at(at);
    let snapshot = this.#loaded.get(version);
    if (snapshot === undefined) {
      snapshot = await this.#load(version, record);
      // Kept by number only while the number still names what was loaded (a refresh may have replaced it meanwhile).
      try {
        this.#again(version, record);
      } catch (e) {
        snapshot.free();
        throw e;
      }
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
    const [, record] = this.#at({ version });
    return this.#load(version, record);
  }

  /**
   * Loads the stored `version` whole from `record`'s root (`STORE_CORRUPT`
   * on any bad record; `VERSION_UNKNOWN` if storage no longer holds it
   * with that root).
   */
  async #load(version: number, record: VersionRecord | undefined): Promise<Snapshot> {
    const load = async () => {
      const stored = await this.#versionRecord(version);
      // The record read now, not the one listed: another process may have committed the number again.
      if (record !== undefined && !sameRoot(decodeVersionRecord(stored, this.capacity), record)) {
        throw new StoreError('STORE_CORRUPT', `version ${version} has another root in storage`);
      }
      return loadTree(this.#backend, version, stored, this.capacity);
    };
    const tree = version === 0 ? new Tree(this.capacity) : await this.#reading(version, record, load);
    const snapshot = tree.head();
    tree.free();
    return snapshot;
  }

  /**
   * Asks `Pages` until it answers, fetching the records it names; a question
   * about `chunks` chunks may take `MAX_ROUNDS` rounds for each. Questions
   * run one at a time: between the rounds of one, another's records would
   * evict its chunks from a small cache and drop the entry records supplied
   * for it, so that neither ends.
   */
  #ask<A extends object>(version: number, record: VersionRecord | undefined, question: () => A, chunks = 1): Promise<Exclude<A, Needs>> {
    const asked = this.#asking.then(() => this.#reading(version, record, () => this.#askAlone(version, question, chunks)));
    this.#asking = asked.catch(() => {});
    return asked;
  }

  async #askAlone<A extends object>(version: number, question: () => A, chunks: number): Promise<Exclude<A, Needs>> {
    for (let round = 0; round < MAX_ROUNDS * chunks; round++) {
      const answer = question();
      if (!('need' in answer)) return answer as Exclude<A, Needs>;
      await fetchRecords(this.#backend, (answer as Needs).need, (t, k, v) => this.#pages.supply(t, k, v));
    }
    throw new StoreError('STORE_CORRUPT', `version ${version} is deeper than any tree`);
  }

  /**
   * The value of `key` in the committed version `at` names (the head by
   * default). TreeError `KEY_EMPTY` / `KEY_TOO_LONG` for a key no tree holds.
   */
  async get(key: Uint8Array, at: AtVersion = {}): Promise<Uint8Array | undefined> {
    checkKey(key);
    const [version, record] = this.#at(at);
    if (record?.top === undefined) return undefined;
    const cached = this.#cached(record, key);
    if (cached !== undefined) return cached ?? undefined;
    return this.#read(version, record, key);
  }

  /**
   * The values of `keys` in the committed version `at` names (the head by
   * default), in the order asked (`undefined`: absent). Cached answers come
   * first; the others are read in key order, so that the keys a chunk holds
   * are read together and the chunk is loaded once for them.
   */
  async getMany(keys: readonly Uint8Array[], at: AtVersion = {}): Promise<Array<Uint8Array | undefined>> {
    if (!Array.isArray(keys)) throw new TypeError('keys must be an array');
    keys.forEach(checkKey);
    const [version, record] = this.#at(at);
    const values = new Array<Uint8Array | undefined>(keys.length).fill(undefined);
    if (record?.top === undefined) return values;
    const misses: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const cached = this.#cached(record, keys[i]!);
      if (cached === undefined) misses.push(i);
      else values[i] = cached ?? undefined;
    }
    misses.sort((a, b) => compareBytes(keys[a]!, keys[b]!));
    // Asked again for each key: the store may have been closed, or the version pruned or replaced, meanwhile.
    for (const i of misses) values[i] = await this.#read(version, this.#again(version, record)!, keys[i]!);
    return values;
  }

  /** `key`'s value read from the records of `version` (not from the value cache), then kept there. */
  async #read(version: number, record: VersionRecord, key: Uint8Array): Promise<Uint8Array | undefined> {
    const top = record.top!;
    const answer = await this.#ask(version, record, () => this.#pages.lookup(top[0], top[1], key));
    let value: Uint8Array | null = null;
    await this.#reading(version, record, async () => {
      if ('found' in answer) value = await readEntry(this.#backend, answer.found, key);
      else if ('value' in answer) value = answer.value;
      else if ('held' in answer) value = await readHeld(this.#backend, answer.held, key, answer.hash);
      else for (const [entry, slotKey] of answer.absent) await readEntry(this.#backend, entry, slotKey);
    });
    this.#remember(record, key, value);
    return value ?? undefined;
  }

  /** The value cache's answer for `key` in the version of `record`. */
  #cached(record: VersionRecord, key: Uint8Array): Uint8Array | null | undefined {
    return key instanceof Uint8Array ? this.#values.get(record.root, key) : undefined;
  }

  /**
   * The value a checked read left in the value cache for `key` at the
   * committed head, if any: a write of `key` hands it to the head, where it
   * confirms the key's slot in place of its entry record. Not a read of the
   * cache: it counts no hit.
   */
  #headRead(key: Uint8Array): Uint8Array | undefined {
    const root = this.#versions.get(this.#head)?.root;
    return root !== undefined && key instanceof Uint8Array ? this.#values.peek(root, key) : undefined;
  }

  /** Keeps a checked answer read from the version of `record`, if that is the head's. */
  #remember(record: VersionRecord, key: Uint8Array, value: Uint8Array | null): void {
    this.#values.set(record.root, this.#versions.get(this.#head)?.root, key, value);
  }

  async has(key: Uint8Array, at?: AtVersion): Promise<boolean> {
    return (await this.get(key, at)) !== undefined;
  }

  /**
   * The value of `key` and its existence proof (`spec/proof-format.md`),
   * which verifies against the version's root. Read through the chunk
   * cache and verified before it is returned. Throws StoreError
   * `KEY_NOT_FOUND` if the key is absent.
   */
  async proveExistence(key: Uint8Array, at: AtVersion = {}): Promise<{ value: Uint8Array; proof: Uint8Array }> {
    const [version, record] = this.#at(at);
    const top = record?.top;
    if (top === undefined) throw new StoreError('KEY_NOT_FOUND', 'the key is absent');
    const answer = await this.#ask(version, record, () => this.#pages.proveExistence(top[0], top[1], key));
    if ('notFound' in answer) throw new StoreError('KEY_NOT_FOUND', 'the key is absent');
    // A cached value is checked by the proof too.
    let value = this.#cached(record!, key);
    if (value === undefined || value === null) {
      if ('value' in answer) value = answer.value;
      else if ('held' in answer) value = await this.#reading(version, record, () => readHeld(this.#backend, answer.held, key, answer.hash));
      else value = await this.#reading(version, record, () => readEntry(this.#backend, answer.found, key));
      this.#remember(record!, key, value);
    }
    proven(version, () => verifyExistence(record!.root, key, value, answer.proof));
    return { value, proof: answer.proof };
  }

  /**
   * The absence proof of `key` (`spec/proof-format.md`), which verifies
   * against the version's root. Read through the chunk cache and verified
   * before it is returned. Throws StoreError `KEY_EXISTS` if the key is
   * present, ProofError `KEY_EMPTY` / `KEY_TOO_LONG` for a key no tree holds.
   */
  async proveAbsence(key: Uint8Array, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#at(at);
    const top = record?.top;
    const answer = await this.#ask(version, record, () => this.#pages.proveAbsence(top?.[0], top?.[1], key));
    if ('present' in answer) throw new StoreError('KEY_EXISTS', 'the key is present');
    proven(version, () => verifyAbsence(this.#rootOf(record), key, answer.proof));
    return answer.proof;
  }

  /**
   * The range proof of every entry with `start ≤ key < end`, at most
   * `limit` (1 … 65,536) of them (`spec/proof-format.md`), which verifies
   * against the version's root. Built chunk by chunk through the cache and
   * verified before it is returned. Throws ProofError `QUERY_INVALID`, … for
   * a bad query.
   */
  async proveRange(start: Uint8Array, end: Uint8Array | undefined, limit: number, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#at(at);
    return (await this.#rangeProof(version, record, start, end, limit)).proof;
  }

  /** A range proof and what it proves, verified once. */
  async #rangeProof(version: number, record: VersionRecord | undefined, start: Uint8Array, end: Uint8Array | undefined, limit: number): Promise<{ proof: Uint8Array; page: RangeResult }> {
    const top = record?.top;
    const range = new PagedRange(start, end, limit);
    try {
      // Every chunk but the first and the last adds a result.
      const { done: proof } = await this.#ask(version, record, () => this.#pages.proveRange(top?.[0], top?.[1], range), limit + 2);
      return { proof, page: proven(version, () => verifyRange(this.#rootOf(record), start, end, limit, proof)) };
    } finally {
      range.free();
    }
  }

  /**
   * Every entry with `start ≤ key < end` (from the first key by default) in
   * the version `at` names, in key order, read one verified range proof of
   * `pageSize` entries (default 1,024) at a time.
   */
  async *range(start: Uint8Array | undefined, end?: Uint8Array, at: RangeOptions = {}): AsyncGenerator<[key: Uint8Array, value: Uint8Array]> {
    const [version, first] = this.#at(at);
    const pageSize = at.pageSize ?? RANGE_PAGE;
    for (let from: Uint8Array | undefined = start ?? new Uint8Array(); from !== undefined; ) {
      // Asked again for each page: the store may have been closed, or the version pruned or replaced, meanwhile.
      const record = this.#again(version, first);
      const { page } = await this.#rangeProof(version, record, from, end, pageSize);
      yield* page.entries;
      from = page.complete ? undefined : page.resumeKey;
    }
  }

  /**
   * The proof of chunk `index` (`spec/proof-format.md`), verified against
   * the version's root. `CHUNK_OUT_OF_RANGE` for an index at or above the
   * version's chunk count; `RangeError` for one that is not a non-negative
   * integer, `TypeError` for one that is no number.
   */
  async proveChunk(index: number, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#chunkAt(index, at);
    const { done } = await this.#ask(version, record, () => this.#pages.proveChunk(record.top?.[0], record.top?.[1], index));
    proven(version, () => verifyChunkProof(record.root, done));
    return done;
  }

  /**
   * The envelope of chunk `index` (`spec/chunk-format.md`), as peers serve
   * it. Not hashed again: each record it is built from was checked against
   * the hash its parent names, up to the version record, whose root commits
   * to the top (`Pages`).
   */
  async exportChunk(index: number, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#chunkAt(index, at);
    const { done } = await this.#ask(version, record, () => this.#pages.exportChunk(record.top?.[0], record.top?.[1], index));
    return done;
  }

  /**
   * The catch-up pieces of the version `at` names, as a serving peer sends
   * them (`spec/catchup.md`): the subtree at a tree path `levels` deep, a
   * chunk's leaves, and a chunk's entries at a bitmap's positions. Throws
   * TreeError `CHUNK_OUT_OF_RANGE` for a path that names no inner node (or
   * chunk), `QUERY_INVALID` for `levels` or a bitmap out of range.
   */
  async exportSubtree(path: Uint8Array, levels: number, maxBytes: number, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#at(at);
    return (await this.#ask(version, record, () => this.#pages.exportSubtree(record?.top?.[0], record?.top?.[1], path, levels, maxBytes), 2)).done;
  }

  async exportLeaves(path: Uint8Array, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#at(at);
    return (await this.#ask(version, record, () => this.#pages.exportLeaves(record?.top?.[0], record?.top?.[1], path))).done;
  }

  async exportEntries(path: Uint8Array, bitmap: Uint8Array, maxBytes: number, at: AtVersion = {}): Promise<Uint8Array> {
    const [version, record] = this.#at(at);
    return (await this.#ask(version, record, () => this.#pages.exportEntries(record?.top?.[0], record?.top?.[1], path, bitmap, maxBytes))).done;
  }

  /**
   * `#at`, for a chunk that the version holds (TreeError code
   * `CHUNK_OUT_OF_RANGE` otherwise): an index that is no number is a
   * `TypeError`, one that is not a non-negative safe integer (`-1`, `1.5`)
   * a `RangeError`.
   */
  #chunkAt(index: number, at: AtVersion): [number, VersionRecord] {
    const [version, record] = this.#at(at);
    if (typeof index !== 'number') throw new TypeError(`index must be a number, got ${typeof index}`);
    if (!Number.isSafeInteger(index) || index < 0) throw new RangeError(`index must be a non-negative integer, got ${index}`);
    if (record === undefined || index >= record.chunkCount) throw new StoreError('CHUNK_OUT_OF_RANGE', `version ${version} has no chunk ${index}`);
    return [version, record];
  }

  /** A version's root; the empty tree's for nothing committed. */
  #rootOf(record: VersionRecord | undefined): Uint8Array {
    if (record !== undefined) return record.root;
    const empty = new Tree(this.capacity);
    const head = empty.head();
    const root = head.root;
    head.free();
    empty.free();
    return root;
  }

  /** Sets `key` → `value` in the pending batch (TreeError `KEY_TOO_LONG`, … leave it unchanged). */
  async put(key: Uint8Array, value: Uint8Array): Promise<void> {
    await this.#write(key, (head) => head.insert(key, value, this.#headRead(key)));
  }

  /** Deletes `key` in the pending batch; resolves to whether it was present (TreeError `KEY_EMPTY`, `KEY_TOO_LONG` leave it unchanged). */
  async delete(key: Uint8Array): Promise<boolean> {
    checkKey(key);
    return this.#write(key, (head) => head.remove(key, this.#headRead(key)));
  }

  /**
   * Sets each `[key, value]` in the pending batch, in order: as many `put`s,
   * but the chunks they change are read together, a round for thousands of
   * writes. A refused entry (TreeError `KEY_TOO_LONG`, …) stops the batch
   * there: the entries before it are in the pending batch, none after it.
   */
  async putMany(entries: Iterable<readonly [Uint8Array, Uint8Array]>): Promise<void> {
    await this.#writeMany([...entries], false);
  }

  /** Deletes each of `keys` in the pending batch, in order, their chunks read together (as `putMany`, and a refused key stops it as there). */
  async deleteMany(keys: Iterable<Uint8Array>): Promise<void> {
    await this.#writeMany(Array.from(keys, (key) => [key] as const), true);
  }

  /**
   * Commits the pending batch as the next version, in one atomic write of
   * the backend: the version record in it makes the version visible. If the
   * write fails, the pending batch is dropped and the head stays as stored.
   */
  commit(): Promise<VersionInfo> {
    return this.#serially(() => this.#commit());
  }

  async #commit(): Promise<VersionInfo> {
    const head = await this.#writable();
    try {
      // The slot keys the batch's writes relied on, read together (STORE_CORRUPT drops the batch).
      await fetchRecords(this.#backend, head.unconfirmed(), (t, k, v) => head.supply(t, k, v));
    } catch (e) {
      // With what it wrote ahead: born at the version the next commit takes, it would outlive it unused.
      await this.#dropBatch().catch(() => {});
      throw e;
    }
    let w: WriteSet;
    try {
      // A large batch: its changed chunks first, born at the coming version,
      // which stays invisible until the version record lands (a crash
      // leaves them to the next open's cleanup, a failure removes them).
      await this.#writeAhead(head, this.#cacheBytes + this.#pieceBytes);
      w = head.commitToStore();
      const version = ['versions', versionKey(w.version), w.versionRecord] as const;
      await this.#backend.write({ deletes: w.discarded, puts: [...w.puts, ...staleMarks(w.stale), version] });
    } catch (e) {
      await this.#dropBatch().catch(() => {});
      throw e;
    }
    this.#wroteAhead = false;
    const record = decodeVersionRecord(w.versionRecord, this.capacity);
    const from = this.#versions.get(this.#head)?.root;
    this.#versions.set(w.version, record);
    this.#head = w.version;
    this.#values.advance(from, record.root, this.#writtenPastCache ? 'all' : this.#written);
    this.#written.clear();
    this.#writtenPastCache = false;
    head.evict(this.#cacheBytes);
    this.#counted(this.#cacheBytes);
    return info(w.version, record);
  }

  /**
   * Reclaims what only older versions use: keeps the last `keepLast`
   * versions, or every version from `before` on. The version records go
   * first (one atomic write), then the records their stale marks name, and
   * the backend gives their space back (`compact`). A write like the
   * others: it runs once the writes, commits and rollbacks called before it
   * have run, and counts the versions then, and those called after it wait
   * for it (a prune called while a bulk load runs is `SYNC_PENDING`).
   */
  async prune(options: PruneOptions): Promise<void> {
    this.#open();
    if ('keepLast' in options && 'before' in options) throw new RangeError('prune takes keepLast or before, not both');
    if (options.vacuum !== undefined && typeof options.vacuum !== 'boolean') throw new TypeError('vacuum must be a boolean');
    let keep: { readonly keepLast: number } | { readonly before: number };
    if ('keepLast' in options) {
      if (!Number.isSafeInteger(options.keepLast) || options.keepLast < 1) throw new RangeError('keepLast must be a positive integer');
      keep = { keepLast: options.keepLast };
    } else {
      if (!Number.isSafeInteger(options.before) || options.before < 0) throw new RangeError('before must be a version number');
      keep = { before: options.before };
    }
    if (this.#bulkLoading) throw new StoreError('SYNC_PENDING', 'a bulk load into this store is running');
    const vacuum = options.vacuum === true;
    return this.#serially(() => this.#prune(keep, vacuum));
  }

  async #prune(keep: { readonly keepLast: number } | { readonly before: number }, vacuum: boolean): Promise<void> {
    // Damaged records count as versions: pruning past them is how a writer drops them.
    const retained = [...this.#versions.keys(), ...this.#damaged.map((d) => d.version)].sort((a, b) => a - b);
    const keepFrom = 'keepLast' in keep ? (retained[Math.max(0, retained.length - keep.keepLast)] ?? 0) : Math.min(keep.before, this.#lastStored());
    this.#writer((v) => v < keepFrom);
    const dropped = retained.filter((v) => v < keepFrom);
    if (dropped.length > 0) await this.#backend.write({ deletes: dropped.map((v) => ['versions', versionKey(v)] as const) });
    for (const v of dropped) this.#forget(v);
    // Stale at s ≤ keepFrom: used only by versions before keepFrom.
    const end = versionKey(keepFrom + 1);
    for (let batch = await keysFrom(this.#backend, 'stale', new Uint8Array(), end); batch.length > 0; batch = await keysFrom(this.#backend, 'stale', new Uint8Array(), end)) {
      // The records in key order, table by table: each table's pages are then met in order (44 s → 36 s in the run above).
      const stale = batch.map((k) => [staleTable(k), staleRecord(k)] as const);
      // A full chunk record's values records go with it.
      const values = stale.filter(([t]) => t === 'chunks').flatMap(([, k]) => valuesKeys(k, this.#capacity).map((v) => ['values', v] as const));
      const records = [...stale, ...values].sort(([t, a], [u, b]) => (t < u ? -1 : t > u ? 1 : compareBytes(a, b)));
      const deletes = [...batch.map((k) => ['stale', k] as const), ...records];
      await this.#backend.write({ deletes });
    }
    await this.#backend.compact({ full: vacuum });
  }

  #forget(version: number): void {
    this.#versions.delete(version);
    this.#damaged = this.#damaged.filter((d) => d.version !== version);
    this.#loaded.get(version)?.free();
    this.#loaded.delete(version);
  }

  /** Makes the retained `version` the head, discarding every later version and the pending batch. */
  async rollback(version: number): Promise<void> {
    versionArg(version);
    return this.#serially(() => this.#rollback(version));
  }

  async #rollback(version: number): Promise<void> {
    this.#writer((v) => v > version);
    if (!this.#versions.has(version)) throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
    const later = [...this.#versions.keys(), ...this.#damaged.map((d) => d.version)].filter((v) => v > version);
    const after = versionKey(version + 1);
    const staleLater = await keysFrom(this.#backend, 'stale', after);
    // First the versions and the marks that said their records replaced older ones…
    await this.#backend.write({
      deletes: [...later.map((v) => ['versions', versionKey(v)] as const), ...staleLater.map((k) => ['stale', k] as const)],
    });
    for (const v of later) this.#forget(v);
    this.#head = version;
    this.#dropTree();
    this.#wroteAhead = false;
    // …then what those versions wrote (a crash here leaves garbage that the next open removes),
    // and the file gives the space back, as after a prune.
    await removeUnborn(this.#backend, version);
    await this.#backend.compact();
  }

  async stats(): Promise<StoreStats> {
    this.#open();
    const head = this.#versions.get(this.#head);
    const pages = this.#pages;
    return {
      entryCount: head?.entryCount ?? 0,
      chunkCount: head?.chunkCount ?? 0,
      versions: this.#versions.size,
      bytesOnDisk: await this.#backend.sizeBytes(),
      cacheHits: pages.hits,
      cacheMisses: pages.misses,
      cachedChunkBytes: pages.residentBytes,
      headChunkBytes: (await this.#tree?.catch(() => undefined))?.residentBytes ?? 0,
      valueCacheHits: this.#values.hits,
      valueCacheMisses: this.#values.misses,
      cachedValueBytes: this.#values.bytes,
    };
  }

  /**
   * Closes the state and its backend; a second call resolves at once.
   * Every call made after it is `STORE_CLOSED` (thrown at once by the
   * synchronous ones). Writes first: the one running (a put, commit,
   * prune, rollback, bulk load, `discardSync`, or the opening of a sync or
   * catch-up) runs to its end, and those called earlier that have not
   * started yet reject with `STORE_CLOSED`, changing nothing. Then the
   * pending batch is dropped (it was never committed) and the snapshots
   * `snapshot()` keeps are freed. Reads are not waited for as a whole: the
   * question each asked of the records before the close gets its answer
   * (a read that asks one, such as `proveChunk`, `exportChunk` or
   * `proveRange`, resolves), but a read that asks several in turn
   * (`getMany` of keys not in the value cache, `range()`) rejects with
   * `STORE_CLOSED` at the first it would ask after the close. Last, a
   * stopped sync's final write lands, and the backend closes.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // The write running ends first (those called before it that have not started are STORE_CLOSED at their turn).
    await this.#writing;
    this.#dropTree();
    for (const s of this.#loaded.values()) s.free();
    this.#loaded.clear();
    // Questions asked before the close end first (later calls are STORE_CLOSED), and a stopped sync's last write.
    await this.#asking;
    await this.#sink?.settled();
    this.#pages.free();
    await this.#backend.close();
  }
}

/** The last key of an ascending map (0 when empty); a store may hold more versions than a spread takes. */
function lastKey(versions: Map<number, unknown>): number {
  let last = 0;
  for (const v of versions.keys()) last = v;
  return last;
}

/** The last version with a record in `versions` or `damaged` (0: none). */
function lastStored(versions: Map<number, unknown>, damaged: readonly DamagedVersion[]): number {
  return Math.max(lastKey(versions), damaged.at(-1)?.version ?? 0);
}

function info(version: number, { root, chunkCount, entryCount }: VersionRecord): VersionInfo {
  // A copy: the state's own root is what its reads and checks compare against.
  return { version, root: root.slice(), chunkCount, entryCount };
}

/** Runs `verify` and returns what it proves; a proof built from stored records that fails it means a record lied. */
function proven<T>(version: number, verify: () => T): T {
  try {
    return verify();
  } catch {
    throw new StoreError('STORE_CORRUPT', `a record of version ${version} does not prove its answer`);
  }
}

/** Deletes the progress records of a sync (after its sync record went). */
async function removeProgress(backend: StorageBackend): Promise<void> {
  await removeKeys(backend, 'meta', PROGRESS_START, PROGRESS_END);
}

/** Deletes every key of `table` in `[start, end)` (progress records: at most one a chunk), writing nothing when there is none. */
async function removeKeys(backend: StorageBackend, table: string, start: Uint8Array, end: Uint8Array): Promise<void> {
  if ((await keysFrom(backend, table, start, end, 1)).length > 0) await backend.write({ deleteRanges: [[table, start, end]] });
}

/** Whether two version records (`undefined`: nothing committed) have the same root. */
function sameRoot(a: VersionRecord | undefined, b: VersionRecord | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && compareBytes(a.root, b.root) === 0);
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function hex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
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
