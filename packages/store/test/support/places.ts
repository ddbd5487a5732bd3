/**
 * Where the store's tests keep a state: a `MemoryDatabase` of
 * `@bpavl/storage` (which outlives its backends, so a test can close and
 * reopen a store, or damage a record, as it would a file) or a directory of
 * the Node backend. Each `open` is a new backend on the same records.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryDatabase, openMemoryBackend } from '../../../storage/src/memory.ts';
import type { StorageBackend } from '../../../storage/src/port.ts';
import { openState, TABLES, type State } from '../../src/index.ts';

export interface OpenOptions {
  readonly capacity?: number;
  readonly cacheBytes?: number;
  readonly valueCacheBytes?: number;
  readonly readOnly?: boolean;
}

export interface Place {
  readonly name: string;
  open(options?: OpenOptions): Promise<State>;
  /** Removes what the place left on disk. */
  remove(): void;
}

/** A memory backend on `database`. */
export function memoryBackend(database: MemoryDatabase, readOnly = false): StorageBackend {
  return openMemoryBackend({ database, tables: TABLES, readOnly });
}

export function inMemory(database = new MemoryDatabase()): Place & { readonly database: MemoryDatabase } {
  return {
    name: 'memory',
    database,
    open: ({ readOnly, ...rest } = {}) => openState({ backend: memoryBackend(database, readOnly), ...rest }),
    remove: () => undefined,
  };
}

/** A new temporary directory for the Node backend. */
export function onDisk(): Place & { readonly path: string } {
  const path = mkdtempSync(join(tmpdir(), 'bpavl-store-'));
  return {
    name: 'node',
    path,
    open: (options = {}) => openState({ path, ...options }),
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}

/** A copy of every record of `database`. */
export function copyDatabase(database: MemoryDatabase): MemoryDatabase {
  const copy = new MemoryDatabase();
  for (const [name, table] of database.tables) {
    const into = copy.table(name);
    for (const [k, v] of table) into.setElement(k.slice(), v.slice());
  }
  copy.bytes = database.bytes;
  return copy;
}

/** The stored records of `table` (the arrays themselves: changing one damages the record). */
export function records(database: MemoryDatabase, table: string): Array<[Uint8Array, Uint8Array]> {
  return [...database.table(table)];
}
