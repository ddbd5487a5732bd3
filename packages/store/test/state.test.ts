// The store against a model of every retained version (test/model.ts) at
// C = 2, 3, 4 and 256, on the memory backend and (fewer steps) on the Node
// backend; IndexedDB runs the same model in Chromium
// (tests/browser/store.spec.ts). Then the Node backend by path, typed
// errors, corruption and the bounds of paged reads. Errors are asserted by code.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openState, StoreError, type PruneOptions, type State } from '../src/index.ts';
import { type Caches, hex, key, rng, runModel, value, type Model } from './model.ts';
import { damageVersionRecord } from './support/damage.ts';
import { inMemory, memoryBackend, onDisk, records, type Place } from './support/places.ts';
import { MemoryDatabase } from '../../storage/src/memory.ts';

/** A model run on `place`, which is removed afterwards. */
async function run(place: Place, capacity: number, seed: number, steps: number, domain: number, caches?: Caches): Promise<void> {
  try {
    await runModel(place, capacity, seed, steps, domain, caches);
  } finally {
    place.remove();
  }
}

// Bounded loops of a few thousand steps; the limit is generous because a
// loaded 2-core machine runs them several times slower than a quiet one.
describe('the store against a model of every retained version', { timeout: 60_000 }, () => {
  it.each([
    [2, 1],
    [3, 2],
    [4, 3],
    [2, 4],
    [3, 5],
    [4, 6],
  ])('memory, C = %i, seed %i', async (capacity, seed) => run(inMemory(), capacity, seed, 400, 60));

  it('memory, C = 256', async () => run(inMemory(), 256, 7, 1500, 1200));

  // No chunk stays loaded after a commit: every write loads what it changes.
  it.each([
    [2, 10],
    [3, 11],
    [4, 12],
    [256, 13],
  ])('memory, C = %i, seed %i, a cache of nothing', async (capacity, seed) =>
    run(inMemory(), capacity, seed, capacity === 256 ? 1000 : 400, capacity === 256 ? 1200 : 60, { cacheBytes: 0, valueCacheBytes: 0 }));

  // A batch of any size: every put writes the batch's changed chunks ahead and unloads every chunk.
  it.each([
    [2, 16],
    [3, 17],
    [4, 18],
    [256, 19],
  ])('memory, C = %i, seed %i, batches written ahead at every put', async (capacity, seed) =>
    run(inMemory(), capacity, seed, capacity === 256 ? 1000 : 400, capacity === 256 ? 1200 : 60, { cacheBytes: 0, batchBytes: 0 }));

  // A value cache of about six answers: most reads evict one.
  it.each([
    [3, 14],
    [256, 15],
  ])('memory, C = %i, seed %i, a value cache of a few answers', async (capacity, seed) =>
    run(inMemory(), capacity, seed, 400, capacity === 256 ? 1200 : 60, { valueCacheBytes: 2_000 }));

  it.each([
    [3, 8],
    [256, 9],
  ])('node, C = %i, seed %i', { timeout: 60_000 }, async (capacity, seed) => run(onDisk(), capacity, seed, 250, capacity === 256 ? 800 : 60));

  it('node, C = 3, seed 20, batches written ahead at every put', async () => run(onDisk(), 3, 20, 250, 60, { cacheBytes: 0, batchBytes: 0 }));
});

