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

/**
 * Entries in strictly ascending key order: each item an entry `[key,
 * value]`, or a buffer of entries end to end, each `u16be(key length) ‖
 * u32be(value length) ‖ key ‖ value`, as `sortRecords` (`@bpavl/store/sort`)
 * hands them out, which the load takes without an object an entry.
 */
export type SortedEntries = AsyncIterable<SortedItem> | Iterable<SortedItem>;
type SortedItem = readonly [Uint8Array, Uint8Array] | Uint8Array;

/** What `State.bulkLoad` takes besides its entries. */
export interface BulkLoadOptions {
  /** Gets the entries loaded so far, after each write. */
  readonly onProgress?: (entries: number) => void;
}

/** Where a load writes: its capacity, version, and the bytes of records a write holds. */
export interface LoadTarget {
  readonly capacity: number;
  readonly version: number;
  readonly writeBytes: number;
}

/**
 * Writes the chunks of `entries` (full chunk records and their values records),
 * born at `version`, about `writeBytes` a write, and returns the rest of
 * the version (its last chunks, its inner nodes and its version record)
 * for the caller to write. `check` runs before each write (it throws to
 * stop the load).
 */
export async function writeBulkLoad(
  backend: StorageBackend,
  { capacity, version, writeBytes }: LoadTarget,
  entries: SortedEntries,
  { onProgress = () => {} }: BulkLoadOptions,
  check: () => void,
): Promise<WriteSet> {
  const load = new StoreBulkLoad(capacity, version);
  try {
    for await (const item of entries) {
      if (item instanceof Uint8Array) load.pushRecords(item);
      else load.push(item[0], item[1]);
      if (load.putsBytes < writeBytes) continue;
      check();
      await backend.write({ puts: load.takePuts() });
      onProgress(load.entries);
    }
    check();
    return load.finish();
  } finally {
    load.free();
  }
}
