/**
 * `@bpavl/store`: durable, versioned bpavl state (`docs/store.md`).
 *
 * ```ts
 * const state = await openState({ path: '/var/lib/bpavl' });
 * await state.put(key, value);
 * const { version, root } = await state.commit();
 * const { proof } = await state.proveExistence(key, { version });
 * await state.close();
 * ```
 * @module
 */

import { encodeStoreRecord, init } from '@bpavl/wasm';
import type { StorageBackend } from '../../storage/src/port.ts';
import { TABLES } from './records.ts';
import { State, type StateSizes } from './state.ts';

export { StoreError, type StoreErrorCode } from './errors.ts';
export { NODES_LEVELS, type CatchUpPiece, type StoreCatchUp } from './catchup.ts';
export { TABLES } from './records.ts';
export type { BulkLoadOptions, SortedEntries } from './bulk-load.ts';
export { DEFAULT_VALUE_CACHE_BYTES } from './value-cache.ts';
export { DEFAULT_BATCH_BYTES, DEFAULT_CACHE_BYTES, type AtVersion, type DamagedVersion, type PendingSync, type PruneOptions, type RangeOptions, type State, type StateSizes, type StoreStats, type VersionInfo } from './state.ts';

/** Where the state lives: a directory (the Node backend) or any backend. */
export type StateLocation =
  | {
      /** A database directory, opened with `@bpavl/storage/node` (SQLite, one writer across processes). */
      readonly path: string;
      /** Open for reading only, beside a writer. */
      readonly readOnly?: boolean;
      /** Bytes of the data file read through a memory map (default 0; `NodeBackendOptions.mmapBytes`). */
      readonly mmapBytes?: number;
    }
  | {
      /** A backend opened with the tables of `TABLES`; the state owns it (`close()`, or a failed open, closes it). */
      readonly backend: StorageBackend;
    };

/** What `openState` is given. */
export type OpenStateOptions = StateLocation &
  StateSizes & {
    /**
     * Chunk capacity of a new state (2 … 4096, default 256); an existing
     * state keeps its own. Checked before anything is opened or written,
     * whether or not the state exists: an integer outside 2 … 4096 is
     * TreeError `CAPACITY_INVALID`; a number that is not a non-negative
     * safe integer (`2.5`, `-1`, `NaN`) is a `RangeError`, and a value that
     * is no number a `TypeError`, as `@bpavl/wasm` checks its arguments.
     */
    readonly capacity?: number;
  };

/**
 * Opens the state at `path` or in `backend`, or starts an empty one.
 * Backend failures keep their codes: a second writer is `STORE_LOCKED`, a
 * file that is not a store is `STORE_NOT_A_DATABASE` (`spec/errors.md`).
 * Options are checked first: a refused open (a bad capacity, size or
 * flag) opens and writes nothing at `path` (a `backend` given is closed,
 * as by any failed open).
 */
export async function openState(options: OpenStateOptions): Promise<State> {
  if (typeof options !== 'object' || options === null) throw new TypeError('openState takes an options object: { path } or { backend }');
  // The module compiles off the main thread while the backend opens (about 15 ms of an open here).
  const ready = init();
  ready.catch(() => {});
  try {
    await checkOptions(options, ready);
  } catch (e) {
    if ('backend' in options && !('path' in options)) {
      try {
        await options.backend.close();
      } catch {
        // The refusal is the error to report.
      }
    }
    throw e;
  }
  let backend: StorageBackend;
  if ('backend' in options) backend = options.backend;
  else {
    // Node's backend under the `node` condition; elsewhere a TypeError (src/path-backend.ts).
    const { openPathBackend } = await import('#path-backend');
    backend = await openPathBackend({ path: options.path, tables: TABLES, readOnly: options.readOnly ?? false, mmapBytes: options.mmapBytes });
  }
  try {
    await ready;
    return await State.open(backend, options.capacity, options);
  } catch (e) {
    await backend.close();
    throw e;
  }
}

/**
 * Whether the state directory `path` holds no state yet, and nothing that
 * is not one: it does not exist, is empty, or holds a database that its
 * first writer has not set up yet. A writer (`openState({ path })`) makes
 * the state there; until one has, a read-only open is
 * `STORE_NOT_A_DATABASE`. `false` for a state, and for what a read-only
 * open refuses for another reason (another file, a truncated store: open
 * it to learn which). Node only (`@bpavl/storage/node`, `holdsNoStore`).
 */
export async function holdsNoState(path: string): Promise<boolean> {
  if (typeof path !== 'string') throw new TypeError('path must be a string');
  const { holdsNoStore } = await import('#path-backend');
  return holdsNoStore(path);
}

/** Refuses bad options before any backend is opened (so a refused open leaves no file behind). */
async function checkOptions(options: OpenStateOptions, ready: Promise<unknown>): Promise<void> {
  if ('backend' in options && 'path' in options) throw new TypeError('give path or backend, not both');
  if ('readOnly' in options && options.readOnly !== undefined && typeof options.readOnly !== 'boolean') throw new TypeError('readOnly must be a boolean');
  for (const name of ['cacheBytes', 'valueCacheBytes', 'batchBytes'] as const) {
    const bytes = options[name];
    if (bytes !== undefined && !(Number.isSafeInteger(bytes) && bytes >= 0)) throw new RangeError(`${name} must be a non-negative integer`);
  }
  const { capacity } = options;
  if (capacity !== undefined && !(Number.isSafeInteger(capacity) && capacity >= 2 && capacity <= 4096)) {
    // The core's own refusal (TypeError, RangeError or TreeError CAPACITY_INVALID): the happy path keeps the compile beside the open.
    await ready;
    encodeStoreRecord(capacity);
  }
}