describe('on the Node backend, by path', () => {
  const places: Place[] = [];
  const place = () => {
    const p = onDisk();
    places.push(p);
    return p;
  };
  afterAll(() => places.forEach((p) => p.remove()));

  it('one writer: a second is STORE_LOCKED, readers open beside it, and it reopens after close', async () => {
    const at = place();
    const writer = await at.open({ capacity: 4 });
    await writer.put(key(1), value(1, 1));
    const first = await writer.commit();
    await expect(at.open()).rejects.toMatchObject({ name: 'StorageError', code: 'STORE_LOCKED' });
    const reader = await at.open({ readOnly: true });
    expect(reader.head()).toEqual(first);
    expect(await reader.get(key(1))).toEqual(value(1, 1));
    await expect(reader.put(key(2), value(2, 1))).rejects.toThrow(expect.objectContaining({ code: 'STORE_READ_ONLY' }));
    await reader.close();
    await writer.close();
    const again = await at.open();
    expect(again.head()).toEqual(first);
    expect(again.capacity).toBe(4);
    await again.close();
  });

  it('refresh: a reader takes the versions a writer commits, drops those it rolls back, prunes or commits again with another root, and leaves out a damaged record', async () => {
    const { DatabaseSync } = await import('node:sqlite');
    const at = place();
    const writer = await at.open({ capacity: 4 });
    for (let v = 1; v <= 3; v++) {
      await writer.put(key(v), value(v, v));
      await writer.commit();
    }
    const reader = await at.open({ readOnly: true });
    const listed = () => reader.versions().map((v) => [v.version, hex(v.root)]);
    const stored = () => writer.versions().map((v) => [v.version, hex(v.root)]);
    try {
      await writer.put(key(4), value(4, 4));
      await writer.commit();
      expect(listed()).toHaveLength(3); // the list it opened with, until it looks again
      expect(await reader.refresh()).toEqual([]);
      expect(listed()).toEqual(stored());
      expect(reader.head()).toEqual(writer.head());
      expect(await reader.get(key(4))).toEqual(value(4, 4));
      await writer.rollback(3);
      await writer.put(key(5), value(5, 5));
      await writer.commit();
      await writer.prune({ keepLast: 2 });
      expect(await reader.refresh()).toEqual([]);
      expect(listed()).toEqual(stored());
      expect(await reader.get(key(5))).toEqual(value(5, 5));
      expect(await reader.get(key(4))).toBeUndefined();
      await expect(reader.get(key(1), { version: 1 })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
      const db = new DatabaseSync(join(at.path, 'data.sqlite'));
      db.prepare('INSERT INTO versions (k, v) VALUES (?, ?)').run(Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 9), Uint8Array.of(0x07, 1, 2));
      db.close();
      const damaged = await reader.refresh();
      expect(damaged).toEqual([{ version: 9, error: expect.objectContaining({ name: 'StoreError', code: 'STORE_CORRUPT' }) }]);
      expect(listed()).toEqual(stored());
      expect(await reader.get(key(5))).toEqual(value(5, 5));
      // The writer's list is the database's (it holds the lock): nothing to read again.
      expect(await writer.refresh()).toEqual([]);
    } finally {
      await reader.close();
      await writer.close();
    }
    await expect(reader.refresh()).rejects.toMatchObject({ code: 'STORE_CLOSED' });
  });

  it('a read pinned to a root: a version committed again with another root between its steps is VERSION_UNKNOWN, never read from the new root', async () => {
    const at = place();
    const writer = await at.open({ capacity: 4 });
    for (let round = 1; round <= 3; round++) {
      await writer.putMany(Array.from({ length: 40 }, (_, i) => [key(i), value(i, round)] as const));
      await writer.commit();
    }
    const old = writer.head()!;
    const reader = await at.open({ readOnly: true });
    try {
      // A range read a page at a time, and the root given with the version.
      const pages = reader.range(undefined, undefined, { version: 3, root: old.root, pageSize: 4 });
      expect((await pages.next()).value).toEqual([key(0), value(0, 3)]);
      const plain = reader.range(undefined, undefined, { version: 3, pageSize: 4 });
      expect((await plain.next()).value).toEqual([key(0), value(0, 3)]);
      await writer.rollback(2);
      await writer.putMany(Array.from({ length: 40 }, (_, i) => [key(i), value(i, 4)] as const));
      const now = await writer.commit();
      // Before the reader looks again: the old root's records are gone, and storage says so.
      expect(await reader.isRetained(3)).toBe(false);
      expect(await reader.isRetained(3, now.root)).toBe(true);
      await reader.refresh();
      expect(reader.head()).toEqual(now);
      expect(await reader.isRetained(3, old.root)).toBe(false);
      // The next page of either read meets the new root under the same number.
      for (const read of [pages, plain]) {
        for (let i = 1; i < 4; i++) expect((await read.next()).value).toEqual([key(i), value(i, 3)]);
        await expect(read.next()).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
      }
      await expect(reader.get(key(1), { version: 3, root: old.root })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
      await expect(reader.proveAbsence(key(99), { version: 3, root: old.root })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
      expect(await reader.get(key(1), { version: 3, root: now.root })).toEqual(value(1, 4));
      expect(await reader.get(key(1), { root: now.root })).toEqual(value(1, 4));
      // A root that is no Uint8Array, or not 32 bytes long.
      await expect(reader.get(key(1), { version: 3, root: 'ab' as unknown as Uint8Array })).rejects.toThrow(TypeError);
      await expect(reader.get(key(1), { version: 3, root: now.root.subarray(1) })).rejects.toThrow(RangeError);
      await expect(reader.isRetained(3, now.root.subarray(1))).rejects.toThrow(RangeError);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  /** A store of versions 1 … 4 (key v written at v) whose version 2 record has its last byte flipped, in one SQLite transaction. */
  async function damagedVersion2() {
    const at = place();
    const writer = await at.open({ capacity: 4 });
    for (let v = 1; v <= 4; v++) {
      await writer.put(key(v), value(v, v));
      await writer.commit();
    }
    const roots = writer.versions().map((v) => hex(v.root));
    await writer.close();
    damageVersionRecord(at.path, 2);
    return { at, roots };
  }

  const CORRUPT_2 = { name: 'StoreError', code: 'STORE_CORRUPT', message: expect.stringContaining('the record of version 2') };

  it('a damaged version record: a read-only open leaves it out and reports it, and every other version reads', async () => {
    const { at, roots } = await damagedVersion2();
    const reader = await at.open({ readOnly: true });
    try {
      expect(reader.versions().map((v) => [v.version, hex(v.root)])).toEqual([1, 3, 4].map((v) => [v, roots[v - 1]]));
      expect(reader.damagedVersions()).toEqual([{ version: 2, error: expect.objectContaining(CORRUPT_2) }]);
      expect(reader.head()?.version).toBe(4);
      for (const v of [1, 3, 4]) expect(await reader.get(key(v), { version: v })).toEqual(value(v, v));
      await expect(reader.get(key(1), { version: 2 })).rejects.toMatchObject(CORRUPT_2);
      // refresh shares the reading of the records: the same list, the same report.
      expect(await reader.refresh()).toEqual([{ version: 2, error: expect.objectContaining(CORRUPT_2) }]);
      expect(reader.versions().map((v) => v.version)).toEqual([1, 3, 4]);
    } finally {
      await reader.close();
    }
  });

  it('a damaged version record: a writable open takes no change but a prune or a rollback that drops it', async () => {
    const { at } = await damagedVersion2();
    const writer = await at.open();
    try {
      expect(writer.versions().map((v) => v.version)).toEqual([1, 3, 4]);
      expect(await writer.get(key(4))).toEqual(value(4, 4));
      await expect(writer.put(key(9), value(9, 9))).rejects.toMatchObject(CORRUPT_2);
      await expect(writer.commit()).rejects.toMatchObject(CORRUPT_2);
      await expect(writer.syncSink(new Uint8Array(32), { asNextVersion: true })).rejects.toMatchObject(CORRUPT_2);
      await expect(writer.catchUpSession(new Uint8Array(32))).rejects.toMatchObject(CORRUPT_2);
      // A prune that keeps it, a rollback onto it or to below it with it kept: refused, nothing changed.
      await expect(writer.prune({ keepLast: 3 })).rejects.toMatchObject(CORRUPT_2);
      await expect(writer.prune({ before: 2 })).rejects.toMatchObject(CORRUPT_2);
      await expect(writer.rollback(2)).rejects.toMatchObject(CORRUPT_2);
      expect(writer.versions().map((v) => v.version)).toEqual([1, 3, 4]);
      // Pruning past it drops it; the state then takes writes again, and the next version is 5.
      await writer.prune({ keepLast: 2 });
      expect(writer.damagedVersions()).toEqual([]);
      expect(writer.versions().map((v) => v.version)).toEqual([3, 4]);
      await writer.put(key(5), value(5, 5));
      expect((await writer.commit()).version).toBe(5);
    } finally {
      await writer.close();
    }
    const again = await at.open({ readOnly: true });
    expect(again.versions().map((v) => v.version)).toEqual([3, 4, 5]);
    expect(again.damagedVersions()).toEqual([]);
    expect(await again.get(key(3))).toEqual(value(3, 3));
    await again.close();
  });

  it('a damaged head record: a writable open keeps the records born at it, and a rollback below it repairs the store', async () => {
    const { DatabaseSync } = await import('node:sqlite');
    const { at } = await damagedVersion2();
    const u64 = (n: number) => Uint8Array.of(0, 0, 0, 0, 0, 0, 0, n);
    // Versions 3 and 4 go (their records stay, as a torn rollback leaves them), so that the damaged 2 is the last record.
    const db = new DatabaseSync(join(at.path, 'data.sqlite'));
    db.prepare('DELETE FROM versions WHERE k > ?').run(u64(2));
    // Entry records are keyed by the version that wrote them first (spec/store-format.md).
    const bornAt2 = () => (db.prepare('SELECT count(*) AS n FROM entries WHERE k >= ? AND k < ?').get(u64(2), u64(3)) as { n: number }).n;
    const born = bornAt2();
    expect(born).toBeGreaterThan(0);
    const writer = await at.open();
    try {
      // The open removes what was born after the last record, the damaged one counted: not what version 2 wrote.
      expect(bornAt2()).toBe(born);
      expect(writer.versions().map((v) => v.version)).toEqual([1]);
      await expect(writer.put(key(9), value(9, 9))).rejects.toMatchObject(CORRUPT_2);
      await writer.rollback(1);
      expect(writer.damagedVersions()).toEqual([]);
      expect(bornAt2()).toBe(0);
      await writer.put(key(2), value(2, 7));
      expect((await writer.commit()).version).toBe(2);
      expect(await writer.get(key(2))).toEqual(value(2, 7));
    } finally {
      await writer.close();
      db.close();
    }
  });

  it('a store a writer was killed making reads as empty, or as not made yet, never as damaged or foreign; the next writer makes it', async () => {
    const { DatabaseSync } = await import('node:sqlite');
    // Killed after the tables, before the store record: readers see an empty store.
    const tables = onDisk();
    const writer = await tables.open({ capacity: 16 });
    await writer.close();
    const db = new DatabaseSync(join(tables.path, 'data.sqlite'));
    db.exec(`DELETE FROM "meta"`);
    db.close();
    const reader = await tables.open({ readOnly: true });
    expect([reader.versions(), reader.head()]).toEqual([[], undefined]);
    await reader.close();
    // Killed before the first table: an empty file, no mark yet.
    const empty = onDisk();
    new DatabaseSync(join(empty.path, 'data.sqlite')).close();
    await expect(empty.open({ readOnly: true })).rejects.toMatchObject({ code: 'STORE_NOT_A_DATABASE', message: expect.stringContaining('no store was made') });
    for (const at of [tables, empty]) {
      const state = await at.open({ capacity: 16 });
      await state.put(key(1), value(1, 1));
      expect((await state.commit()).version).toBe(1);
      await state.close();
      at.remove();
    }
  });

  it('a rollback gives the space of the versions it discards back to the file system, as a prune does', async () => {
    const at = onDisk();
    try {
      const state = await at.open({ capacity: 16 });
      for (let v = 0; v < 12; v++) {
        for (let k = 0; k < 1500; k++) await state.put(key(k), value(k, v + 1));
        await state.commit();
      }
      const before = (await state.stats()).bytesOnDisk;
      await state.rollback(1);
      const after = (await state.stats()).bytesOnDisk;
      // One version of twelve is left: its records are about a twelfth of the file.
      expect(after).toBeLessThan(before / 3);
      await state.close();
    } finally {
      at.remove();
    }
  });

  it('a capacity outside 2 … 4096 is CAPACITY_INVALID and leaves nothing behind, for a new store and an existing one', async () => {
    const at = place();
    for (const capacity of [1, 4097, 0]) {
      await expect(at.open({ capacity })).rejects.toMatchObject({ name: 'TreeError', code: 'CAPACITY_INVALID' });
    }
    // No store record was written: the directory opens as a new store of the capacity asked.
    const state = await at.open({ capacity: 4 });
    expect(state.capacity).toBe(4);
    await state.put(key(1), value(1, 1));
    const first = await state.commit();
    await state.close();
    await expect(at.open({ capacity: 1 })).rejects.toMatchObject({ code: 'CAPACITY_INVALID' });
    const again = await at.open();
    expect([again.capacity, again.head()]).toEqual([4, first]);
    await again.close();
  });

  it('a closed store is STORE_CLOSED', async () => {
    const state = await place().open();
    await state.close();
    expect(() => state.head()).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }));
    await expect(state.commit()).rejects.toMatchObject({ code: 'STORE_CLOSED' });
    await state.close();
  });

  it('a file that is not a database is STORE_NOT_A_DATABASE, and leaves no lock behind', async () => {
    const at = place();
    writeFileSync(join(at.path, 'data.sqlite'), new Uint8Array(8192).fill(0x5a));
    for (let attempt = 0; attempt < 2; attempt++) {
      await expect(at.open()).rejects.toMatchObject({ name: 'StorageError', code: 'STORE_NOT_A_DATABASE' });
    }
    await expect(place().open({ readOnly: true })).rejects.toMatchObject({ code: 'STORE_NOT_A_DATABASE' });
  });
});

describe('typed errors, the store unchanged', () => {
  async function sample() {
    const place = inMemory();
    const state = await place.open({ capacity: 4 });
    for (let k = 0; k < 20; k++) await state.put(key(k), value(k, 1));
    const first = await state.commit();
    return { place, state, first };
  }

  it('open and prune options of the wrong type are TypeErrors: both a path and a backend, a readOnly or vacuum that is no boolean', async () => {
    const { state, first } = await sample();
    await state.put(key(1), value(1, 2));
    await state.commit();
    await expect(state.prune({ keepLast: 1, vacuum: 'yes' } as unknown as PruneOptions)).rejects.toThrow(TypeError);
    expect(state.versions().map((v) => v.version)).toEqual([first.version, first.version + 1]);
    const backend = memoryBackend(new MemoryDatabase());
    await expect(openState({ path: '/nonexistent/bpavl', backend } as unknown as Parameters<typeof openState>[0])).rejects.toThrow(TypeError);
    for (const none of [undefined, null, 'dir']) await expect(openState(none as unknown as Parameters<typeof openState>[0])).rejects.toThrow(/options object/);
    await expect(openState({ path: '/nonexistent/bpavl', readOnly: 'yes' } as unknown as Parameters<typeof openState>[0])).rejects.toThrow(TypeError);
    await backend.close();
  });

  it('a prune given keepLast and before together, or neither, or bad numbers, is a RangeError and prunes nothing', async () => {
    const { state, first } = await sample();
    await state.put(key(1), value(1, 2));
    await state.commit();
    for (const options of [{ keepLast: 1, before: 2 }, {}, { keepLast: 0 }, { keepLast: 1.5 }, { before: -1 }, { before: '2' }]) {
      await expect(state.prune(options as PruneOptions)).rejects.toThrow(RangeError);
    }
    expect(state.versions().map((v) => v.version)).toEqual([first.version, first.version + 1]);
  });

  it('oversize keys and values are refused by code', async () => {
    const { state, first } = await sample();
    for (const [k, v, code] of [
      [new Uint8Array(1025), new Uint8Array(1), 'KEY_TOO_LONG'],
      [new Uint8Array(), new Uint8Array(1), 'KEY_EMPTY'],
      [new Uint8Array(1), new Uint8Array(65537), 'VALUE_TOO_LONG'],
    ] as const) {
      await expect(state.put(k, v)).rejects.toThrow(expect.objectContaining({ code }));
    }
    const again = await state.commit();
    expect(hex(again.root)).toBe(hex(first.root));
  });

  it('reads and deletes of a key no tree holds are refused by code, not answered "absent"', async () => {
    const { state, first } = await sample();
    const empty = await inMemory().open({ capacity: 4 });
    for (const [k, code] of [
      [new Uint8Array(1025), 'KEY_TOO_LONG'],
      [new Uint8Array(), 'KEY_EMPTY'],
    ] as const) {
      const refused = expect.objectContaining({ name: 'TreeError', code });
      await expect(state.get(k)).rejects.toThrow(refused);
      await expect(empty.get(k)).rejects.toThrow(refused);
      await expect(state.get(k, { version: first.version })).rejects.toThrow(refused);
      await expect(state.has(k)).rejects.toThrow(refused);
      await expect(state.getMany([key(1), k])).rejects.toThrow(refused);
      await expect(state.delete(k)).rejects.toThrow(refused);
      // As putMany: the deletes before the refused key stay in the batch, none after it.
      await expect(state.deleteMany([key(2), k, key(3)])).rejects.toThrow(refused);
    }
    const next = await state.commit();
    expect(await state.get(key(2), { version: next.version })).toBeUndefined();
    expect(await state.get(key(3), { version: next.version })).toEqual(value(3, 1));
  });

  it('a version that is no number is a TypeError, not an unknown version', async () => {
    const { state, first } = await sample();
    for (const at of [{ version: String(first.version) }, { version: BigInt(first.version) }]) {
      await expect(state.get(key(1), at as unknown as { version: number })).rejects.toThrow(TypeError);
      await expect(state.proveExistence(key(1), at as unknown as { version: number })).rejects.toThrow(TypeError);
      await expect(state.rollback(at.version as unknown as number)).rejects.toThrow(TypeError);
    }
    // A number no commit made is an unknown version.
    await expect(state.get(key(1), { version: first.version + 0.5 })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
  });

  it('a putMany entry without its value is a TypeError, never a delete', async () => {
    const { state } = await sample();
    await expect(state.putMany([[key(4), value(4, 2)], [key(5)] as unknown as [Uint8Array, Uint8Array]])).rejects.toThrow(TypeError);
    const next = await state.commit();
    expect(await state.get(key(4), { version: next.version })).toEqual(value(4, 2));
    expect(await state.get(key(5), { version: next.version })).toEqual(value(5, 1));
  });

  // Layout 1 had no layout byte in its store record (chunks without group nodes); layout 2 kept keys in
  // entry records; layout 3 held no values in chunk records.
  for (const [layout, record] of [[1, [0x06, 0x04]], [2, [0x06, 0x04, 0x02]], [3, [0x06, 0x04, 0x03]]] as const) {
    it(`a store of layout ${layout} is refused at open`, async () => {
      const { place, state } = await sample();
      await state.close();
      const meta = place.database.table('meta');
      const storeKey = new TextEncoder().encode('store');
      expect(meta.getElementByKey(storeKey)).toEqual(Uint8Array.of(0x06, 0x04, 0x04));
      meta.setElement(storeKey, Uint8Array.from(record));
      await expect(place.open()).rejects.toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
      await expect(place.open({ readOnly: true })).rejects.toMatchObject({ code: 'STORE_CORRUPT' });
    });
  }

  it('a version key that is not 8 bytes is STORE_CORRUPT at open', async () => {
    const { place, state } = await sample();
    await state.close();
    place.database.table('versions').setElement(Uint8Array.of(0, 0, 1), Uint8Array.of(0x07));
    await expect(place.open()).rejects.toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
    await expect(place.open({ readOnly: true })).rejects.toMatchObject({ code: 'STORE_CORRUPT' });
  });

  it('an unknown version is VERSION_UNKNOWN', async () => {
    const { state } = await sample();
    await expect(state.get(key(1), { version: 9 })).rejects.toMatchObject({ name: 'StoreError', code: 'VERSION_UNKNOWN' });
    await expect(state.rollback(9)).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
    expect(state.versions().map((v) => v.version)).toEqual([1]);
  });

  it('a closed store is STORE_CLOSED', async () => {
    const { state } = await sample();
    await state.close();
    await expect(state.put(key(1), value(1, 1))).rejects.toThrow(StoreError);
    expect(() => state.versions()).toThrow(expect.objectContaining({ code: 'STORE_CLOSED' }));
    await expect(state.get(key(1))).rejects.toMatchObject({ code: 'STORE_CLOSED' });
  });

  it('a read-only open reads every version and refuses writes', async () => {
    const { place, state } = await sample();
    await state.close();
    const reader = await place.open({ readOnly: true });
    expect(await reader.get(key(3))).toEqual(value(3, 1));
    await expect(reader.put(key(1), value(1, 2))).rejects.toThrow(expect.objectContaining({ code: 'STORE_READ_ONLY' }));
    await reader.close();
  });

  it('a failed commit leaves the store at its last version', async () => {
    const { place, state, first } = await sample();
    await state.put(key(50), value(50, 2));
    await state.close();
    const backend = memoryBackend(place.database);
    const failing = await openState({ backend });
    await failing.put(key(51), value(51, 3));
    backend.write = async () => {
      throw Object.assign(new Error('disk full'), { code: 'STORE_IO' });
    };
    await expect(failing.commit()).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(failing.head()?.version).toBe(first.version);
    expect(await failing.get(key(51))).toBeUndefined();
  });
});

describe('corruption is STORE_CORRUPT on the read that touches it', () => {
  async function stored() {
    const place = inMemory();
    const state = await place.open({ capacity: 4 });
    for (let k = 0; k < 40; k++) await state.put(key(k), value(k, 1));
    await state.commit();
    for (let k = 0; k < 40; k += 5) await state.put(key(k), value(k, 2));
    await state.commit();
    await state.close();
    return place;
  }

  /** Opens the store and loads every retained version, closing it after. */
  async function readAll(place: Place) {
    const s = await place.open();
    try {
      for (const { version } of s.versions()) await s.snapshot({ version });
    } finally {
      await s.close();
    }
  }

  it.each(['nodes', 'chunks', 'entries'])('a flipped byte in a record of %s', async (table) => {
    const place = await stored();
    for (const [i, [, v]] of records(place.database, table).entries()) {
      if (i % 3 !== 0) continue;
      const at = (i * 7) % v.length;
      v[at]! ^= 0x10;
      // Every retained version either reads its true contents or fails with STORE_CORRUPT.
      await readAll(place).catch((e) => expect(e).toMatchObject({ code: 'STORE_CORRUPT' }));
      v[at]! ^= 0x10;
    }
  });

  it('a removed chunk', async () => {
    const place = await stored();
    const [[first]] = records(place.database, 'chunks');
    place.database.table('chunks').eraseElementByKey(first!);
    await expect(readAll(place)).rejects.toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
  });
});

/**
 * `writes` (then a commit) on a store of C = 4 with a cache of nothing
 * (`true`: every write fetches its chunks) and on one that keeps them: the
 * tree's shape depends on the order of writes, so equal roots mean the
 * same writes in the same order.
 */
async function expectSameRoots(writes: (state: State, paged: boolean) => Promise<void>): Promise<void> {
  const root = async (place: Place, paged: boolean): Promise<Uint8Array> => {
    const state = await place.open({ capacity: 4, ...(paged && { cacheBytes: 0 }) });
    try {
      await writes(state, paged);
      return (await state.commit()).root;
    } finally {
      await state.close();
      place.remove();
    }
  };
  expect(await root(inMemory(), true)).toEqual(await root(inMemory(), false));
}

/**
 * A memory backend on `place` that notes, per write, whether it holds a
 * version record (`writes`); `write` is its own write, to wrap it again.
 */
function countedWrites(place: ReturnType<typeof inMemory>) {
  const backend = memoryBackend(place.database);
  const writes: boolean[] = [];
  const write = backend.write.bind(backend);
  backend.write = async (batch) => {
    writes.push((batch.puts ?? []).some(([table]) => table === 'versions'));
    return write(batch);
  };
  return { backend, writes, write };
}

describe('the paged head', () => {
  it('holds at most cacheBytes of chunks after each commit, and loads what each write changes', async () => {
    const cacheBytes = 30_000;
    const place = inMemory();
    let state = await place.open({ capacity: 8, cacheBytes });
    const model: Model = new Map();
    const pick = rng(21);
    let loadedBeyond = 0;
    for (let v = 0; v < 12; v++) {
      if (v % 4 === 3) {
        await state.close();
        state = await place.open({ cacheBytes });
      }
      for (let i = 0; i < 150; i++) {
        const k = pick(900);
        if (pick(4) === 0) {
          expect(await state.delete(key(k))).toBe(model.delete(hex(key(k))));
        } else {
          await state.put(key(k), value(k, v));
          model.set(hex(key(k)), value(k, v));
        }
      }
      if ((await state.stats()).headChunkBytes > cacheBytes) loadedBeyond++;
      await state.commit();
      expect((await state.stats()).headChunkBytes).toBeLessThanOrEqual(cacheBytes);
    }
    // A batch of 150 writes in about 100 chunks holds more than the budget until it commits.
    expect(loadedBeyond).toBeGreaterThan(0);
    const entries: [string, string][] = [];
    for await (const [k, v] of state.range(undefined)) entries.push([hex(k), hex(v)]);
    expect(entries).toEqual([...model].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, hex(v)]));
    await state.close();
    place.remove();
  });

  it('writes a batch larger than the cache ahead in pieces; a failure on the way leaves the store as it was', async () => {
    // 3,000 values of 1,000 bytes: about 3 MB of changed chunks against pieces of 1 MiB.
    const big = (k: number, seed: number) => new Uint8Array(1_000).fill(k + seed);
    const place = inMemory();
    const { backend, writes, write } = countedWrites(place);
    const state = await openState({ backend, capacity: 16, cacheBytes: 0 });
    await state.putMany(Array.from({ length: 3_000 }, (_, k) => [key(k), big(k, 1)] as const));
    writes.length = 0;
    const first = await state.commit();
    // Pieces first; the version record in the last write only.
    expect(writes.length).toBeGreaterThanOrEqual(3);
    expect(writes.map((hasVersion, i) => hasVersion === (i === writes.length - 1))).not.toContain(false);
    // The next batch fails at its second piece: nothing born after version 1 stays.
    await state.putMany(Array.from({ length: 3_000 }, (_, k) => [key(k), big(k, 2)] as const));
    let calls = 0;
    backend.write = async (batch) => {
      if (++calls === 2) throw Object.assign(new Error('disk full'), { code: 'STORE_IO' });
      return write(batch);
    };
    await expect(state.commit()).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(calls).toBeGreaterThan(2);
    expect(state.head()?.version).toBe(first.version);
    for (const table of ['nodes', 'chunks', 'entries', 'stale']) {
      expect(records(place.database, table).filter(([k]) => k[7]! > first.version)).toEqual([]);
    }
    await state.close();
    const reopened = await place.open();
    expect(reopened.versions().map((v) => v.version)).toEqual([first.version]);
    for (let k = 0; k < 3_000; k += 97) {
      const { value: got } = await reopened.proveExistence(key(k));
      expect(got).toEqual(big(k, 1));
    }
    expect((await reopened.stats()).entryCount).toBe(3_000);
    await reopened.close();
  });

  it('holds a batch of any size within batchBytes, writing changed chunks ahead between writes; a failed piece or commit drops the batch and what it wrote', async () => {
    // 3,000 values of 1,000 bytes (about 3.4 MB of chunks) against a bound of 400 kB.
    const big = (k: number, seed: number) => new Uint8Array(1_000).fill(k + seed);
    const batchBytes = 400_000;
    const place = inMemory();
    const { backend, writes, write } = countedWrites(place);
    const state = await openState({ backend, capacity: 16, cacheBytes: 100_000, batchBytes });
    let model: Model = new Map();
    const putAll = async (from: number, to: number, seed: number) => {
      for (let at = from; at < to; at += 100) {
        const slice = Array.from({ length: Math.min(100, to - at) }, (_, i) => [key(at + i), big(at + i, seed)] as const);
        await state.putMany(slice);
        for (const [k, v] of slice) model.set(hex(k), v);
        expect((await state.stats()).headChunkBytes).toBeLessThanOrEqual(batchBytes);
      }
    };
    await putAll(0, 3_000, 1);
    // The same batch writes keys again: new values, deletes, and back to the first values.
    await putAll(0, 1_500, 2);
    await state.deleteMany(Array.from({ length: 500 }, (_, i) => key(1_500 + i)));
    for (let k = 1_500; k < 2_000; k++) model.delete(hex(key(k)));
    await putAll(0, 500, 1);
    expect(writes.length).toBeGreaterThan(5);
    expect(writes).not.toContain(true);
    const first = await state.commit();
    const check = async (s: State) => {
      expect((await s.stats()).entryCount).toBe(model.size);
      for (let k = 0; k < 3_000; k += 7) {
        expect(hex((await s.get(key(k))) ?? undefined), `key ${k}`).toBe(hex(model.get(hex(key(k)))));
      }
      const entries: [string, string][] = [];
      for await (const [k, v] of s.range(undefined)) entries.push([hex(k), hex(v)]);
      expect(entries).toEqual([...model].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, hex(v)]));
    };
    await check(state);
    // The next batch fails at its second piece: the batch is dropped, and nothing born after version 1 stays.
    let calls = 0;
    backend.write = async (batch) => {
      if (++calls === 2) throw Object.assign(new Error('disk full'), { code: 'STORE_IO' });
      return write(batch);
    };
    const committed = new Map(model);
    await expect(putAll(0, 3_000, 3)).rejects.toMatchObject({ code: 'STORE_IO' });
    model = committed;
    for (const table of ['nodes', 'chunks', 'entries', 'stale']) {
      expect(records(place.database, table).filter(([k]) => k[7]! > first.version)).toEqual([]);
    }
    expect(state.head()?.version).toBe(first.version);
    await check(state);
    // A commit whose batch wrote ahead fails reading the slot keys its last writes relied on: the same.
    backend.write = write;
    const stored = new Map(model);
    await putAll(0, 3_000, 4);
    await state.put(key(0), big(0, 5));
    const getMany = backend.getMany.bind(backend);
    backend.getMany = async () => {
      throw Object.assign(new Error('disk gone'), { code: 'STORE_IO' });
    };
    await expect(state.commit()).rejects.toMatchObject({ code: 'STORE_IO' });
    backend.getMany = getMany;
    model = stored;
    for (const table of ['nodes', 'chunks', 'entries', 'stale']) {
      expect(records(place.database, table).filter(([k]) => k[7]! > first.version)).toEqual([]);
    }
    await check(state);
    await state.close();
    const reopened = await place.open();
    await check(reopened);
    await reopened.close();
    place.remove();
  }, 30_000); // 2.7 s alone; beside other suites it once passed 5 s

  it('counts the chunks writes load against batchBytes as they land: one putMany of random keys, or a run of puts, holds at most its bound and a round of chunks', async () => {
    const place = inMemory();
    const setup = await place.open({ capacity: 16 });
    const model: Model = new Map();
    const entries = Array.from({ length: 6_000 }, (_, k) => [key(k), value(k, 1)] as const);
    await setup.putMany(entries);
    for (const [k, v] of entries) model.set(hex(k), v);
    await setup.commit();
    await setup.close();
    // What one loaded chunk counts, changed by a write.
    const one = await place.open({ cacheBytes: 0 });
    await one.put(key(3_000), value(3_000, 2));
    const chunkBytes = (await one.stats()).headChunkBytes;
    await one.close();
    // A bound of about 20 of the state's 500 or so chunks (at most 16 entries each).
    const batchBytes = 20 * chunkBytes;
    /** A state under the bound, and the most its head held before any read of its writes. */
    const watched = async () => {
      const backend = memoryBackend(place.database);
      const state = await openState({ backend, cacheBytes: 0, batchBytes });
      const seen = { peak: 0 };
      const getMany = backend.getMany.bind(backend);
      backend.getMany = async (table, keys) => {
        // What the head holds after the reads and writes so far (a check reads the slot keys first).
        // Not while the head loads its nodes: the stats wait for that load.
        if (table !== 'nodes') seen.peak = Math.max(seen.peak, (await state.stats()).headChunkBytes);
        return getMany(table, keys);
      };
      return { state, seen };
    };
    const pick = rng(33);
    const random = (count: number, seed: number) =>
      Array.from({ length: count }, () => {
        const k = pick(6_000);
        return [key(k), value(k, seed)] as const;
      });
    const check = async (state: State) => {
      const keys = Array.from({ length: 6_000 }, (_, k) => key(k));
      expect((await state.getMany(keys)).map((v) => hex(v))).toEqual(keys.map((k) => hex(model.get(hex(k)))));
    };

    // 3,000 random updates in one call: a round fetches the chunks of 64 writes (each write's chunk, and the next one for a key past a chunk's end).
    const many = await watched();
    const updates = random(3_000, 2);
    await many.state.putMany(updates);
    for (const [k, v] of updates) model.set(hex(k), v);
    expect(many.seen.peak).toBeGreaterThan(batchBytes);
    expect(many.seen.peak).toBeLessThanOrEqual(batchBytes + 2 * 64 * chunkBytes);
    await many.state.commit();
    await check(many.state);
    await many.state.close();

    // 1,000 single random puts, fewer than the writes between two counts: each one's loads count at once.
    const single = await watched();
    for (const [k, v] of random(1_000, 3)) {
      await single.state.put(k, v);
      model.set(hex(k), v);
    }
    expect(single.seen.peak).toBeGreaterThan(batchBytes);
    expect(single.seen.peak).toBeLessThanOrEqual(batchBytes + 4 * chunkBytes);
    await single.state.commit();
    await check(single.state);
    await single.state.close();
  }, 30_000);

  it('a write of a key read before confirms its slot from the value read, not from its entry record', async () => {
    /** The writes below and their commit on a reopened state; the entry records they read, by key. */
    const run = async (valueCacheBytes: number): Promise<string[]> => {
      const place = inMemory();
      const setup = await place.open({ capacity: 16 });
      await setup.putMany(Array.from({ length: 400 }, (_, k) => [key(k), value(k, 1)] as const));
      await setup.commit();
      await setup.close();
      const backend = memoryBackend(place.database);
      const state = await openState({ backend, cacheBytes: 0, valueCacheBytes });
      expect(await state.get(key(10))).toEqual(value(10, 1));
      expect(await state.getMany([key(200)])).toEqual([value(200, 1)]);
      expect(await state.has(key(300))).toBe(true);
      const read: string[] = [];
      const getMany = backend.getMany.bind(backend);
      backend.getMany = async (table, keys) => {
        if (table === 'entries') read.push(...keys.map(hex));
        return getMany(table, keys);
      };
      await state.put(key(10), value(10, 2));
      await state.putMany([[key(200), value(200, 2)]]);
      expect(await state.delete(key(300))).toBe(true);
      // Not read before: its entry record confirms its slot.
      await state.put(key(100), value(100, 2));
      await state.commit();
      backend.getMany = getMany;
      expect(await state.getMany([key(10), key(200), key(300), key(100)])).toEqual([value(10, 2), value(200, 2), undefined, value(100, 2)]);
      await state.close();
      return read;
    };
    expect(await run(1 << 20)).toHaveLength(1);
    // Nothing read is kept: every slot is confirmed by its entry record.
    expect(await run(0)).toHaveLength(4);
  });

  it('applies writes called at once in the order they were called', async () => {
    // The same writes and commits, called at once and one after another.
    const run = async (state: State, atOnce: boolean): Promise<void> => {
      const calls: (() => Promise<unknown>)[] = [];
      for (let k = 0; k < 300; k++) calls.push(() => state.put(key(k), value(k, 1)));
      calls.push(() => state.commit());
      for (let k = 0; k < 300; k++) {
        calls.push(k % 3 === 0 ? () => state.delete(key(k)) : () => state.put(key(k), value(k, 2)));
        if (k % 50 === 49) calls.push(() => state.commit());
      }
      calls.push(() => state.put(key(0), value(0, 3)));
      if (atOnce) await Promise.all(calls.map((call) => call()));
      else for (const call of calls) await call();
    };
    await expectSameRoots(run);
  });
});

