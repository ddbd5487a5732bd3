/**
 * `@bpavl/storage/indexeddb`: the browser backend. One IndexedDB database
 * per store, one object store per port table, binary keys (IndexedDB orders
 * them by unsigned bytes, as the port does). A batch is one `readwrite`
 * transaction with `durability: 'strict'`, so its `write` resolves once the
 * browser has flushed it; an aborted transaction leaves nothing. The writer
 * lock is a Web Lock (`navigator.locks`), held across tabs and workers of
 * the origin until `close`. Opening a writer asks for persistent storage
 * (`navigator.storage.persist()`), so the browser does not evict the data
 * under storage pressure when it grants it.
 * @module
 */
import { checkBatch, checkKey, checkKeys, checkOptions, checkRange, checkTable, compareBytes, storedBytes } from './checks.ts';
import { asStorageError, StorageError } from './errors.ts';
import type { BackendOptions, ScanRange, StorageBackend, WriteBatch } from './port.ts';
import { pagedScan, type PageQuery } from './scan.ts';

/** {@link openIndexedDbBackend}'s options: the database name and the port's. */
export interface IndexedDbBackendOptions extends BackendOptions {
  /** The IndexedDB database name (one per store). */
  readonly name: string;
}

/** A key as IndexedDB's types want it (a view on an ArrayBuffer; a shared one is refused by IndexedDB). */
const idbKey = (key: Uint8Array) => key as Uint8Array<ArrayBuffer>;

/** `value` on a buffer of its own: IndexedDB clones a view's whole buffer, so a view of a larger one would store all of it. */
const ownBuffer = (value: Uint8Array) => (value.byteOffset === 0 && value.byteLength === value.buffer.byteLength ? value : value.slice());

const request = <T>(req: IDBRequest<T>): Promise<T> =>
  new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });

const done = (tx: IDBTransaction): Promise<void> =>
  new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new DOMException('the transaction was aborted', 'AbortError'));
    tx.onerror = () => reject(tx.error);
  });

/**
 * Runs `body`, turning a DOMException into a StorageError (see
 * {@link asStorageError}): a version conflict is `STORE_LOCKED`, anything
 * else (a full quota, a failed disk) `STORE_IO`.
 */
async function guarded<T>(what: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (e) {
    const name = (e as { name?: unknown } | undefined)?.name;
    throw asStorageError(e, name === 'VersionError' || name === 'InvalidStateError' ? 'STORE_LOCKED' : 'STORE_IO', what);
  }
}

/**
 * The object store that marks a database as made by this backend (IndexedDB
 * has no application id). Not an identifier, so no port table can take its name.
 */
const MARK = 'bpavl-storage';

/** How long a writer's upgrade waits for other connections to let go of the old version. */
const BLOCKED_TIMEOUT_MS = 5000;

/**
 * Opens the existing database `name`, without creating one: `undefined`
 * when there is none (an open that would create it is aborted).
 */
async function openExisting(name: string): Promise<IDBDatabase | undefined> {
  const open = indexedDB.open(name);
  let created = false;
  open.onupgradeneeded = () => {
    created = true;
    open.transaction!.abort();
  };
  try {
    return await request(open);
  } catch (e) {
    if (created) return undefined;
    throw e;
  }
}

/**
 * Whether `db` was made by this backend: it has the mark, or, made before
 * the mark, only object stores the port could have made (port tables,
 * out-of-line keys). Any other database is another application's.
 */
function isOurs(db: IDBDatabase, tables: ReadonlySet<string>): boolean {
  const names = [...db.objectStoreNames];
  if (names.includes(MARK)) return true;
  if (!names.every((n) => tables.has(n))) return false;
  if (names.length === 0) return true;
  const tx = db.transaction(names, 'readonly');
  const plain = names.every((n) => {
    const store = tx.objectStore(n);
    return store.keyPath === null && !store.autoIncrement;
  });
  tx.abort();
  return plain;
}

/**
 * Opens `name`, first adding the object stores that a writer needs and that
 * are missing (and the mark). `STORE_NOT_A_DATABASE` for another
 * application's database, or for a read-only open where none exists;
 * `STORE_LOCKED` when another connection holds the old version past
 * {@link BLOCKED_TIMEOUT_MS}.
 */
