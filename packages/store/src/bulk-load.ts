/**
 * A bulk load into a store that holds no version (`docs/store.md`, "A bulk
 * load"): entries in ascending key order go through the core's
 * `StoreBulkLoad`, which makes chunks of C − ⌊C/16⌋ of them as they come;
 * their records are written in batches born at the coming version, and the
 * inner nodes with the version record in one last write that makes it
 * visible. A load that stops or fails before it leaves records that no
 * version names: the caller removes them, or the next open does.
 * @module
 */

import { StoreBulkLoad, type WriteSet } from '@bpavl/wasm';
import type { StorageBackend } from '../../storage/src/port.ts';

/** Entries `[key, value]`, in strictly ascending key order. */
export type SortedEntries = AsyncIterable<readonly [Uint8Array, Uint8Array]> | Iterable<readonly [Uint8Array, Uint8Array]>;

type Pair = [Uint8Array, Uint8Array];

/** What `State.bulkLoad` takes besides its entries. */
export interface BulkLoadOptions {
  /** Gets the entry records written so far, after each write. */
  readonly onProgress?: (entries: number) => void;
  /**
   * Sorts `[key, value]` pairs by key: in Node, `(r) => sortEntries(r, {
   * dir })` of `@bpavl/store/sort`. Given one, the load sorts its entry
   * records by their record key and writes them after the chunks, in that
   * order: a database's index then grows at its end rather than at random
   * places, which at 10M entries is several times faster than writing them
   * as they come.
   */
  readonly sortRecords?: (records: AsyncIterable<Pair>) => AsyncIterable<Pair>;
}

/** Where a load writes: its capacity, version, and the bytes of records a write holds. */
export interface LoadTarget {
  readonly capacity: number;
  readonly version: number;
  readonly writeBytes: number;
}

/**
 * Writes the chunks of `entries` and their entry records, born at
 * `version`, about `writeBytes` a write, and returns the rest of the version
 * (its last chunks, its inner nodes and its version record) for the caller
 * to write. `check` runs before each write (it throws to stop the load).
 */
export async function writeBulkLoad(
  backend: StorageBackend,
  { capacity, version, writeBytes }: LoadTarget,
  entries: SortedEntries,
  { onProgress = () => {}, sortRecords }: BulkLoadOptions,
  check: () => void,
): Promise<WriteSet> {
  const load = new StoreBulkLoad(capacity, version);
  let written = 0;
  const write = async (puts: [string, Uint8Array, Uint8Array][], entryRecords: number) => {
    check();
    await backend.write({ puts });
    if (entryRecords > 0) onProgress((written += entryRecords));
  };
  // The chunks as the entries come; their entry records with them, or handed on to be sorted.
  async function* chunked(): AsyncGenerator<Pair> {
    for await (const [key, value] of entries) {
      load.push(key, value);
      if (load.putsBytes < writeBytes) continue;
      const puts = load.takePuts();
      const records = puts.filter(([table]) => table === 'entries');
      if (sortRecords === undefined) {
        await write(puts, records.length);
        continue;
      }
      await write(puts.filter(([table]) => table !== 'entries'), 0);
      for (const [, k, v] of records) yield [k, v];
    }
  }
  try {
    if (sortRecords === undefined) {
      for await (const _ of chunked());
    } else {
      // Each batch copied into a buffer of its own: a sort's entries are views of its buffers, and a backend may keep what it is given.
      let batch: [string, Uint8Array, Uint8Array][] = [];
      let buffer = new Uint8Array(writeBytes);
      let bytes = 0;
      for await (const [key, value] of sortRecords(chunked())) {
        const size = key.length + value.length;
        if (bytes + size > buffer.length) {
          if (batch.length > 0) await write(batch, batch.length);
          [batch, buffer, bytes] = [[], new Uint8Array(Math.max(writeBytes, size)), 0];
        }
        buffer.set(key, bytes);
        buffer.set(value, bytes + key.length);
        batch.push(['entries', buffer.subarray(bytes, bytes + key.length), buffer.subarray(bytes + key.length, bytes + size)]);
        bytes += size;
      }
      if (batch.length > 0) await write(batch, batch.length);
    }
    check();
    return load.finish();
  } finally {
    load.free();
  }
}
