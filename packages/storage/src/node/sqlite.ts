/**
 * The Node backend: one SQLite database per directory through the built-in
 * `node:sqlite`, chosen by measurement (docs/storage.md). One table per
 * port table, `(k BLOB PRIMARY KEY, v BLOB)`; WAL, so that readers in other
 * processes read while the one writer writes; `synchronous = FULL`, so that
 * a batch whose `write` resolved is on the device (it survives a SIGKILL and
 * a power loss). The COMMIT of a batch is the one write that makes it
 * visible.
 * @module
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { checkBatch, checkKey, checkKeys, checkOptions, checkRange, checkTable, storedBytes } from '../checks.ts';
import { asStorageError, StorageError, type StorageErrorCode } from '../errors.ts';
import type { BackendOptions, CompactOptions, ScanRange, StorageBackend, WriteBatch } from '../port.ts';
import { pagedScan, type PageQuery } from '../scan.ts';
import { takeWriterLock, type WriterLock } from './lock.ts';

export const DATA_FILE = 'data.sqlite';

/**
 * Written beside the data once a writer has made the database: a data file
 * that is then missing, empty or without our tables was truncated or
 * replaced (`STORE_CORRUPT`), not a new store. SQLite cannot tell a
 * zero-length file from a new database by itself.
 */
export const MADE_FILE = 'store.made';

/** Marks a database as ours (`PRAGMA application_id`, "bpav"): any other SQLite file is `STORE_NOT_A_DATABASE`. */
const APPLICATION_ID = 0x62706176;

/**
 * Settings, each measured by `npm run bench:storage` (docs/storage.md): 64 KiB
 * pages keep a 140 KB chunk in three pages; 64 MiB of page cache per
 * connection keeps a 10,000-update commit from spilling pages twice; a busy
 * database is waited for 5 s (a checkpoint or a WAL recovery in another
 * process), then `STORE_LOCKED`. After a large batch the WAL is cut back to
 * 64 MiB once checkpointed, instead of keeping its largest size on disk.
 * Reads copy pages (`pread`) unless {@link NodeBackendOptions.mmapBytes}
 * says otherwise.
 */
const PAGE_SIZE = 65_536;
const CACHE_KIB = 65_536;
const BUSY_TIMEOUT_MS = 5_000;
const WAL_KEEP_BYTES = 64 << 20;

/** {@link openNodeBackend}'s options: the directory and the port's. */
export interface NodeBackendOptions extends BackendOptions {
  /** The database directory (created by a writer when missing). */
  readonly path: string;
  /**
   * Bytes of the data file that SQLite reads through a memory map
   * (`mmap_size`; default 0: none). A map saves a copy per page read, but a
   * cold page read through it takes the kernel's whole readahead window
   * (8 MB on the machine of docs/storage.md, 5–20 ms, against 0.3–0.5 ms
   * copied), and every page it touched counts in the process's RSS.
   */
  readonly mmapBytes?: number;
}

/** SQLite's primary result codes (https://sqlite.org/rescode.html) mapped to ours; anything else is `STORE_IO`. */
const SQLITE_CODES: Record<number, StorageErrorCode> = {
  5: 'STORE_LOCKED', // SQLITE_BUSY
  6: 'STORE_LOCKED', // SQLITE_LOCKED
  11: 'STORE_CORRUPT', // SQLITE_CORRUPT
  26: 'STORE_NOT_A_DATABASE', // SQLITE_NOTADB
};

/** Runs `body`, turning an engine or file-system failure into a StorageError (see {@link asStorageError}). */
function guarded<T>(what: string, body: () => T): T {
  try {
    return body();
  } catch (e) {
    const errcode = (e as { errcode?: unknown } | undefined)?.errcode;
    throw asStorageError(e, (typeof errcode === 'number' && SQLITE_CODES[errcode & 0xff]) || 'STORE_IO', what);
  }
}


