/**
 * The storage port: the small asynchronous interface that every state-store
 * backend implements (an embedded database in Node, IndexedDB in browsers,
 * memory for tests), in the manner of automerge-repo's storage adapters and
 * jmt's TreeReader/TreeWriter. Keys and values are bytes; records live in
 * named tables fixed when the backend is opened. Asynchronous because
 * IndexedDB is.
 * @module
 */

/**
 * One atomic, durable write: every put and delete applies, or none does.
 * Range deletes apply first, then deletes, then puts: a key both deleted and
 * put ends with the put.
 */
export interface WriteBatch {
  readonly puts?: ReadonlyArray<readonly [table: string, key: Uint8Array, value: Uint8Array]>;
  readonly deletes?: ReadonlyArray<readonly [table: string, key: Uint8Array]>;
  /**
   * Deletes every key of the table with `start ≤ key < end` (to the table's
   * last key without `end`; nothing when `end ≤ start`), in one step of the
   * engine: far cheaper than a delete a key where many go together
   * (IndexedDB took 52–85 ms for 541 deletes and 20–36 ms for their range,
   * docs/storage.md).
   */
  readonly deleteRanges?: ReadonlyArray<readonly [table: string, start: Uint8Array, end?: Uint8Array]>;
}

/** Keys of one table in unsigned byte order with `start ≤ key < end`, at most `limit` of them. */
export interface ScanRange {
  readonly start?: Uint8Array;
  readonly end?: Uint8Array;
  readonly limit?: number;
}

/** What a backend is opened with. */
export interface BackendOptions {
  /** The tables the caller uses; any other table name is a `RangeError`. */
  readonly tables: readonly string[];
  /** Open for reading only: no writer lock is taken, and `write` fails. */
  readonly readOnly?: boolean;
}

/** What `compact` does beyond giving free space back. */
export interface CompactOptions {
  /** Also rewrite the data so that partly empty pages are packed (SQLite `VACUUM`). */
  readonly full?: boolean;
}

/** A storage backend. Errors carry a stable `code` (spec/errors.md). */
export interface StorageBackend {
  /** `'sqlite'`, `'indexeddb'`, `'memory'`, … */
  readonly kind: string;
  readonly readOnly: boolean;
  /** One record, or `undefined` when absent. */
  get(table: string, key: Uint8Array): Promise<Uint8Array | undefined>;
  /** Many records of one table in one round trip, in the order asked. */
  getMany(table: string, keys: readonly Uint8Array[]): Promise<Array<Uint8Array | undefined>>;
  /** Records of one table in key order. */
  scan(table: string, range?: ScanRange): AsyncIterable<readonly [key: Uint8Array, value: Uint8Array]>;
  /** Applies `batch` atomically; once the promise resolves, the batch survives a killed process. */
  write(batch: WriteBatch): Promise<void>;
  /** Bytes the backend occupies (on disk; in memory for `memory`). */
  sizeBytes(): Promise<number>;
  /**
   * Gives the space of deleted records back where the engine can (after a
   * prune): SQLite returns free pages to the file system and truncates its
   * WAL; IndexedDB and memory have nothing to do. With `full`, SQLite also
   * rewrites the database (`VACUUM`), packing the pages that deletes left
   * partly empty: it writes the whole database again and needs about twice
   * its size on disk meanwhile. Records are unchanged. `STORE_READ_ONLY` on
   * a read-only backend.
   */
  compact(options?: CompactOptions): Promise<void>;
  /** Releases the writer lock and every handle; later calls fail with `STORE_CLOSED`. */
  close(): Promise<void>;
}
