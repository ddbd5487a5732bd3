// The one adapter suite that every backend runs (automerge-repo's idea): the
// memory and Node backends in vitest (adapters.test.ts), IndexedDB in
// Chromium (tests/browser/storage.spec.ts). Browser-safe: no node: modules,
// no test framework; each case throws on failure.
import { MAX_KEY_BYTES } from '../src/checks.ts';
import { isStorageError, type StorageErrorCode } from '../src/errors.ts';
import type { BackendOptions, ScanRange, StorageBackend } from '../src/port.ts';
import { SCAN_PAGE } from '../src/scan.ts';

/** One place to store (a directory, a database name, a MemoryDatabase), opened as often as a case asks. */
export interface Place {
  open(options: BackendOptions): Promise<StorageBackend>;
}

export interface AdapterCase {
  readonly name: string;
  run(place: Place): Promise<void>;
}

const TABLES = ['nodes', 'meta'];
const bytes = (...b: number[]) => Uint8Array.from(b);
const text = (s: string) => new TextEncoder().encode(s);

/** Deterministic bytes (xorshift), so that every backend stores the same records. */
export function pattern(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x;
  }
  return out;
}

function fail(message: string): never {
  throw new Error(message);
}

const hex = (b: Uint8Array | undefined) => (b === undefined ? 'undefined' : Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(''));

function sameBytes(got: Uint8Array | undefined, want: Uint8Array | undefined, what: string): void {
  if (got !== undefined && !(got instanceof Uint8Array)) fail(`${what}: not a Uint8Array`);
  if (hex(got) !== hex(want)) fail(`${what}: got ${hex(got).slice(0, 64)} (${got?.length}), want ${hex(want).slice(0, 64)} (${want?.length})`);
}