describe('putMany and deleteMany', () => {
  it('apply their writes in order, as puts and deletes one at a time do, with every chunk fetched ahead', async () => {
    const pick = rng(31);
    const batches = Array.from({ length: 8 }, (_, v) => Array.from({ length: 120 }, () => [pick(400), pick(3) === 0] as const).map(([k, del]) => ({ k, del, v })));
    const run = async (state: State, many: boolean): Promise<void> => {
      for (const batch of batches) {
        // Runs of puts and of deletes, each run in one call when `many`.
        for (let at = 0; at < batch.length; ) {
          let end = at;
          while (end < batch.length && batch[end]!.del === batch[at]!.del) end++;
          const run = batch.slice(at, end);
          if (!many) for (const { k, del, v } of run) await (del ? state.delete(key(k)) : state.put(key(k), value(k, v)));
          else if (run[0]!.del) await state.deleteMany(run.map(({ k }) => key(k)));
          else await state.putMany(run.map(({ k, v }) => [key(k), value(k, v)] as const));
          at = end;
        }
        await state.commit();
      }
    };
    await expectSameRoots(run);
  });

  it('stop at a refused entry: those before it are written, none after it', async () => {
    const place = inMemory();
    const state = await place.open({ capacity: 4 });
    const tooLong = new Uint8Array(1025);
    await expect(state.putMany([[key(1), value(1, 1)], [tooLong, value(2, 1)], [key(3), value(3, 1)]])).rejects.toMatchObject({ code: 'KEY_TOO_LONG' });
    await state.commit();
    expect(await state.get(key(1))).toEqual(value(1, 1));
    expect(await state.get(key(3))).toBeUndefined();
    await state.close();
    place.remove();
  });
});

