/**
 * A minimal in-memory `StorageBackend` for the store's tests until
 * `@bpavl/storage` lands (its memory backend then replaces this one). The
 * records live in a `MemoryData` that outlives the backend, so a test can
 * close and reopen a store, or damage a record, as it would a file.
 */

import type { BackendOptions, ScanRange, StorageBackend, WriteBatch } from '../../../storage/src/port.ts';
import { StoreError } from '../../src/errors.ts';

/** Tables of records, each keyed by the hex of the record key (hex order is byte order). */
export type MemoryData = Map<string, Map<string, readonly [Uint8Array, Uint8Array]>>;

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

export class MemoryBackend implements StorageBackend {
  readonly kind = 'memory';
  readonly readOnly: boolean;
  readonly data: MemoryData;
  #closed = false;

  constructor(data: MemoryData, options: BackendOptions) {
    this.data = data;
    this.readOnly = options.readOnly ?? false;
    for (const t of options.tables) if (!data.has(t)) data.set(t, new Map());
  }

  #table(name: string) {
    if (this.#closed) throw Object.assign(new Error('closed'), { code: 'STORE_CLOSED' });
    const t = this.data.get(name);
    if (t === undefined) throw new RangeError(`unknown table ${name}`);
    return t;
  }

  async get(table: string, key: Uint8Array) {
    return this.#table(table).get(hex(key))?.[1].slice();
  }

  async getMany(table: string, keys: readonly Uint8Array[]) {
    const t = this.#table(table);
    return keys.map((k) => t.get(hex(k))?.[1].slice());
  }

  async *scan(table: string, range: ScanRange = {}) {
    const t = this.#table(table);
    const start = range.start && hex(range.start);
    const end = range.end && hex(range.end);
    const keys = [...t.keys()].filter((k) => (start === undefined || k >= start) && (end === undefined || k < end)).sort();
    for (const k of keys.slice(0, range.limit ?? keys.length)) {
      const [key, value] = t.get(k)!;
      yield [key.slice(), value.slice()] as const;
    }
  }

  async write(batch: WriteBatch) {
    if (this.readOnly) throw new StoreError('STORE_READ_ONLY', 'read-only backend');
    // Check every table first: a batch applies whole or not at all.
    for (const [t] of [...(batch.puts ?? []), ...(batch.deletes ?? [])]) this.#table(t);
    for (const [t, k, v] of batch.puts ?? []) this.#table(t).set(hex(k), [k.slice(), v.slice()]);
    for (const [t, k] of batch.deletes ?? []) this.#table(t).delete(hex(k));
  }

  async sizeBytes() {
    let n = 0;
    for (const t of this.data.values()) for (const [k, v] of t.values()) n += k.length + v.length;
    return n;
  }

  async close() {
    this.#closed = true;
  }
}
