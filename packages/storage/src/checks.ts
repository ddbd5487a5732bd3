/**
 * Argument checks shared by every backend, so that each one accepts and
 * rejects exactly the same inputs: a wrong type throws `TypeError`, a wrong
 * value throws `RangeError`, before anything is read or written.
 * @module
 */
import { StorageError } from './errors.ts';
import type { BackendOptions, ScanRange, WriteBatch } from './port.ts';

/** Longest key, in bytes. The store's longest key (a 1,024-byte tree key with a prefix and a version) fits. */
export const MAX_KEY_BYTES = 1536;

/** Table names: an identifier, so that every engine can use it as a name of its own. */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** The checked table set of `options`, for `tableOf`. */
export function checkOptions(options: BackendOptions): ReadonlySet<string> {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  if (!Array.isArray(options.tables)) throw new TypeError('options.tables must be an array of table names');
  if (options.readOnly !== undefined && typeof options.readOnly !== 'boolean') throw new TypeError('options.readOnly must be a boolean');
  for (const t of options.tables) {
    if (typeof t !== 'string') throw new TypeError('a table name must be a string');
    if (!TABLE_NAME.test(t)) throw new RangeError(`table name ${JSON.stringify(t)} is not an identifier of at most 64 characters`);
  }
  const tables = new Set(options.tables);
  if (tables.size === 0) throw new RangeError('options.tables must name at least one table');
  if (tables.size !== options.tables.length) throw new RangeError('options.tables names a table twice');
  return tables;
}

export function checkTable(tables: ReadonlySet<string>, table: unknown): string {
  if (typeof table !== 'string') throw new TypeError('a table name must be a string');
  if (!tables.has(table)) throw new RangeError(`unknown table ${JSON.stringify(table)}: the backend was opened with ${[...tables].join(', ')}`);
  return table;
}

export function checkKey(key: unknown): Uint8Array {
  if (!(key instanceof Uint8Array)) throw new TypeError('a key must be a Uint8Array');
  if (key.length === 0 || key.length > MAX_KEY_BYTES) throw new RangeError(`a key must hold 1 to ${MAX_KEY_BYTES} bytes, not ${key.length}`);
  return key;
}

export function checkValue(value: unknown): Uint8Array {
  if (!(value instanceof Uint8Array)) throw new TypeError('a value must be a Uint8Array');
  return value;
}

/** A stored value as read back: bytes, or nothing; anything else is damage or another program's record (`STORE_CORRUPT`). */
export function storedBytes(v: unknown): Uint8Array | undefined {
  if (v === undefined || v instanceof Uint8Array) return v;
  throw new StorageError('STORE_CORRUPT', `a stored ${v === null ? 'null' : typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v} where a record was expected`);
}

export function checkKeys(keys: unknown): readonly Uint8Array[] {
  if (!Array.isArray(keys)) throw new TypeError('keys must be an array');
  for (const k of keys) checkKey(k);
  return keys;
}

/** A checked range; `limit` defaults to no limit. */
export function checkRange(range: ScanRange | undefined): { start?: Uint8Array; end?: Uint8Array; limit: number } {
  if (range === undefined) return { limit: Infinity };
  if (typeof range !== 'object' || range === null) throw new TypeError('a range must be an object');
  const { start, end, limit = Infinity } = range;
  if (start !== undefined && !(start instanceof Uint8Array)) throw new TypeError('range.start must be a Uint8Array');
  if (end !== undefined && !(end instanceof Uint8Array)) throw new TypeError('range.end must be a Uint8Array');
  if (typeof limit !== 'number') throw new TypeError('range.limit must be a number');
  if (limit !== Infinity && (!Number.isSafeInteger(limit) || limit < 0)) throw new RangeError('range.limit must be a non-negative integer');
  return { start, end, limit };
}

/** Checks every entry of `batch` before anything is written. */
export function checkBatch(tables: ReadonlySet<string>, batch: WriteBatch): void {
  if (typeof batch !== 'object' || batch === null) throw new TypeError('a batch must be an object');
  const { puts = [], deletes = [], deleteRanges = [] } = batch;
  if (!Array.isArray(puts)) throw new TypeError('batch.puts must be an array');
  if (!Array.isArray(deletes)) throw new TypeError('batch.deletes must be an array');
  if (!Array.isArray(deleteRanges)) throw new TypeError('batch.deleteRanges must be an array');
  for (const put of puts) {
    if (!Array.isArray(put) || put.length !== 3) throw new TypeError('a put must be [table, key, value]');
    checkTable(tables, put[0]);
    checkKey(put[1]);
    checkValue(put[2]);
  }
  for (const del of deletes) {
    if (!Array.isArray(del) || del.length !== 2) throw new TypeError('a delete must be [table, key]');
    checkTable(tables, del[0]);
    checkKey(del[1]);
  }
  for (const range of deleteRanges) {
    if (!Array.isArray(range) || range.length < 2 || range.length > 3) throw new TypeError('a range delete must be [table, start, end?]');
    checkTable(tables, range[0]);
    checkKey(range[1]);
    if (range[2] !== undefined) checkKey(range[2]);
  }
}

/** Unsigned byte order, the order of every scan. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return a.length - b.length;
}
