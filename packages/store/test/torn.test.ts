// Crash safety by ordering (docs/store.md): a process that dies stops
// between two atomic writes of the backend. Here the backend "dies" at its
// n-th write (that write and every later one are lost), for every n of a
// commit, a prune and a rollback; the reopened store must then hold either
// the versions from before the operation or those after it, each reading
// exactly its model, and the next prune must leave no garbage behind. So
// must a sync as the next version (a catch-up's whole-chunk fallback),
// killed at each of its writes and then resumed. The SIGKILL test of a
// real database is crash.test.ts.
import { init, verifyChunk } from '@bpavl/wasm';
import { describe, expect, it } from 'vitest';
import type { MemoryDatabase } from '../../storage/src/memory.ts';
import type { StorageBackend } from '../../storage/src/port.ts';
import { openState, type State } from '../src/index.ts';
import { copyDatabase, inMemory, memoryBackend } from './support/places.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const key = (k: number) => new Uint8Array([k >> 8, k & 0xff, 7]);
const value = (k: number, v: number) => new Uint8Array(12).fill(k ^ v);

type Models = Map<number, Map<string, string>>;

/** A backend whose writes from the `dieAt`-th on are lost, as if the process had been killed. */
function dying(data: MemoryDatabase, dieAt: number): StorageBackend {
  const backend = memoryBackend(data);
  const write = backend.write.bind(backend);
  let writes = 0;
  backend.write = async (batch) => {
    if (++writes >= dieAt) throw Object.assign(new Error('killed'), { code: 'KILLED' });
    return write(batch);
  };
  return backend;
}

/** Ten versions of 3 chunk-crossing updates each, at C = 3. */
async function history(): Promise<{ data: MemoryDatabase; models: Models }> {
  const { database: data, open } = inMemory();
  const state = await open({ capacity: 3 });
  const model = new Map<string, string>();
  const models: Models = new Map();
  for (let v = 1; v <= 10; v++) {
    for (let i = 0; i < 12; i++) {
      const k = (v * 7 + i * 5) % 40;
      if ((v + i) % 4 === 0) {
        await state.delete(key(k));
        model.delete(hex(key(k)));
      } else {
        await state.put(key(k), value(k, v));
        model.set(hex(key(k)), hex(value(k, v)));
      }
    }
    const { version } = await state.commit();
    models.set(version, new Map(model));
  }
  await state.close();
  return { data, models };
}

/** The store on `data` holds one of the `allowed` lists of versions, each reading exactly its model; then it is pruned to its head. */
async function expectModels(data: MemoryDatabase, models: Models, allowed: number[][]): Promise<number> {
  const state: State = await openState({ backend: memoryBackend(data) });
  const versions = state.versions().map((v) => v.version);
  expect(allowed.map((a) => a.join())).toContain(versions.join());
  for (const version of versions) {
    const snapshot = await state.snapshot({ version });
    const model = models.get(version)!;
    expect(snapshot.len).toBe(model.size);
    for (const [k, v] of model) expect(hex(snapshot.get(Buffer.from(k, 'hex'))!)).toBe(v);
  }
  // Pruning to the head afterwards reclaims everything older, torn leftovers included.
  await state.prune({ keepLast: 1 });
  await state.close();
  expect(data.table('stale').size()).toBe(0);
  return versions.at(-1)!;
}

async function expectVersions(data: MemoryDatabase, models: Models, allowed: number[][]) {
  const head = await expectModels(data, models, allowed);
  const count = (db: MemoryDatabase) => ['nodes', 'chunks', 'entries'].reduce((n, t) => n + db.table(t).size(), 0);
  const alone = inMemory();
  const fresh = await alone.open({ capacity: 3 });
  for (const [k, v] of models.get(head)!) await fresh.put(Buffer.from(k, 'hex'), Buffer.from(v, 'hex'));
  await fresh.commit();
  await fresh.close();
  // Deltas keep their bases, so a pruned store may hold a few more chunk records than a fresh one.
  expect(count(data)).toBeGreaterThanOrEqual(count(alone.database));
  expect(count(data)).toBeLessThanOrEqual(2 * count(alone.database));
}

const before = [...Array(10).keys()].map((i) => i + 1);