/** Writes {@link MADE_FILE} durably. */
function markMade(path: string): void {
  const fd = openSync(join(path, MADE_FILE), 'w');
  try {
    writeSync(fd, 'a bpavl store: data.sqlite holds its records\n');
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The database's `application_id`, and whether it is new: no id set and no table (SQLite reads a zero-length file so). */
function header(db: DatabaseSync): { id: number; fresh: boolean } {
  const { application_id: id } = db.prepare('PRAGMA application_id').get() as { application_id: number };
  return { id, fresh: id === 0 && (db.prepare('SELECT count(*) AS n FROM sqlite_schema').get() as { n: number }).n === 0 };
}

/**
 * Whether directory `path` holds no store yet, and nothing that a writer
 * would refuse to make one in: it does not exist, or holds neither the
 * made marker nor a data file, or its data file is a new database that no
 * writer has set up yet (empty, unmarked). A writer opening it makes the
 * store there; until one has, a read-only open is `STORE_NOT_A_DATABASE`.
 * `false` for anything else, a store or not (open it to learn which): a
 * data file that is not SQLite or is another application's, a truncated
 * or removed store (the marker says one was made), a path that is not a
 * directory or cannot be read. Reads only; creates nothing.
 *
 * @example
 * ```ts
 * if (holdsNoStore(path)) console.log('no store yet: waiting for a writer');
 * else backend = await openNodeBackend({ path, tables, readOnly: true });
 * ```
 */
export function holdsNoStore(path: string): boolean {
  if (typeof path !== 'string') throw new TypeError('path must be a string');
  let file: string;
  try {
    const dir = statSync(path, { throwIfNoEntry: false });
    if (dir === undefined) return true;
    if (!dir.isDirectory() || existsSync(join(path, MADE_FILE))) return false;
    file = join(path, DATA_FILE);
    const data = statSync(file, { throwIfNoEntry: false });
    if (data === undefined) return true;
    if (!data.isFile()) return false;
    if (data.size === 0) return true;
  } catch {
    return false; // unreadable (EACCES, ENOTDIR, …): the open says why
  }
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(file, { readOnly: true, timeout: BUSY_TIMEOUT_MS });
    return header(db).fresh;
  } catch {
    return false; // not SQLite, or busy: the open says which
  } finally {
    db?.close();
  }
}

function openDatabase(path: string, readOnly: boolean, tables: ReadonlySet<string>, mmapBytes: number): DatabaseSync {
  const file = join(path, DATA_FILE);
  const made = existsSync(join(path, MADE_FILE));
  if (made && !existsSync(file)) throw new StorageError('STORE_CORRUPT', `${file} was removed`);
  if (readOnly && !existsSync(file)) throw new StorageError('STORE_NOT_A_DATABASE', `no database in ${path}`);
  const db = guarded(`opening ${file}`, () => new DatabaseSync(file, { readOnly, timeout: BUSY_TIMEOUT_MS }));
  try {
    guarded(`opening ${file}`, () => {
      // The first read of the header: a file that is not SQLite fails here (SQLITE_NOTADB).
      const { id, fresh } = header(db);
      if (fresh && made) throw new StorageError('STORE_CORRUPT', `${file} was truncated or replaced by an empty database`);
      // Empty and unmarked: a writer is making the store (or was killed doing so), which a reader cannot read yet.
      if (fresh && readOnly) throw new StorageError('STORE_NOT_A_DATABASE', `no store was made in ${path} yet`);
      if (id !== APPLICATION_ID && !fresh) {
        throw new StorageError('STORE_NOT_A_DATABASE', `${file} is a SQLite database of another application`);
      }
      // auto_vacuum takes effect only before the first table: `compact` can then shrink the file.
      if (fresh && !readOnly) db.exec(`PRAGMA page_size = ${PAGE_SIZE}; PRAGMA auto_vacuum = INCREMENTAL; PRAGMA application_id = ${APPLICATION_ID}`);
      // After the page size: a cache set in KiB before it keeps its page count, so a new
      // database's cache would hold 16 times its budget of 64 KiB pages (1 GiB, not 64 MiB).
      db.exec(`PRAGMA cache_size = -${CACHE_KIB}; PRAGMA mmap_size = ${mmapBytes}`);
      if (readOnly) return;
      db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA journal_size_limit = ${WAL_KEEP_BYTES}`);
      for (const t of tables) db.exec(`CREATE TABLE IF NOT EXISTS "${t}" (k BLOB PRIMARY KEY, v BLOB NOT NULL)`);
      if (!made) markMade(path);
    });
    return db;
  } catch (e) {
    db.close();
    throw e;
  }
}

/**
 * Opens the database in directory `path` (`kind: 'sqlite'`). A writer takes
 * the directory's writer lock and creates the directory, the database and
 * the tables as needed; any number of read-only backends, in this process
 * or others, open beside it. A table that no writer has created yet reads
 * as empty.
 *
 * @throws `TypeError` / `RangeError` for bad options; `StorageError`
 *   `STORE_LOCKED` when another writer has the directory open,
 *   `STORE_NOT_A_DATABASE` when the directory holds something else (or,
 *   read-only, nothing), `STORE_IO` when the files cannot be used.
 * @example
 * ```ts
 * const backend = await openNodeBackend({ path: '/var/lib/bpavl', tables: ['nodes', 'meta'] });
 * await backend.write({ puts: [['meta', key, value]] });
 * await backend.close();
 * ```
 */
export async function openNodeBackend(options: NodeBackendOptions): Promise<StorageBackend> {
  const tables = checkOptions(options);
  const { path } = options;
  if (typeof path !== 'string') throw new TypeError('options.path must be a string');
  if (path === '') throw new RangeError('options.path must not be empty');
  const readOnly = options.readOnly ?? false;
  const mmapBytes = options.mmapBytes ?? 0;
  if (typeof mmapBytes !== 'number') throw new TypeError('options.mmapBytes must be a number');
  if (!(Number.isSafeInteger(mmapBytes) && mmapBytes >= 0)) throw new RangeError('options.mmapBytes must be a non-negative integer');
  let lock: WriterLock | undefined;
  if (!readOnly) {
    guarded(`creating ${path}`, () => mkdirSync(path, { recursive: true }));
    lock = takeWriterLock(path);
  }
  try {
    return new SqliteBackend(openDatabase(path, readOnly, tables, mmapBytes), path, tables, readOnly, lock, mmapBytes);
  } catch (e) {
    lock?.release();
    throw e;
  }
}

class SqliteBackend implements StorageBackend {
  readonly kind = 'sqlite';
  readonly readOnly: boolean;
  readonly #path: string;
  readonly #tables: ReadonlySet<string>;
  readonly #lock: WriterLock | undefined;
  readonly #mmapBytes: number;
  readonly #statements = new Map<string, StatementSync>();
  #db: DatabaseSync | undefined;

  constructor(db: DatabaseSync, path: string, tables: ReadonlySet<string>, readOnly: boolean, lock: WriterLock | undefined, mmapBytes: number) {
    this.#db = db;
    this.#mmapBytes = mmapBytes;
    this.#path = path;
    this.#tables = tables;
    this.readOnly = readOnly;
    this.#lock = lock;
  }

  async get(table: string, key: Uint8Array): Promise<Uint8Array | undefined> {
    const select = this.#select(table);
    checkKey(key);
    return guarded('get', () => storedBytes((select?.get(key) as { v: unknown } | undefined)?.v));
  }

  async getMany(table: string, keys: readonly Uint8Array[]): Promise<Array<Uint8Array | undefined>> {
    const select = this.#select(table);
    checkKeys(keys);
    if (select === undefined) return keys.map(() => undefined);
    const db = this.#open();
    return guarded('getMany', () => {
      // One read transaction: one snapshot for every key, and no lock taken per key (about 30 % faster).
      db.exec('BEGIN');
      try {
        return keys.map((k) => storedBytes((select.get(k) as { v: unknown } | undefined)?.v));
      } finally {
        db.exec('COMMIT');
      }
    });
  }

  scan(table: string, range?: ScanRange): AsyncIterable<readonly [Uint8Array, Uint8Array]> {
    this.#open();
    checkTable(this.#tables, table);
    return pagedScan(async (query) => this.#page(table, query), checkRange(range));
  }

  async write(batch: WriteBatch): Promise<void> {
    const db = this.#open();
    if (this.readOnly) throw new StorageError('STORE_READ_ONLY', 'the backend was opened read-only');
    checkBatch(this.#tables, batch);
    guarded('write', () => {
      db.exec('BEGIN IMMEDIATE');
      try {
        // Range deletes, then deletes, then puts: a key both deleted and put ends with the put.
        for (const [table, start, end] of batch.deleteRanges ?? []) {
          if (end === undefined) this.#statement(`DELETE FROM "${table}" WHERE k >= ?`).run(start);
          else this.#statement(`DELETE FROM "${table}" WHERE k >= ? AND k < ?`).run(start, end);
        }
        for (const [table, key] of batch.deletes ?? []) this.#statement(`DELETE FROM "${table}" WHERE k = ?`).run(key);
        for (const [table, key, value] of batch.puts ?? []) this.#statement(`INSERT OR REPLACE INTO "${table}" (k, v) VALUES (?, ?)`).run(key, value);
        db.exec('COMMIT');
      } catch (e) {
        if (db.isTransaction) db.exec('ROLLBACK');
        throw e;
      }
    });
  }

  async sizeBytes(): Promise<number> {
    this.#open();
    return guarded('sizeBytes', () =>
      ['', '-wal', '-shm'].reduce((sum, suffix) => sum + (statSync(join(this.#path, DATA_FILE + suffix), { throwIfNoEntry: false })?.size ?? 0), 0),
    );
  }

  /**
   * Returns the free pages to the file system (`incremental_vacuum`; a
   * database made before `auto_vacuum` was set keeps them for reuse
   * instead), or with `full` rewrites the database packed (`VACUUM`), then
   * truncates the WAL once no reader needs it. `VACUUM` runs without the
   * memory map (it reads the whole file, and mapped it peaked at 2.0 GB of
   * RSS instead of 1.0 GB, in the same time: a 1.5 GB database packed to
   * 0.95 GB, docs/store.md) and with a sixteenth of the page cache.
   */
  async compact(options: CompactOptions = {}): Promise<void> {
    const db = this.#open();
    if (this.readOnly) throw new StorageError('STORE_READ_ONLY', 'the backend was opened read-only');
    guarded('compact', () => {
      if (options.full) {
        // VACUUM's temporary database held about 16 times this cache's budget (as if its size
        // were counted in 4 KiB pages and filled with 64 KiB ones). A sixteenth meanwhile keeps it
        // near the budget: packing 1.1 GB took 980 MiB of RSS and 9.5 s, now 113 MiB and 5.7 s.
        db.exec(`PRAGMA mmap_size = 0; PRAGMA cache_size = -${CACHE_KIB / 16}`);
        try {
          db.exec('VACUUM');
        } finally {
          db.exec(`PRAGMA mmap_size = ${this.#mmapBytes}; PRAGMA cache_size = -${CACHE_KIB}`);
        }
      } else db.exec('PRAGMA incremental_vacuum');
      db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    });
  }

  async close(): Promise<void> {
    const db = this.#db;
    if (!db) return;
    this.#db = undefined;
    this.#statements.clear();
    try {
      guarded('close', () => db.close());
    } finally {
      this.#lock?.release();
    }
  }

  #open(): DatabaseSync {
    if (!this.#db) throw new StorageError('STORE_CLOSED', 'the backend is closed');
    return this.#db;
  }

  /** A prepared statement, kept for the life of the connection. */
  #statement(sql: string): StatementSync {
    let s = this.#statements.get(sql);
    if (!s) {
      s = this.#open().prepare(sql);
      this.#statements.set(sql, s);
    }
    return s;
  }

  /** The point read of `table`, or `undefined` while the table does not exist (a reader before any writer). */
  #select(table: string): StatementSync | undefined {
    this.#open();
    checkTable(this.#tables, table);
    return this.#prepareIfTable(table, `SELECT v FROM "${table}" WHERE k = ?`);
  }

  #prepareIfTable(table: string, sql: string): StatementSync | undefined {
    const cached = this.#statements.get(sql);
    if (cached) return cached;
    const exists = guarded('schema', () => this.#statement('SELECT 1 AS x FROM sqlite_schema WHERE type = ? AND name = ?').get('table', table));
    return exists ? guarded('prepare', () => this.#statement(sql)) : undefined;
  }

  #page(table: string, { from, after, end, count }: PageQuery): Array<readonly [Uint8Array, Uint8Array]> {
    this.#open();
    const where = [from && (after ? 'k > ?' : 'k >= ?'), end && 'k < ?'].filter(Boolean);
    const sql = `SELECT k, v FROM "${table}"${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY k LIMIT ?`;
    const select = this.#prepareIfTable(table, sql);
    if (!select) return [];
    const params = [from, end].filter((b): b is Uint8Array => b !== undefined);
    return guarded('scan', () => (select.all(...params, count) as Array<{ k: unknown; v: unknown }>).map((r) => [storedBytes(r.k)!, storedBytes(r.v)!] as const));
  }
}
