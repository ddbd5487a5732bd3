/**
 * The in-memory backend: the default for tests and for callers who want no
 * persistence. It behaves as the durable backends do: a database outlives
 * its backends (reopen it to see what was written), a second writer is
 * refused with `STORE_LOCKED`, and records are copied in and out, so a
 * caller that reuses its buffers changes nothing stored.
 * @module
 */
import { OrderedMap } from '@js-sdsl/ordered-map';
import { checkBatch, checkKey, checkKeys, checkOptions, checkRange, checkTable, compareBytes } from './checks.ts';
import { StorageError } from './errors.ts';
import type { BackendOptions, ScanRange, StorageBackend, WriteBatch } from './port.ts';
import { pagedScan, type PageQuery } from './scan.ts';

type Table = OrderedMap<Uint8Array, Uint8Array>;

/**
 * Where in-memory backends keep their records: open several backends on one
 * database, one after another or side by side, as on one directory on disk.
 *
 * @example
 * ```ts
 * const database = new MemoryDatabase();
 * const writer = openMemoryBackend({ database, tables: ['nodes'] });
 * const reader = openMemoryBackend({ database, tables: ['nodes'], readOnly: true });
 * ```
 */
export class MemoryDatabase {
  /** @internal */ readonly tables = new Map<string, Table>();
  /** @internal */ writerOpen = false;
  /** @internal */ bytes = 0;

  /** @internal */ table(name: string): Table {
    let t = this.tables.get(name);
    if (!t) this.tables.set(name, (t = new OrderedMap<Uint8Array, Uint8Array>([], compareBytes)));
    return t;
  }
}

/** {@link openMemoryBackend}'s options: a {@link MemoryDatabase} (a new one when absent) and the port's. */
export interface MemoryBackendOptions extends BackendOptions {
  readonly database?: MemoryDatabase;
}

/**
 * An in-memory {@link StorageBackend} (`kind: 'memory'`).
 *
 * @throws `TypeError` / `RangeError` for bad options; `StorageError` `STORE_LOCKED`
 *   when a writer is already open on `database`.
 * @example
 * ```ts
 * const backend = openMemoryBackend({ tables: ['nodes'] });
 * await backend.write({ puts: [['nodes', key, value]] });
 * ```
 */
export function openMemoryBackend(options: MemoryBackendOptions): StorageBackend {
  const tables = checkOptions(options);
  const database = options.database ?? new MemoryDatabase();
  if (!(database instanceof MemoryDatabase)) throw new TypeError('options.database must be a MemoryDatabase');
  const readOnly = options.readOnly ?? false;
  if (!readOnly) {
    if (database.writerOpen) throw new StorageError('STORE_LOCKED', 'another writer has this memory database open');
    database.writerOpen = true;
  }
  let open = true;
  const ensureOpen = () => {
    if (!open) throw new StorageError('STORE_CLOSED', 'the backend is closed');
  };
  const readTable = (table: string) => {
    ensureOpen();
    return database.table(checkTable(tables, table));
  };
  const readPage = (table: Table) => async ({ from, after, end, count }: PageQuery) => {
    ensureOpen();
    const page: Array<readonly [Uint8Array, Uint8Array]> = [];
    const stop = table.end();
    let it = from === undefined ? table.begin() : after ? table.upperBound(from) : table.lowerBound(from);
    for (; page.length < count && !it.equals(stop); it = it.next()) {
      const [k, v] = it.pointer;
      if (end && compareBytes(k, end) >= 0) break;
      page.push([k.slice(), v.slice()]);
    }
    return page;
  };

  return {
    kind: 'memory',
    readOnly,
    async get(table: string, key: Uint8Array) {
      const t = readTable(table);
      return t.getElementByKey(checkKey(key))?.slice();
    },
    async getMany(table: string, keys: readonly Uint8Array[]) {
      const t = readTable(table);
      return checkKeys(keys).map((k) => t.getElementByKey(k)?.slice());
    },
    scan(table: string, range?: ScanRange) {
      const t = readTable(table);
      return pagedScan(readPage(t), checkRange(range));
    },
    async write(batch: WriteBatch) {
      ensureOpen();
      if (readOnly) throw new StorageError('STORE_READ_ONLY', 'the backend was opened read-only');
      checkBatch(tables, batch);
      // Range deletes, then deletes, then puts: a key both deleted and put ends with the put.
      for (const [table, start, end] of batch.deleteRanges ?? []) {
        const t = database.table(table);
        const doomed: Uint8Array[] = [];
        for (let it = t.lowerBound(start), stop = t.end(); !it.equals(stop); it = it.next()) {
          const [k, v] = it.pointer;
          if (end && compareBytes(k, end) >= 0) break;
          doomed.push(k);
          database.bytes -= k.length + v.length;
        }
        for (const k of doomed) t.eraseElementByKey(k);
      }
      for (const [table, key] of batch.deletes ?? []) {
        const t = database.table(table);
        const old = t.getElementByKey(key);
        if (old) database.bytes -= key.length + old.length;
        t.eraseElementByKey(key);
      }
      for (const [table, key, value] of batch.puts ?? []) {
        const t = database.table(table);
        const old = t.getElementByKey(key);
        if (old) database.bytes -= key.length + old.length;
        t.setElement(key.slice(), value.slice());
        database.bytes += key.length + value.length;
      }
    },
    async sizeBytes() {
      ensureOpen();
      return database.bytes;
    },
    async compact() {
      ensureOpen();
      if (readOnly) throw new StorageError('STORE_READ_ONLY', 'the backend was opened read-only');
    },
    async close() {
      if (!open) return;
      open = false;
      if (!readOnly) database.writerOpen = false;
    },
  };
}