describe('a store killed between writes reopens at a whole version', () => {
  it('commit', async () => {
    const { data, models } = await history();
    for (let dieAt = 1; dieAt <= 2; dieAt++) {
      const torn = copyDatabase(data);
      const state = await openState({ backend: dying(torn, dieAt) });
      await state.put(key(1), value(1, 99));
      await state.commit().catch((e) => expect(e.code).toBe('KILLED'));
      await state.close();
      await expectVersions(torn, new Map([...models, [11, new Map([...models.get(10)!, [hex(key(1)), hex(value(1, 99))]])]]), [before, [...before, 11]]);
    }
  });

  it('prune', async () => {
    const { data, models } = await history();
    for (let dieAt = 1; dieAt <= 4; dieAt++) {
      const torn = copyDatabase(data);
      const state = await openState({ backend: dying(torn, dieAt) });
      await state.prune({ keepLast: 3 }).catch((e) => expect(e.code).toBe('KILLED'));
      await state.close();
      await expectVersions(torn, models, [before, [8, 9, 10]]);
    }
  });

  it('rollback', async () => {
    const { data, models } = await history();
    for (let dieAt = 1; dieAt <= 6; dieAt++) {
      const torn = copyDatabase(data);
      const state = await openState({ backend: dying(torn, dieAt) });
      await state.rollback(4).catch((e) => expect(e.code).toBe('KILLED'));
      await state.close();
      await expectVersions(torn, models, [before, [1, 2, 3, 4]]);
    }
  });
});

describe('a sync as the next version, killed between writes', () => {
  it('reopens at the old head with the sync pending; its resume ends at the new root, exact, leaving no garbage', async () => {
    await init();
    const { data, models } = await history();
    // The chain's next state: a copy of the store moved on by a commit; its chunk envelopes are what peers serve.
    const ahead = copyDatabase(data);
    const moved = await openState({ backend: memoryBackend(ahead) });
    const next = new Map(models.get(10)!);
    for (let k = 0; k < 40; k += 9) {
      await moved.put(key(k), value(k, 77));
      next.set(hex(key(k)), hex(value(k, 77)));
    }
    const { root } = await moved.commit();
    const envelopes = await Promise.all(Array.from({ length: moved.head()!.chunkCount }, (_, i) => moved.exportChunk(i)));
    await moved.close();
    const all: Models = new Map([...models, [11, next]]);
    /** Hands the sink every chunk it lacks, then finishes it. */
    const feed = async (state: State, asNextVersion: boolean) => {
      const sink = await state.syncSink(root, { asNextVersion });
      for (let i = 0; i < envelopes.length; i++) if (!sink.restored.includes(i)) sink.add(verifyChunk(root, i, envelopes[i]!));
      return sink.finish();
    };
    for (let dieAt = 1; ; dieAt++) {
      expect(dieAt).toBeLessThan(200);
      const torn = copyDatabase(data);
      const state = await openState({ backend: dying(torn, dieAt) });
      const finished = await feed(state, true).then(
        () => true,
        (e) => expect(e.code).toBe('KILLED'),
      );
      await state.close();
      const again = await openState({ backend: memoryBackend(torn) });
      if (again.head()!.version === 10) {
        // Pending from its first write on (the sync record): then only the same sync is taken.
        const pending = await again.pendingSync();
        if (dieAt > 1) {
          expect(hex(pending!.root)).toBe(hex(root));
          await expect(again.put(key(1), value(1, 1))).rejects.toMatchObject({ code: 'SYNC_PENDING' });
        }
        expect(await feed(again, pending === undefined)).toEqual({ version: 11 });
      }
      await again.close();
      // Once version 10 is pruned, exactly what version 11 uses is left: each entry once, a node per chunk but one.
      await expectModels(torn, all, [[...before, 11]]);
      expect(torn.table('entries').size()).toBe(next.size);
      expect(torn.table('nodes').size()).toBe(envelopes.length - 1);
      expect(torn.table('chunks').size()).toBeGreaterThanOrEqual(envelopes.length);
      expect(torn.table('chunks').size()).toBeLessThanOrEqual(2 * envelopes.length); // deltas keep their bases
      if (finished === true) break;
    }
  });
});
