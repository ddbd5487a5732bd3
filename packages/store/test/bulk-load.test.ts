// The bulk load (docs/store.md, "A bulk load"), on the memory and the Node
// backend: every load of spec/vectors/bulk_load.json gives its root and
// chunks, and refuses its bad input (a bad capacity at the open); the loaded
// version reads and proves exactly its entries, takes
// later commits, and is all or nothing: a load that fails, is closed, or
// whose backend dies at any of its writes leaves an empty store with no
// record. The SIGKILL of a real load is in crash.test.ts's bulk case.
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyChunk, verifyExistence, Tree } from '@bpavl/wasm';
import type { MemoryDatabase } from '../../storage/src/memory.ts';
import { openState, type State } from '../src/index.ts';
import type { BulkLoadOptions } from '../src/bulk-load.ts';
import { putRecord, recordBytes } from '../src/sort-records.node.ts';
import { inMemory, memoryBackend, onDisk } from './support/places.ts';
import { hex as fromHex, loadVectors } from '../../bpavl-wasm/test/helpers.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** `n` entries in key order: 32-byte hashed keys, values of 1 … 2,000 bytes. */
function entries(n: number, salt = 0): [Uint8Array, Uint8Array][] {
  const out: [Uint8Array, Uint8Array][] = [];
  for (let i = 0; i < n; i++) {
    const key = new Uint8Array(createHash('sha256').update(`${salt}:${i}`).digest());
    out.push([key, new Uint8Array(1 + ((i * 37) % 2000)).fill(i & 0xff)]);
  }
  return out.sort(([a], [b]) => Buffer.compare(a, b));
}

const recordCount = (db: MemoryDatabase) => ['nodes', 'chunks', 'entries', 'stale', 'versions'].reduce((n, t) => n + db.table(t).size(), 0);

async function expectHolds(state: State, input: readonly (readonly [Uint8Array, Uint8Array])[]) {
  const snapshot = await state.snapshot();
  expect(snapshot.len).toBe(input.length);
  // As many entries as the input, each of them there: exactly the input.
  for (const [k, v] of input) expect(hex(snapshot.get(k)!)).toBe(hex(v));
  for (const [k, v] of input.filter((_, i) => i % 97 === 0)) {
    expect(hex((await state.get(k))!)).toBe(hex(v));
    const { value, proof } = await state.proveExistence(k);
    expect(hex(value)).toBe(hex(v));
    verifyExistence(state.head()!.root, k, value, proof);
  }
}

const places = [['memory', () => inMemory()], ['node', () => onDisk()]] as const;
const made: { remove(): void }[] = [];
afterAll(() => made.forEach((p) => p.remove()));

const vectors = loadVectors('bulk_load');
const pairsOf = (rows: [string, string][]) => rows.map(([k, v]) => [fromHex(k), fromHex(v)] as [Uint8Array, Uint8Array]);

/** The entries as `sortRecords` hands them out: buffers of records, `perBuffer` entries each (so loads cross buffers). */
function recordBuffersOf(rows: [string, string][], perBuffer = 3): Uint8Array[] {
  const pairs = pairsOf(rows);
  const buffers: Uint8Array[] = [];
  for (let i = 0; i < pairs.length; i += perBuffer) {
    const part = pairs.slice(i, i + perBuffer);
    const buffer = Buffer.alloc(part.reduce((n, [k, v]) => n + recordBytes(k, v), 0));
    part.reduce((at, [k, v]) => putRecord(buffer, at, k, v), 0);
    buffers.push(buffer);
  }
  return buffers;
}

/** A load's input: the entries one by one, or in buffers of records. */
const inputs = [['entries', (rows: [string, string][]) => pairsOf(rows)], ['record buffers', recordBuffersOf]] as const;

it("bench:store's own check of the bulk root (bench/packed-root.mjs, TypeScript hashing) gives every root of bulk_load.json", async () => {
  const { packedRoot } = await import('../../../bench/packed-root.mjs');
  for (const c of vectors.valid) {
    const reference = packedRoot(c.entries.length, c.capacity);
    for (const [k, v] of pairsOf(c.entries)) reference.push(k, v);
    expect([c.name, hex(reference.root())]).toEqual([c.name, c.root]);
  }
});