function same<T>(got: T, want: T, what: string): void {
  if (JSON.stringify(got) !== JSON.stringify(want)) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

/** Awaits `action` and checks that it failed with a StorageError of `code`. */
async function rejectsWith(action: () => unknown, code: StorageErrorCode, what: string): Promise<void> {
  try {
    await action();
  } catch (e) {
    if (isStorageError(e) && e.code === code) return;
    fail(`${what}: threw ${e instanceof Error ? `${e.name} ${(e as { code?: string }).code ?? ''} ${e.message}` : String(e)}, want ${code}`);
  }
  fail(`${what}: succeeded, want ${code}`);
}

/** Awaits `action` and checks that it threw an instance of `type` (TypeError, RangeError). */
async function throwsA(action: () => unknown, type: typeof TypeError, what: string): Promise<void> {
  try {
    await action();
  } catch (e) {
    if (e instanceof type) return;
    fail(`${what}: threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}, want ${type.name}`);
  }
  fail(`${what}: succeeded, want ${type.name}`);
}

async function collect(backend: StorageBackend, table: string, range?: ScanRange): Promise<string[]> {
  const keys: string[] = [];
  for await (const [k] of backend.scan(table, range)) keys.push(hex(k));
  return keys;
}

/** Runs `body` on a writer over `place` with the suite's tables, and closes it. */
async function withWriter(place: Place, body: (b: StorageBackend) => Promise<void>): Promise<void> {
  const backend = await place.open({ tables: TABLES });
  try {
    await body(backend);
  } finally {
    await backend.close();
  }
}

export const adapterCases: AdapterCase[] = [
  {
    name: 'get returns what was written, of any size, and undefined when absent',
    run: (place) =>
      withWriter(place, async (b) => {
        same(b.readOnly, false, 'readOnly');
        same(typeof b.kind, 'string', 'kind');
        sameBytes(await b.get('nodes', bytes(1)), undefined, 'absent');
        const sizes = [0, 1, 600, 8192, 140_000];
        await b.write({ puts: sizes.map((n, i) => ['nodes', bytes(10, i), pattern(n, n + 1)] as const) });
        for (const [i, n] of sizes.entries()) sameBytes(await b.get('nodes', bytes(10, i)), pattern(n, n + 1), `value of ${n} bytes`);
        sameBytes(await b.get('nodes', bytes(10)), undefined, 'a prefix of a key');
        sameBytes(await b.get('meta', bytes(10, 0)), undefined, 'the same key in another table');
      }),
  },
  {
    name: 'records are copied in and out: reusing a buffer changes nothing stored',
    run: (place) =>
      withWriter(place, async (b) => {
        const key = bytes(1, 2, 3);
        const value = bytes(4, 5, 6);
        await b.write({ puts: [['nodes', key, value]] });
        key[0] = 9;
        value[0] = 9;
        const got = await b.get('nodes', bytes(1, 2, 3));
        sameBytes(got, bytes(4, 5, 6), 'after the caller changed its buffers');
        got![1] = 9;
        sameBytes(await b.get('nodes', bytes(1, 2, 3)), bytes(4, 5, 6), 'after the caller changed a value it read');
      }),
  },
  {
    name: 'a key or value given as a view of a larger buffer stores the view alone',
    run: (place) =>
      withWriter(place, async (b) => {
        const big = pattern(100_000, 7);
        const key = big.subarray(50, 58);
        const value = big.subarray(1000, 1010);
        await b.write({ puts: [['nodes', key, value]] });
        const got = await b.get('nodes', key.slice());
        sameBytes(got, big.slice(1000, 1010), 'the view');
        // Nothing of the rest of the buffer came back with it (IndexedDB clones a view's whole buffer).
        same(got!.buffer.byteLength, 10, 'the bytes behind the value read');
      }),
  },
  {
    name: 'getMany answers in the order asked, absent keys and repeats included',
    run: (place) =>
      withWriter(place, async (b) => {
        await b.write({ puts: [['nodes', bytes(1), bytes(11)], ['nodes', bytes(2), bytes(22)]] });
        const got = await b.getMany('nodes', [bytes(2), bytes(3), bytes(1), bytes(2)]);
        same(got.map(hex), ['16', 'undefined', '0b', '16'], 'getMany');
        same(await b.getMany('nodes', []), [], 'no keys');
      }),
  },
  {
    name: 'overwrites and deletes; in one batch deletes apply before puts and the last put of a key wins',
    run: (place) =>
      withWriter(place, async (b) => {
        await b.write({ puts: [['nodes', bytes(1), bytes(1)], ['nodes', bytes(2), bytes(2)], ['meta', bytes(1), bytes(7)]] });
        await b.write({ puts: [['nodes', bytes(1), bytes(3)]], deletes: [['nodes', bytes(2)], ['nodes', bytes(99)]] });
        sameBytes(await b.get('nodes', bytes(1)), bytes(3), 'overwritten');
        sameBytes(await b.get('nodes', bytes(2)), undefined, 'deleted');
        sameBytes(await b.get('meta', bytes(1)), bytes(7), 'another table is untouched');
        await b.write({ puts: [['nodes', bytes(5), bytes(1)], ['nodes', bytes(5), bytes(2)]], deletes: [['nodes', bytes(5)]] });
        sameBytes(await b.get('nodes', bytes(5)), bytes(2), 'put twice and deleted in one batch');
        await b.write({});
      }),
  },
  {
    name: 'range deletes: start inclusive, end exclusive or none, applied before deletes and puts, atomic with them',
    run: (place) =>
      withWriter(place, async (b) => {
        const keys = [[0x00], [0x01], [0x01, 0x00], [0x02], [0x7f], [0x80], [0xff], [0xff, 0xff]].map((k) => bytes(...k));
        await b.write({ puts: [...keys.map((k) => ['nodes', k, k] as const), ['meta', bytes(0x01), bytes(1)]] });
        await b.write({ deleteRanges: [['nodes', bytes(0x01), bytes(0x7f)]] });
        same(await collect(b, 'nodes'), ['00', '7f', '80', 'ff', 'ffff'], 'start ≤ key < end');
        same(await collect(b, 'meta'), ['01'], 'another table is untouched');
        await b.write({ deleteRanges: [['nodes', bytes(0x80), bytes(0x80)], ['nodes', bytes(0xff), bytes(0x01)]] });
        same(await collect(b, 'nodes'), ['00', '7f', '80', 'ff', 'ffff'], 'start = end and start > end delete nothing');
        await b.write({ deleteRanges: [['nodes', bytes(0xff)]], deletes: [['nodes', bytes(0x7f)]], puts: [['nodes', bytes(0xff, 0xff), bytes(9)]] });
        same(await collect(b, 'nodes'), ['00', '80', 'ffff'], 'no end: to the last key; a put in the range stays');
        sameBytes(await b.get('nodes', bytes(0xff, 0xff)), bytes(9), 'the put after the range delete');
        const many = Array.from({ length: SCAN_PAGE + 5 }, (_, i) => ['meta', bytes(0x10, i >> 8, i & 0xff), bytes(i & 0xff)] as const);
        await b.write({ puts: many });
        await throwsA(() => b.write({ deleteRanges: [['meta', bytes(0x10)], ['meta', new Uint8Array(0)]], puts: [['nodes', bytes(5), bytes(5)]] }), RangeError, 'an empty start last');
        same((await collect(b, 'meta')).length, many.length + 1, 'a failed batch deletes no range');
        sameBytes(await b.get('nodes', bytes(5)), undefined, 'a failed batch puts nothing');
        await b.write({ deleteRanges: [['meta', bytes(0x10), bytes(0x11)]] });
        same(await collect(b, 'meta'), ['01'], 'a range over many pages');
      }),
  },
  {
    name: 'scan: unsigned byte order, start inclusive, end exclusive, limit',
    run: (place) =>
      withWriter(place, async (b) => {
        const keys = [[0xff, 0xff], [0x80], [0x00, 0x00], [0x01], [0xff], [0x7f], [0x80, 0x00], [0x00]].map((k) => bytes(...k));
        await b.write({ puts: keys.map((k) => ['nodes', k, k] as const) });
        await b.write({ puts: [['meta', bytes(0x50), bytes()]] });
        const all = ['00', '0000', '01', '7f', '80', '8000', 'ff', 'ffff'];
        same(await collect(b, 'nodes'), all, 'whole table');
        same(await collect(b, 'nodes', { start: bytes(0x01), end: bytes(0x80, 0x00) }), ['01', '7f', '80'], 'start ≤ key < end');
        same(await collect(b, 'nodes', { start: bytes(0x7f, 0x00) }), ['80', '8000', 'ff', 'ffff'], 'start between keys');
        same(await collect(b, 'nodes', { end: bytes(0x00, 0x00) }), ['00'], 'end only');
        same(await collect(b, 'nodes', { limit: 3 }), all.slice(0, 3), 'limit');
        same(await collect(b, 'nodes', { limit: 0 }), [], 'limit 0');
        same(await collect(b, 'nodes', { start: bytes(0x80), end: bytes(0x80) }), [], 'start = end');
        same(await collect(b, 'nodes', { start: bytes(0xff), end: bytes(0x01) }), [], 'start > end');
        same(await collect(b, 'meta'), ['50'], 'another table');
        for await (const [k, v] of b.scan('nodes', { start: bytes(0x7f), limit: 1 })) {
          sameBytes(k, bytes(0x7f), 'scanned key');
          sameBytes(v, bytes(0x7f), 'scanned value');
        }
      }),
  },
  {
    name: 'scan across many pages, with limits that end inside and at the edge of a page',
    run: (place) =>
      withWriter(place, async (b) => {
        const n = SCAN_PAGE * 2 + 17;
        const key = (i: number) => bytes(i >> 8, i & 0xff);
        await b.write({ puts: Array.from({ length: n }, (_, i) => ['nodes', key(i), pattern(32, i + 1)] as const) });
        let i = 0;
        for await (const [k, v] of b.scan('nodes')) {
          sameBytes(k, key(i), `key ${i}`);
          sameBytes(v, pattern(32, i + 1), `value ${i}`);
          i++;
        }
        same(i, n, 'records scanned');
        for (const limit of [SCAN_PAGE - 1, SCAN_PAGE, SCAN_PAGE + 1, n, n + 1]) {
          same((await collect(b, 'nodes', { start: key(3), limit })).length, Math.min(limit, n - 3), `limit ${limit}`);
        }
      }),
  },
  {
    name: 'a batch with a bad entry anywhere writes nothing',
    run: (place) =>
      withWriter(place, async (b) => {
        await b.write({ puts: [['nodes', bytes(1), bytes(1)]] });
        const good = [['nodes', bytes(2), bytes(2)], ['meta', bytes(3), pattern(140_000, 3)]] as const;
        await throwsA(() => b.write({ puts: [...good, ['nope', bytes(4), bytes(4)]], deletes: [['nodes', bytes(1)]] }), RangeError, 'unknown table last');
        await throwsA(() => b.write({ puts: good, deletes: [['nodes', bytes(1)], ['nodes', new Uint8Array(0)]] }), RangeError, 'empty key last');
        await throwsA(
          () => b.write({ puts: [...good, ['nodes', bytes(5), 'not bytes' as unknown as Uint8Array]] }),
          TypeError,
          'a value that is not bytes',
        );
        sameBytes(await b.get('nodes', bytes(1)), bytes(1), 'the delete of a failed batch');
        same(await collect(b, 'nodes'), ['01'], 'nodes after failed batches');
        same(await collect(b, 'meta'), [], 'meta after failed batches');
      }),
  },
  {
    name: 'what was written survives close and reopen, read-only or not',
    run: async (place) => {
      await withWriter(place, (b) => b.write({ puts: [['nodes', bytes(1), pattern(140_000, 9)], ['meta', text('head'), bytes(7)]] }));
      await withWriter(place, async (b) => {
        sameBytes(await b.get('nodes', bytes(1)), pattern(140_000, 9), 'after reopening');
        await b.write({ deletes: [['meta', text('head')]] });
      });
      const reader = await place.open({ tables: TABLES, readOnly: true });
      same(reader.readOnly, true, 'readOnly');
      sameBytes(await reader.get('nodes', bytes(1)), pattern(140_000, 9), 'read-only');
      sameBytes(await reader.get('meta', text('head')), undefined, 'deleted before closing');
      await rejectsWith(() => reader.write({ puts: [['nodes', bytes(2), bytes(2)]] }), 'STORE_READ_ONLY', 'write on a reader');
      await reader.close();
    },
  },
  {
    name: 'one writer at a time; readers open beside it and see each finished write',
    run: async (place) => {
      const writer = await place.open({ tables: TABLES });
      await rejectsWith(() => place.open({ tables: TABLES }), 'STORE_LOCKED', 'a second writer');
      const reader = await place.open({ tables: TABLES, readOnly: true });
      for (let i = 0; i < 3; i++) {
        await writer.write({ puts: [['nodes', bytes(i), pattern(1000, i + 1)]] });
        sameBytes(await reader.get('nodes', bytes(i)), pattern(1000, i + 1), `reader after write ${i}`);
      }
      await writer.close();
      const next = await place.open({ tables: TABLES });
      await next.write({ puts: [['nodes', bytes(9), bytes(9)]] });
      sameBytes(await reader.get('nodes', bytes(9)), bytes(9), 'reader sees the next writer');
      await next.close();
      await reader.close();
    },
  },
  {
    name: 'every call on a closed backend fails with STORE_CLOSED; close twice is fine',
    run: async (place) => {
      const b = await place.open({ tables: TABLES });
      await b.close();
      await b.close();
      await rejectsWith(() => b.get('nodes', bytes(1)), 'STORE_CLOSED', 'get');
      await rejectsWith(() => b.getMany('nodes', [bytes(1)]), 'STORE_CLOSED', 'getMany');
      await rejectsWith(() => collect(b, 'nodes'), 'STORE_CLOSED', 'scan');
      await rejectsWith(() => b.write({ puts: [['nodes', bytes(1), bytes(1)]] }), 'STORE_CLOSED', 'write');
      await rejectsWith(() => b.sizeBytes(), 'STORE_CLOSED', 'sizeBytes');
      await rejectsWith(() => b.compact(), 'STORE_CLOSED', 'compact');
    },
  },
  {
    name: 'wrong types throw TypeError and wrong values RangeError',
    run: async (place) => {
      await throwsA(() => place.open({ tables: 'nodes' as unknown as string[] }), TypeError, 'tables not an array');
      await throwsA(() => place.open({ tables: [] }), RangeError, 'no tables');
      await throwsA(() => place.open({ tables: ['no spaces'] }), RangeError, 'a table name that is not an identifier');
      await throwsA(() => place.open({ tables: ['a', 'a'] }), RangeError, 'a table twice');
      await withWriter(place, async (b) => {
        await throwsA(() => b.get('nodes', [1] as unknown as Uint8Array), TypeError, 'key not bytes');
        await throwsA(() => b.get(1 as unknown as string, bytes(1)), TypeError, 'table not a string');
        await throwsA(() => b.get('other', bytes(1)), RangeError, 'unknown table');
        await throwsA(() => b.get('nodes', new Uint8Array(0)), RangeError, 'empty key');
        await throwsA(() => b.get('nodes', new Uint8Array(MAX_KEY_BYTES + 1)), RangeError, 'oversize key');
        await throwsA(() => b.getMany('nodes', [bytes(1), 'x' as unknown as Uint8Array]), TypeError, 'getMany key not bytes');
        await throwsA(() => collect(b, 'nodes', { limit: -1 }), RangeError, 'negative limit');
        await throwsA(() => collect(b, 'nodes', { limit: 1.5 }), RangeError, 'fractional limit');
        await throwsA(() => collect(b, 'nodes', { start: 'a' as unknown as Uint8Array }), TypeError, 'start not bytes');
        await throwsA(() => b.write(null as unknown as object), TypeError, 'batch not an object');
        await throwsA(() => b.write({ deleteRanges: 'x' as unknown as [] }), TypeError, 'deleteRanges not an array');
        await throwsA(() => b.write({ deleteRanges: [['nodes', bytes(1), 'z' as unknown as Uint8Array]] }), TypeError, 'a range end not bytes');
        await throwsA(() => b.write({ deleteRanges: [['nodes'] as unknown as [string, Uint8Array]] }), TypeError, 'a range with no start');
        await throwsA(() => b.write({ deleteRanges: [['other', bytes(1)]] }), RangeError, 'a range of an unknown table');
        await b.write({ puts: [['nodes', new Uint8Array(MAX_KEY_BYTES), bytes(1)]] });
        sameBytes(await b.get('nodes', new Uint8Array(MAX_KEY_BYTES)), bytes(1), 'the longest key');
      });
    },
  },
  {
    name: 'sizeBytes grows with what is stored',
    run: (place) =>
      withWriter(place, async (b) => {
        const before = await b.sizeBytes();
        if (!Number.isSafeInteger(before) || before < 0) fail(`sizeBytes: ${before}`);
        await b.write({ puts: Array.from({ length: 8 }, (_, i) => ['nodes', bytes(i), pattern(140_000, i + 1)] as const) });
        const after = await b.sizeBytes();
        if (after - before < 8 * 140_000) fail(`sizeBytes grew by ${after - before} for 1,120,000 bytes stored`);
      }),
  },
  {
    name: 'compact keeps every record, and a reader cannot compact',
    run: async (place) => {
      await withWriter(place, async (b) => {
        await b.write({ puts: Array.from({ length: 16 }, (_, i) => ['nodes', bytes(i), pattern(70_000, i + 1)] as const) });
        await b.write({ deletes: Array.from({ length: 12 }, (_, i) => ['nodes', bytes(i)] as const) });
        for (const full of [false, true]) {
          await b.compact({ full });
          same(await collect(b, 'nodes'), [12, 13, 14, 15].map((i) => hex(bytes(i))), `keys after compact (full: ${full})`);
          for (let i = 12; i < 16; i++) sameBytes(await b.get('nodes', bytes(i)), pattern(70_000, i + 1), `record ${i} after compact (full: ${full})`);
        }
      });
      const reader = await place.open({ tables: TABLES, readOnly: true });
      try {
        await rejectsWith(() => reader.compact(), 'STORE_READ_ONLY', 'compact on a reader');
      } finally {
        await reader.close();
      }
    },
  },
];