describe('the value cache', () => {
  /** A state of `versions` commits of keys 0 … 199 (each commit rewrites every third key from its own). */
  async function written(versions: number, valueCacheBytes?: number): Promise<{ state: State; models: Model[] }> {
    const state = await inMemory().open({ capacity: 4, ...(valueCacheBytes !== undefined && { valueCacheBytes }) });
    const models: Model[] = [];
    const model: Model = new Map();
    for (let v = 0; v < versions; v++) {
      for (let k = v; k < 200; k += 3) {
        await state.put(key(k), value(k, v));
        model.set(hex(key(k)), value(k, v));
      }
      await state.commit();
      models.push(new Map(model));
    }
    return { state, models };
  }

  it('answers a second read of the head from memory, within valueCacheBytes counted per answer', async () => {
    const valueCacheBytes = 20 * (3 + 40 + 320);
    const { state, models } = await written(2, valueCacheBytes);
    const head = models[1]!;
    for (const pass of [0, 1]) {
      for (let k = 0; k < 20; k++) expect(await state.get(key(k))).toEqual(head.get(hex(key(k))));
      const stats = await state.stats();
      expect(stats.valueCacheHits).toBe(pass * 20);
      expect(stats.cachedValueBytes).toBeLessThanOrEqual(valueCacheBytes);
    }
    // Older versions are read from their records.
    for (let k = 0; k < 20; k++) expect(await state.get(key(k), { version: 1 })).toEqual(models[0]!.get(hex(key(k))));
    expect((await state.stats()).valueCacheHits).toBe(20);
    // Past its budget the least recently used answers go, and the rest still hit.
    for (let k = 20; k < 200; k++) await state.get(key(k));
    expect((await state.stats()).cachedValueBytes).toBeLessThanOrEqual(valueCacheBytes);
    const before = (await state.stats()).valueCacheHits;
    expect(await state.get(key(199))).toEqual(head.get(hex(key(199))));
    expect(await state.get(key(0))).toEqual(head.get(hex(key(0))));
    expect((await state.stats()).valueCacheHits).toBe(before + 1);
    await state.close();
  });

  it('keeps absent keys and proved values, and hands out copies', async () => {
    const { state } = await written(1);
    const absent = key(500);
    expect(await state.get(absent)).toBeUndefined();
    expect(await state.has(absent)).toBe(false);
    const proved = await state.proveExistence(key(3));
    const hits = (await state.stats()).valueCacheHits;
    const got = (await state.get(key(3)))!;
    expect(got).toEqual(proved.value);
    // Copies are cut from shared buffers: filling one must touch nothing else.
    await state.get(key(6));
    const next = (await state.get(key(6)))!;
    got.fill(0xee);
    expect(next).toEqual(value(6, 0));
    expect(await state.get(key(3))).toEqual(value(3, 0));
    expect((await state.stats()).valueCacheHits).toBe(hits + 3);
    // A root handed out is a copy too: the state's own is what its reads compare against.
    const root = state.head()!.root.slice();
    state.head()!.root.fill(0);
    state.versions()[0]!.root.fill(0);
    expect(state.head()!.root).toEqual(root);
    expect(await state.get(key(3))).toEqual(value(3, 0));
    expect((await state.stats()).valueCacheHits).toBe(hits + 4);
    await state.close();
  });

  it('drops what a commit wrote, keeps the rest, and is never read at another root', async () => {
    const { state, models } = await written(3);
    for (let k = 0; k < 30; k++) await state.get(key(k));
    await state.put(key(1), value(1, 9));
    await state.delete(key(2));
    await state.putMany([[key(4), value(4, 9)]]);
    await state.deleteMany([key(5)]);
    await state.commit();
    expect(await state.get(key(1))).toEqual(value(1, 9));
    expect(await state.get(key(2))).toBeUndefined();
    expect(await state.get(key(4))).toEqual(value(4, 9));
    expect(await state.get(key(5))).toBeUndefined();
    const hits = (await state.stats()).valueCacheHits;
    expect(await state.get(key(6))).toEqual(models[2]!.get(hex(key(6))));
    expect((await state.stats()).valueCacheHits).toBe(hits + 1);
    // Back to version 2: the answers of version 4 (the head until now) are not its.
    await state.rollback(2);
    for (let k = 0; k < 30; k++) expect(await state.get(key(k))).toEqual(models[1]!.get(hex(key(k))));
    expect((await state.stats()).valueCacheHits).toBe(hits + 1);
    await state.close();
  });

  it('drops every answer at the commit of a batch that wrote more keys than it holds answers', async () => {
    const { state, models } = await written(3);
    for (let k = 0; k < 5; k++) await state.get(key(k));
    // Six keys written against five answers: the commit lists none of them and drops all five.
    await state.putMany([0, 10, 11, 12, 13, 14].map((k) => [key(k), value(k, 9)] as const));
    await state.commit();
    const hits = (await state.stats()).valueCacheHits;
    expect(await state.get(key(0))).toEqual(value(0, 9));
    for (let k = 1; k < 5; k++) expect(await state.get(key(k))).toEqual(models[2]!.get(hex(key(k))));
    expect((await state.stats()).valueCacheHits).toBe(hits);
    // The next batch, smaller than what the cache holds, is listed key by key again.
    await state.put(key(1), value(1, 10));
    await state.commit();
    expect(await state.get(key(1))).toEqual(value(1, 10));
    expect(await state.get(key(2))).toEqual(models[2]!.get(hex(key(2))));
    expect((await state.stats()).valueCacheHits).toBe(hits + 1);
    await state.close();
  });

  it('refuses a budget that is not a non-negative integer', async () => {
    for (const valueCacheBytes of [-1, 1.5, Number.NaN]) {
      await expect(inMemory().open({ valueCacheBytes })).rejects.toThrow(RangeError);
    }
  });
});