describe.each(places)('a bulk load on the %s backend', (_, place) => {
  it.each(inputs)('loads every case of spec/vectors/bulk_load.json, given as %s, to its root and chunks, and refuses each bad input with its code', async (_form, input) => {
    for (const c of vectors.valid) {
      const at = place();
      made.push(at);
      const state = await at.open({ capacity: c.capacity, cacheBytes: 0 });
      const info = await state.bulkLoad(input(c.entries));
      expect([c.name, hex(info.root), info.chunkCount, info.entryCount]).toEqual([c.name, c.root, c.chunk_count, c.entry_count]);
      // Each chunk as exported verifies at its index with the recorded key-height and entry count.
      for (const chunk of c.chunk_list) {
        const verified = verifyChunk(info.root, chunk.index, await state.exportChunk(chunk.index));
        expect([c.name, verified.keyHeight, verified.len]).toEqual([c.name, chunk.key_height, chunk.entry_count]);
        verified.free();
      }
      await state.close();
    }
    for (const c of vectors.invalid) {
      const at = place();
      made.push(at);
      if (c.at === null) {
        // The capacity refused: the store is not even opened.
        await expect(at.open({ capacity: c.capacity })).rejects.toMatchObject({ name: 'TreeError', code: c.code });
        continue;
      }
      const state = await at.open({ capacity: c.capacity, cacheBytes: 0 });
      await expect(state.bulkLoad(input(c.entries))).rejects.toMatchObject({ name: 'TreeError', code: c.code });
      expect(state.versions()).toEqual([]);
      await state.close();
    }
  });

  it('refuses a buffer of records that ends inside a record, and is left empty', async () => {
    const at = place();
    made.push(at);
    const c = vectors.valid.find((v: { capacity: number; entries: unknown[] }) => v.capacity === 4 && v.entries.length >= 4);
    const state = await at.open({ capacity: 4, cacheBytes: 0 });
    const rows = c.entries as [string, string][];
    const [whole, ...rest] = recordBuffersOf(rows, rows.length);
    expect(rest).toEqual([]);
    for (const cut of [whole!.length - 1, 5, 1]) {
      await expect(state.bulkLoad([whole!.subarray(0, cut)])).rejects.toThrow(RangeError);
      expect(state.versions()).toEqual([]);
    }
    expect(hex((await state.bulkLoad([whole!])).root)).toBe(c.root);
    await state.close();
  });

  it('is version 1 of exactly the entries, reads, proves and takes commits', async () => {
    // [n, C, chunks]: below C = 16 chunks are full (⌈n/C⌉); at 256 they hold 240 (the bulk fill), the
    // last 240 and the 120 left making two.
    for (const [n, capacity, chunks] of [[0, 4, 0], [1, 2, 1], [9, 4, 3], [700, 3, 234], [3000, 256, 13]] as const) {
      const at = place();
      made.push(at);
      const input = entries(n);
      const state = await at.open({ capacity, cacheBytes: 0 });
      const progress: number[] = [];
      const info = await state.bulkLoad(input, { onProgress: (k) => progress.push(k) });
      expect(info).toMatchObject({ version: 1, entryCount: n });
      expect(progress.every((k, i) => k <= n && (i === 0 || k > progress[i - 1]!))).toBe(true);
      expect(info.chunkCount).toBe(chunks);
      await expectHolds(state, input);
      if (n > 0) {
        const next = entries(50, 1);
        for (const [k, v] of next) await state.put(k, v);
        await state.delete(input[0]![0]);
        const { version } = await state.commit();
        expect(version).toBe(2);
        const expected = [...input.slice(1), ...next].sort(([a], [b]) => Buffer.compare(a, b));
        await expectHolds(state, expected);
      }
      await state.close();
      const reopened = await at.open();
      expect(reopened.versions().map((v) => v.version)).toEqual(n > 0 ? [1, 2] : [1]);
      expect(hex((await reopened.snapshot({ version: 1 })).root)).toBe(hex(info.root));
      await reopened.close();
    }
  });

  it('gives the same root as the same entries loaded anywhere else', async () => {
    const input = entries(1000);
    const roots: string[] = [];
    for (const backend of [inMemory(), place()]) {
      made.push(backend);
      const state = await backend.open({ capacity: 16, cacheBytes: 0 });
      roots.push(hex((await state.bulkLoad(input)).root));
      await expectHolds(state, input);
      await state.close();
    }
    expect(new Set(roots).size).toBe(1);
    // Not an insert's shape: the tree built by puts holds chunks about 3/4 full.
    const tree = new Tree(16);
    for (const [k, v] of input) tree.insert(k, v);
    expect(hex(tree.commit().root)).not.toBe(roots[0]);
    tree.free();
  });

  it('refuses a store with a version, keys out of order, and writes while it runs', async () => {
    const at = place();
    made.push(at);
    const state = await at.open({ capacity: 4 });
    const input = entries(100);
    const swapped = [...input];
    [swapped[60], swapped[61]] = [swapped[61]!, swapped[60]!];
    await expect(state.bulkLoad(swapped)).rejects.toMatchObject({ name: 'TreeError', code: 'KEYS_NOT_SORTED' });
    // A commit called before a load runs first: the load then finds a version.
    {
      const other = place();
      made.push(other);
      const s2 = await other.open({ capacity: 4 });
      await s2.put(input[0]![0], input[0]![1]);
      const committed = s2.commit();
      await expect(s2.bulkLoad(input)).rejects.toMatchObject({ code: 'STORE_NOT_EMPTY' });
      expect((await committed).version).toBe(1);
      expect(s2.versions().map((v) => v.version)).toEqual([1]);
      await s2.close();
    }
    await expect(state.bulkLoad([[input[0]![0], new Uint8Array(65537)]])).rejects.toMatchObject({ code: 'VALUE_TOO_LONG' });
    expect(state.versions()).toEqual([]);
    // While one runs, another, a prune, a sync and a catch-up are refused; a put waits for it, as it waits for a commit.
    async function* slow() {
      for (const e of input) {
        await new Promise((r) => setTimeout(r, 1));
        yield e;
      }
    }
    const running = state.bulkLoad(slow());
    // Underway (it starts once the writes called before it have run).
    await new Promise((r) => setTimeout(r, 20));
    await expect(state.bulkLoad(input)).rejects.toMatchObject({ code: 'SYNC_PENDING' });
    await expect(state.prune({ keepLast: 1 })).rejects.toMatchObject({ code: 'SYNC_PENDING' });
    await expect(state.syncSink(new Uint8Array(32))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
    await expect(state.catchUpSession(new Uint8Array(32))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
    const put = state.put(input[0]![0], Uint8Array.of(1));
    await running;
    await put;
    await expect(state.bulkLoad(input)).rejects.toMatchObject({ code: 'STORE_NOT_EMPTY' });
    await expectHolds(state, input);
    await state.commit();
    expect(await state.get(input[0]![0])).toEqual(Uint8Array.of(1));
    await state.close();
    const reader = await at.open({ readOnly: true });
    await expect(reader.bulkLoad([])).rejects.toMatchObject({ code: 'STORE_READ_ONLY' });
    await reader.close();
  });
});

describe('a bulk load is all or nothing', () => {
  const options: BulkLoadOptions = {};
  // About 3 MB of entries in writes of 1 MiB (cacheBytes 0): a few writes before the last.
  const input = entries(3000);

  it('a failed or closed load leaves no record, and a load after it works', async () => {
    const at = inMemory();
    const state = await at.open({ capacity: 8, cacheBytes: 0 });
    let writes = 0;
    async function* failing() {
      for (const [i, e] of input.entries()) {
        if (i === 2500) throw Object.assign(new Error('the source failed'), { code: 'SOURCE' });
        yield e;
      }
    }
    await expect(state.bulkLoad(failing(), { ...options, onProgress: () => writes++ })).rejects.toMatchObject({ code: 'SOURCE' });
    // Chunk records are written before the source fails.
    expect(writes).toBeGreaterThan(0);
    expect(recordCount(at.database)).toBe(0);
    await state.close();
    // Closed while it runs: the load stops before its next write (STORE_CLOSED) and removes what it wrote.
    const again = await at.open({ capacity: 8, cacheBytes: 0 });
    let closing: Promise<void> | undefined;
    async function* closedMidway() {
      for (const [i, e] of input.entries()) {
        if (i === 2500) closing = again.close();
        yield e;
      }
    }
    await expect(again.bulkLoad(closedMidway(), options)).rejects.toMatchObject({ code: 'STORE_CLOSED' });
    await closing;
    expect(recordCount(at.database)).toBe(0);
    const last = await at.open({ capacity: 8, cacheBytes: 0 });
    await last.bulkLoad(input, options);
    await expectHolds(last, input);
    await last.close();
  });

  it('a backend that dies at any of its writes leaves an empty store', async () => {
    let writes = 0;
    {
      const at = inMemory();
      const counting = memoryBackend(at.database);
      const write = counting.write.bind(counting);
      counting.write = (batch) => (writes++, write(batch));
      const state = await openState({ backend: counting, capacity: 8, cacheBytes: 0 });
      writes = 0;
      await state.bulkLoad(input, options);
      await state.close();
    }
    expect(writes).toBeGreaterThan(2);
    for (let dieAt = 1; dieAt <= writes; dieAt++) {
      const at = inMemory();
      const dying = memoryBackend(at.database);
      const write = dying.write.bind(dying);
      let n = 0;
      const state = await openState({ backend: dying, capacity: 8, cacheBytes: 0 });
      // The store record is written by the open; the load's writes are counted from here.
      dying.write = async (batch) => {
        if (++n >= dieAt) throw Object.assign(new Error('killed'), { code: 'KILLED' });
        return write(batch);
      };
      await expect(state.bulkLoad(input, options)).rejects.toMatchObject({ code: 'KILLED' });
      await state.close();
      const reopened = await openState({ backend: memoryBackend(at.database) });
      expect(reopened.versions(), `died at write ${dieAt}`).toEqual([]);
      expect(recordCount(at.database), `died at write ${dieAt}`).toBe(0);
      await reopened.bulkLoad(input, options);
      await expectHolds(reopened, input);
      await reopened.close();
    }
  });
});

it('a load writes each chunk as its record and the values records of its groups: no entry records', async () => {
  const at = inMemory();
  const backend = memoryBackend(at.database);
  const write = backend.write.bind(backend);
  const tables = new Set<string>();
  backend.write = (batch) => {
    for (const [table] of batch.puts ?? []) tables.add(table);
    return write(batch);
  };
  const state = await openState({ backend, capacity: 8, cacheBytes: 0 });
  const input = entries(3000);
  await state.bulkLoad(input);
  expect([...tables].sort()).toEqual(['chunks', 'meta', 'nodes', 'values', 'versions']);
  await expectHolds(state, input);
  await state.close();
});