async function openDatabase(name: string, tables: ReadonlySet<string>, readOnly: boolean): Promise<IDBDatabase> {
  const existing = readOnly ? await openExisting(name) : await request(indexedDB.open(name));
  if (existing === undefined) throw new StorageError('STORE_NOT_A_DATABASE', `no store was made in ${name} yet`);
  if (!isOurs(existing, tables)) {
    existing.close();
    throw new StorageError('STORE_NOT_A_DATABASE', `${name} is an IndexedDB database of another application`);
  }
  const missing = [...tables, MARK].filter((t) => !existing.objectStoreNames.contains(t));
  if (readOnly || missing.length === 0) return existing;
  existing.close();
  const upgrade = indexedDB.open(name, existing.version + 1);
  upgrade.onupgradeneeded = () => {
    for (const t of missing) upgrade.result.createObjectStore(t);
  };
  // Another connection must let go of the old version first: ours get `versionchange` and close (see below).
  return new Promise((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let gaveUp = false;
    upgrade.onblocked = () => {
      timer ??= setTimeout(() => {
        gaveUp = true;
        reject(new StorageError('STORE_LOCKED', `another connection to ${name} does not let go of it`));
      }, BLOCKED_TIMEOUT_MS);
    };
    upgrade.onsuccess = () => {
      clearTimeout(timer);
      // An upgrade that went through after the open gave up: let go of it at once.
      if (gaveUp) upgrade.result.close();
      else resolve(upgrade.result);
    };
    upgrade.onerror = () => {
      clearTimeout(timer);
      reject(upgrade.error);
    };
  });
}

/** The Web Lock a writer of database `name` holds, in every tab of the origin. */
const writerLock = (name: string) => `bpavl-storage-writer:${name}`;

/**
 * Whether a writer holds database `name` now, in this tab or another of the
 * same origin: deleting the database then pulls it from under that writer.
 */
export async function writerHolds(name: string): Promise<boolean> {
  const { held = [] } = await navigator.locks.query();
  return held.some((lock) => lock.name === writerLock(name));
}

/** Holds the Web Lock `name` until `release`, or resolves `undefined` at once when it is taken. */
async function takeWriterLock(name: string): Promise<{ release(): void } | undefined> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const granted = await new Promise<boolean>((resolve, reject) => {
    navigator.locks
      .request(writerLock(name), { ifAvailable: true }, (lock) => {
        resolve(lock !== null);
        return lock ? held : undefined;
      })
      .catch(reject);
  });
  return granted ? { release } : undefined;
}

/**
 * Opens the IndexedDB database `name` (`kind: 'indexeddb'`). A writer
 * takes the origin-wide writer lock of `name` and creates the missing
 * tables; read-only backends open beside it, in this page or others. A
 * table that no writer has created yet reads as empty.
 *
 * @throws `TypeError` / `RangeError` for bad options; `StorageError`
 *   `STORE_LOCKED` while another writer has `name` open (or another
 *   connection will not let go of it for an upgrade), `STORE_NOT_A_DATABASE`
 *   for another application's database or a read-only open of a name where
 *   no store was made, `STORE_IO` when IndexedDB refuses.
 * @example
 * ```ts
 * const backend = await openIndexedDbBackend({ name: 'bpavl-state', tables: ['nodes', 'meta'] });
 * ```
 */
export async function openIndexedDbBackend(options: IndexedDbBackendOptions): Promise<StorageBackend> {
  const tables = checkOptions(options);
  const { name } = options;
  if (typeof name !== 'string') throw new TypeError('options.name must be a string');
  if (name === '') throw new RangeError('options.name must not be empty');
  const readOnly = options.readOnly ?? false;
  let lock: { release(): void } | undefined;
  if (!readOnly) {
    lock = await guarded('taking the writer lock', () => takeWriterLock(name));
    if (!lock) throw new StorageError('STORE_LOCKED', `another writer has ${name} open`);
    // Best effort: the browser may decline, and the data is stored either way.
    await navigator.storage?.persist?.().catch(() => false);
  }
  try {
    const db = await guarded(`opening ${name}`, () => openDatabase(name, tables, readOnly));
    return new IndexedDbBackend(db, name, tables, readOnly, lock);
  } catch (e) {
    lock?.release();
    throw e;
  }
}

class IndexedDbBackend implements StorageBackend {
  readonly kind = 'indexeddb';
  readonly readOnly: boolean;
  readonly #name: string;
  readonly #tables: ReadonlySet<string>;
  readonly #lock: { release(): void } | undefined;
  #closed = false;
  /** `null` after another connection's version change made this one let go; reopened on the next call. */
  #db: IDBDatabase | null;

  constructor(db: IDBDatabase, name: string, tables: ReadonlySet<string>, readOnly: boolean, lock: { release(): void } | undefined) {
    this.#db = this.#watch(db);
    this.#name = name;
    this.#tables = tables;
    this.readOnly = readOnly;
    this.#lock = lock;
  }