describe('paged reads of old versions', () => {
  it('keep the cached chunk bytes within cacheBytes, counted from their contents', async () => {
    const cacheBytes = 20_000;
    const state = await inMemory().open({ capacity: 8, cacheBytes });
    const models: Model[] = [];
    const model: Model = new Map();
    for (let v = 0; v < 5; v++) {
      for (let k = v; k < 600; k += 3) {
        await state.put(key(k), value(k, v));
        model.set(hex(key(k)), value(k, v));
      }
      await state.commit();
      models.push(new Map(model));
    }
    const pick = rng(11);
    for (let i = 0; i < 400; i++) {
      const version = 1 + pick(4);
      const k = pick(620);
      expect(await state.get(key(k), { version })).toEqual(models[version - 1]!.get(hex(key(k))));
      expect((await state.stats()).cachedChunkBytes).toBeLessThanOrEqual(cacheBytes);
    }
    const stats = await state.stats();
    expect(stats.cacheMisses).toBeGreaterThan(0);
    expect(stats.cacheHits).toBeGreaterThan(0);
    await state.close();
  });

  it('getMany answers in the order asked, loading each chunk once for the keys it holds', async () => {
    // Keys of 1,000 bytes, so that the smallest cache holds about one chunk.
    const key = (k: number) => new Uint8Array(1000).fill(0x6b).fill(k >> 8, 0, 1).fill(k & 0xff, 1, 2);
    const state = await inMemory().open({ capacity: 8, cacheBytes: 0, valueCacheBytes: 0 });
    for (let k = 0; k < 400; k += 2) await state.put(key(k), value(k, 1));
    await state.commit();
    for (let k = 0; k < 400; k += 4) await state.delete(key(k));
    await state.commit();
    // Every key of the domain, present or not, in a shuffled order, some twice.
    const pick = rng(5);
    const order = Array.from({ length: 400 }, (_, k) => k);
    for (let i = order.length - 1; i > 0; i--) {
      const j = pick(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    order.push(order[7]!, order[300]!);
    const asked = order.map(key);
    const one = async (version: number) => {
      const values = [];
      for (const k of asked) values.push(await state.get(k, { version }));
      return values;
    };
    for (const version of [1, 2]) {
      const before = (await state.stats()).cacheMisses;
      const alone = await one(version);
      const missesAlone = (await state.stats()).cacheMisses - before;
      const many = await state.getMany(asked, { version });
      const missesMany = (await state.stats()).cacheMisses - before - missesAlone;
      expect(many).toEqual(alone);
      const present = (k: number) => k % 2 === 0 && (version === 1 || k % 4 !== 0);
      expect(many).toEqual(order.map((k) => (present(k) ? value(k, 1) : undefined)));
      // A cache of one chunk: one miss a chunk in key order, one a key or so out of it.
      const { chunkCount } = state.versions()[version - 1]!;
      expect(missesMany).toBeLessThanOrEqual(chunkCount);
      expect(missesAlone).toBeGreaterThan(4 * chunkCount);
    }
    expect(await state.getMany([])).toEqual([]);
    await expect(state.getMany(5 as never)).rejects.toThrow(TypeError);
    await expect(state.getMany([5 as never])).rejects.toThrow(TypeError);
    await expect(state.getMany([key(1)], { version: 9 })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
    await state.close();
    await expect(state.getMany([key(1)])).rejects.toMatchObject({ code: 'STORE_CLOSED' });
  });

  it('answer questions asked at once (as a server does) with a cache of two chunks, each as if asked alone', async () => {
    const state = await inMemory().open({ capacity: 4, cacheBytes: 0 });
    for (let v = 0; v < 3; v++) {
      for (let k = v; k < 300; k += 2) await state.put(key(k), value(k, v));
      await state.commit();
    }
    const snapshots = await Promise.all([1, 2, 3].map((version) => state.loadSnapshot(version)));
    const asked: Promise<void>[] = [];
    for (let i = 0; i < 120; i++) {
      const version = 1 + (i % 3);
      const snapshot = snapshots[version - 1]!;
      const index = (i * 7) % snapshot.chunkCount;
      const k = key((i * 13) % 310);
      asked.push(
        (async () => {
          expect(await state.exportChunk(index, { version })).toEqual(snapshot.exportChunk(index));
          expect(await state.proveRange(k, undefined, 9, { version })).toEqual(snapshot.proveRange(k, undefined, 9));
          if (snapshot.get(k) === undefined) expect(await state.proveAbsence(k, { version })).toEqual(snapshot.proveAbsence(k));
          else expect((await state.proveExistence(k, { version })).proof).toEqual(snapshot.proveExistence(k));
        })(),
      );
    }
    await Promise.all(asked);
    // A close waits for the questions already asked; later ones are STORE_CLOSED.
    const before = state.exportChunk(0, { version: 1 });
    await state.close();
    expect(await before).toEqual(snapshots[0]!.exportChunk(0));
    await expect(state.exportChunk(0, { version: 1 })).rejects.toMatchObject({ code: 'STORE_CLOSED' });
    for (const s of snapshots) s.free();
  });
});
