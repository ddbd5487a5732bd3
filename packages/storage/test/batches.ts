// Numbered batches for the crash and cross-process tests: batch n puts eight
// records of assorted sizes under n, deletes one record of batch n − 1 (a
// delete of its key, or in even batches a range delete of it alone), and
// sets meta "last" to n, all in one write. `checkPrefix` reads a database
// and proves that it holds exactly batches 1 … last, each whole;
// `checkStablePrefix` does so while another process writes.
import type { StorageBackend, WriteBatch } from '../src/port.ts';
import { pattern } from './adapter-suite.ts';

export const TABLES = ['items', 'meta'];
const SIZES = [100, 600, 8192, 1, 3000, 500, 20_000, 40_000];
/** The record of each batch that the next batch deletes. */
const DELETED = SIZES.length - 1;
const LAST = new TextEncoder().encode('last');

const u32 = (n: number) => Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
const itemKey = (n: number, j: number) => Uint8Array.of(...u32(n), j);
const itemValue = (n: number, j: number) => pattern(SIZES[j], n * 16 + j + 1);

export function batch(n: number): WriteBatch {
  return {
    puts: [...SIZES.map((_, j) => ['items', itemKey(n, j), itemValue(n, j)] as const), ['meta', LAST, u32(n)]],
    ...(n > 1 && n % 2 === 1 && { deletes: [['items', itemKey(n - 1, DELETED)]] }),
    ...(n > 1 && n % 2 === 0 && { deleteRanges: [['items', itemKey(n - 1, DELETED), itemKey(n - 1, DELETED + 1)]] }),
  };
}

export async function lastBatch(backend: StorageBackend): Promise<number> {
  const v = await backend.get('meta', LAST);
  return v ? new DataView(v.buffer, v.byteOffset, 4).getUint32(0) : 0;
}

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The number of the last batch; throws unless the database holds exactly batches 1 … last, each whole. */
export async function checkPrefix(backend: StorageBackend, last?: number): Promise<number> {
  last ??= await lastBatch(backend);
  const expected: Array<[Uint8Array, Uint8Array]> = [];
  for (let n = 1; n <= last; n++) {
    for (let j = 0; j < SIZES.length; j++) if (j !== DELETED || n === last) expected.push([itemKey(n, j), itemValue(n, j)]);
  }
  let i = 0;
  for await (const [k, v] of backend.scan('items')) {
    const want = expected[i++];
    if (!want || !equal(k, want[0]) || !equal(v, want[1])) {
      throw new Error(`last batch ${last}: record ${i - 1} is ${Array.from(k).join('.')} (${v.length} bytes), not the expected one`);
    }
  }
  if (i !== expected.length) throw new Error(`last batch ${last}: ${i} records, want ${expected.length}`);
  return last;
}

/**
 * `checkPrefix` on a database that another process is writing. Each read of
 * the port sees one committed state, but a scan spans several reads: the
 * check counts only when "last" is the same before and after it (every batch
 * raises it, so no batch committed in between), and is tried again otherwise.
 */
export async function checkStablePrefix(backend: StorageBackend, attempts = 100): Promise<number> {
  for (let i = 0; i < attempts; i++) {
    const before = await lastBatch(backend);
    const outcome = await checkPrefix(backend, before).catch((e: unknown) => e);
    if ((await lastBatch(backend)) !== before) continue;
    if (outcome instanceof Error) throw outcome;
    return before;
  }
  throw new Error(`no stable state in ${attempts} attempts`);
}