  async get(table: string, key: Uint8Array): Promise<Uint8Array | undefined> {
    checkTable(this.#tables, table);
    checkKey(key);
    const [value] = await this.#read(table, (store) => [store.get(idbKey(key))]);
    return storedBytes(value);
  }

  async getMany(table: string, keys: readonly Uint8Array[]): Promise<Array<Uint8Array | undefined>> {
    checkTable(this.#tables, table);
    checkKeys(keys);
    const values = await this.#read(table, (store) => keys.map((k) => store.get(idbKey(k))));
    return keys.map((_, i) => storedBytes(values[i]));
  }

  scan(table: string, range?: ScanRange): AsyncIterable<readonly [Uint8Array, Uint8Array]> {
    this.#ensureOpen();
    checkTable(this.#tables, table);
    return pagedScan((query) => this.#page(table, query), checkRange(range));
  }

  async write(batch: WriteBatch): Promise<void> {
    this.#ensureOpen();
    if (this.readOnly) throw new StorageError('STORE_READ_ONLY', 'the backend was opened read-only');
    checkBatch(this.#tables, batch);
    // IDBKeyRange refuses a range with no key in it.
    const ranges = (batch.deleteRanges ?? []).filter(([, start, end]) => end === undefined || compareBytes(start, end) < 0);
    const names = new Set([...(batch.puts ?? []).map((p) => p[0]), ...(batch.deletes ?? []).map((d) => d[0]), ...ranges.map((r) => r[0])]);
    if (names.size === 0) return;
    await guarded('write', async () => {
      const tx = (await this.#database()).transaction([...names], 'readwrite', { durability: 'strict' });
      const finished = done(tx);
      try {
        // Range deletes, then deletes, then puts: a key both deleted and put ends with the put.
        for (const [table, start, end] of ranges) {
          tx.objectStore(table).delete(end === undefined ? IDBKeyRange.lowerBound(idbKey(start)) : IDBKeyRange.bound(idbKey(start), idbKey(end), false, true));
        }
        for (const [table, key] of batch.deletes ?? []) tx.objectStore(table).delete(idbKey(key));
        for (const [table, key, value] of batch.puts ?? []) tx.objectStore(table).put(ownBuffer(value), idbKey(key));
      } catch (e) {
        tx.abort();
        await finished.catch(() => undefined);
        throw e;
      }
      await finished;
    });
  }

  async sizeBytes(): Promise<number> {
    this.#ensureOpen();
    // IndexedDB reports usage per origin, not per database: what this origin's storage occupies.
    return guarded('sizeBytes', async () => (await navigator.storage.estimate()).usage ?? 0);
  }

  /** The browser manages the space of deleted records (`full` or not). */
  async compact(): Promise<void> {
    this.#ensureOpen();
    if (this.readOnly) throw new StorageError('STORE_READ_ONLY', 'the backend was opened read-only');
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#db?.close();
    this.#db = null;
    this.#lock?.release();
  }

  #ensureOpen(): void {
    if (this.#closed) throw new StorageError('STORE_CLOSED', 'the backend is closed');
  }

  /** Lets go of `db` when another connection opens a newer version (a writer adding tables). */
  #watch(db: IDBDatabase): IDBDatabase {
    db.onversionchange = () => {
      db.close();
      if (this.#db === db) this.#db = null;
    };
    return db;
  }

  async #database(): Promise<IDBDatabase> {
    this.#ensureOpen();
    if (!this.#db) {
      const db = this.#watch(await openDatabase(this.#name, this.#tables, true));
      if (this.#closed) db.close();
      this.#ensureOpen();
      this.#db = db;
    }
    return this.#db;
  }

  /**
   * One read-only transaction on `table` running `requests`; every result,
   * or none (an empty table) when no writer has created the table yet.
   */
  async #read(table: string, requests: (store: IDBObjectStore) => IDBRequest[]): Promise<unknown[]> {
    return guarded('read', async () => {
      let db = await this.#database();
      if (!db.objectStoreNames.contains(table)) {
        // A writer may have added it since this connection opened.
        db.close();
        this.#db = null;
        db = await this.#database();
        if (!db.objectStoreNames.contains(table)) return [];
      }
      const tx = db.transaction(table, 'readonly');
      return Promise.all(requests(tx.objectStore(table)).map((r) => request<unknown>(r)));
    });
  }

  async #page(table: string, { from, after, end, count }: PageQuery): Promise<Array<readonly [Uint8Array, Uint8Array]>> {
    this.#ensureOpen();
    if (end && from && compareBytes(from, end) >= 0) return [];
    const range =
      from && end ? IDBKeyRange.bound(from, end, after, true)
      : from ? IDBKeyRange.lowerBound(from, after)
      : end ? IDBKeyRange.upperBound(end, true)
      : undefined;
    // Keys come back as ArrayBuffers, values as the Uint8Arrays that were put.
    const [keys = [], values = []] = (await this.#read(table, (store) => [store.getAllKeys(range, count), store.getAll(range, count)])) as [
      unknown[]?,
      unknown[]?,
    ];
    return keys.map((k, i) => {
      // A binary key reads back as an ArrayBuffer; a string, number or date key is no record of ours.
      if (!(k instanceof ArrayBuffer)) throw new StorageError('STORE_CORRUPT', `a stored ${typeof k} key where a record key was expected`);
      return [new Uint8Array(k), storedBytes(values[i] ?? null)!] as const;
    });
  }
}
