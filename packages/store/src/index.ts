/**
 * `@bpavl/store`: durable, versioned bpavl state (`docs/store.md`).
 *
 * ```ts
 * const state = await openState({ backend });
 * state.put(key, value);
 * const { version, root } = await state.commit();
 * const proof = (await state.snapshot({ version })).proveExistence(key);
 * ```
 * @module
 */

import { init } from '@bpavl/wasm';
import type { StorageBackend } from '../../storage/src/port.ts';
import { State } from './state.ts';

export { StoreError, type StoreErrorCode } from './errors.ts';
export { TABLES } from './records.ts';
export { DEFAULT_CACHE_BYTES, type AtVersion, type PruneOptions, type State, type StoreStats, type VersionInfo } from './state.ts';

/** What `openState` is given. */
export interface OpenStateOptions {
  /** The backend that holds the state, opened with the tables of `TABLES`. */
  readonly backend: StorageBackend;
  /** Chunk capacity of a new state (2 … 4096, default 256); an existing state keeps its own. */
  readonly capacity?: number;
  /** Bytes of chunks that paged reads may cache (default 64 MiB). */
  readonly cacheBytes?: number;
}

/** Opens the state that `backend` holds, or starts an empty one. */
export async function openState(options: OpenStateOptions): Promise<State> {
  await init();
  return State.open(options.backend, options.capacity, options.cacheBytes);
}
