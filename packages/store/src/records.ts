/**
 * Table names and keys of the store's records (`spec/store-format.md`).
 * The records themselves are encoded and checked by the core.
 * @module
 */

import type { RecordTable } from '@bpavl/wasm';
import type { StorageBackend } from '../../storage/src/port.ts';
import { StoreError } from './errors.ts';

export const TABLES = ['meta', 'versions', 'nodes', 'chunks', 'entries', 'values', 'stale'] as const;

/** The tables whose records carry their birth version in their key's first 8 bytes. */
export const BORN_TABLES = ['nodes', 'chunks', 'entries', 'values'] as const;

/** The tables whose records a `stale` key can name, by id (byte 8 of the key, from 1); a values record goes with its chunk record. */
const STALE_TABLES = ['nodes', 'chunks', 'entries'] as const;

/** The one key of the `meta` table. */
export const STORE_KEY = new TextEncoder().encode('store');

/** `u64be(v)`: version keys, and the first 8 bytes of record and stale keys. */
export function versionKey(version: number): Uint8Array {
  const key = new Uint8Array(8);
  new DataView(key.buffer).setBigUint64(0, BigInt(version));
  return key;
}

/** The version that a key beginning with `u64be(v)` names. */
export function versionOf(key: Uint8Array): number {
  if (key.length < 8) throw new StoreError('STORE_CORRUPT', 'a record key is shorter than its birth');
  return Number(new DataView(key.buffer, key.byteOffset, 8).getBigUint64(0));
}

/** The table that a `stale` key's record lives in (byte 8: 1 nodes, 2 chunks, 3 entries). */
export function staleTable(staleKey: Uint8Array): (typeof STALE_TABLES)[number] {
  const table = STALE_TABLES[staleKey[8]! - 1];
  if (table === undefined || staleKey.length !== 49) throw new StoreError('STORE_CORRUPT', 'a stale key names no record');
  return table;
}

/** The `stale` table's puts that mark `keys` (a mark holds no value). */
export function staleMarks(keys: readonly Uint8Array[]): ['stale', Uint8Array, Uint8Array][] {
  return keys.map((key) => ['stale', key, new Uint8Array()]);
}

/** The record key inside a `stale` key. */
export function staleRecord(staleKey: Uint8Array): Uint8Array {
  return staleKey.subarray(9);
}

/** Groups of slots a chunk of `capacity` has (16 slots a group): a full chunk record has a values record for each that holds a value. */
function groupCount(capacity: number): number {
  return Math.ceil(capacity / 16);
}

/**
 * The keys the values records of full chunk record `chunkKey` may have, one
 * a group: its first 39 bytes and the group's index (`spec/store-format.md`).
 */
export function valuesKeys(chunkKey: Uint8Array, capacity: number): Uint8Array[] {
  return Array.from({ length: groupCount(capacity) }, (_, g) => {
    const key = chunkKey.slice();
    key[39] = g;
    return key;
  });
}

/** The `meta` key of an unfinished sync; its value is the root being synced (32 bytes). */
export const SYNC_KEY = new TextEncoder().encode('sync');

/** The `meta` key of the progress record of chunk `index` of the unfinished sync: `sync ‖ u64be(index)`. */
export function progressKey(index: number): Uint8Array {
  const key = new Uint8Array(12);
  key.set(SYNC_KEY);
  key.set(versionKey(index), 4);
  return key;
}

/** The chunk index a progress key names. */
export function indexOfProgress(key: Uint8Array): number {
  if (key.length !== 12) throw new StoreError('STORE_CORRUPT', 'a sync progress key is not 12 bytes');
  return versionOf(key.subarray(4));
}

/** The range of every progress key: `[sync ‖ 0⁸, synd)`. */
export const PROGRESS_START = progressKey(0);
export const PROGRESS_END = new TextEncoder().encode('synd');

/** The `meta` key of an unfinished catch-up; its value is the root being caught up to (32 bytes). */
export const CATCHUP_KEY = new TextEncoder().encode('catchup');

/** The `meta` key of a subtree an unfinished catch-up took: `catchup ‖ path` (an encoded tree path). */
export function catchUpProgressKey(path: Uint8Array): Uint8Array {
  const key = new Uint8Array(CATCHUP_KEY.length + path.length);
  key.set(CATCHUP_KEY);
  key.set(path, CATCHUP_KEY.length);
  return key;
}

/** The tree path a catch-up progress key names. */
export function pathOfCatchUpProgress(key: Uint8Array): Uint8Array {
  return key.subarray(CATCHUP_KEY.length);
}

/** The range of every catch-up progress key: `[catchup ‖ 0, catchuq)`. */
export const CATCHUP_PROGRESS_START = catchUpProgressKey(Uint8Array.of(0));
export const CATCHUP_PROGRESS_END = new TextEncoder().encode('catchuq');

/** Records per `getMany`: a whole version's entries are not held twice while they are handed over. */
const FETCH_BATCH = 4096;

/** Fetches `wanted` records (a `getMany` per table and batch) and hands each to `supply`. */
export async function fetchRecords(
  backend: StorageBackend,
  wanted: readonly (readonly [RecordTable, Uint8Array])[],
  supply: (table: RecordTable, key: Uint8Array, value: Uint8Array | undefined) => void,
): Promise<void> {
  for (const table of BORN_TABLES) {
    const keys = wanted.filter(([t]) => t === table).map(([, k]) => k);
    for (let at = 0; at < keys.length; at += FETCH_BATCH) {
      const batch = keys.slice(at, at + FETCH_BATCH);
      const values = await backend.getMany(table, batch);
      batch.forEach((k, i) => supply(table, k, values[i]));
    }
  }
}
