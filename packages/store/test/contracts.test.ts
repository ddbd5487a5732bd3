// The store's call contracts: every write (prune, rollback, discardSync,
// the opening of a sync included) runs in the order it was called, judging
// the store as the writes called before it left it, so that calls made at
// once, a few microtasks apart, end as if each were awaited in turn; a
// close lets the running write end; a refused open writes nothing; bad
// arguments are TypeError (wrong type) or RangeError (wrong value).
// Errors are asserted by code or class, never by message.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openState, type State } from '../src/index.ts';
import { key, value } from './model.ts';
import { inMemory, memoryBackend } from './support/places.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function newDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'store-contracts-'));
  dirs.push(d);
  return d;
}

/** Lets `n` microtasks run (none at all for 0: the next call is made at once). */
async function ticks(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await null;
}
/** How a call ended: `ok`, or the error's code (its class for an error without one). */
const outcome = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'ok',
    (e: { code?: string; name?: string }) => e.code ?? e.name ?? String(e),
  );

const KEYS = 40;

/** A store of capacity 4 with versions 1 … 4, version v holding value(k, v) for every key. */
async function fourVersions() {
  const place = inMemory();
  const state = await place.open({ capacity: 4 });
  for (let v = 1; v <= 4; v++) {
    for (let k = 0; k < KEYS; k++) await state.put(key(k), value(k, v));
    await state.commit();
  }
  return { place, state };
}

type Call = (state: State) => Promise<unknown>;

/** Makes `calls` on `state`, each awaited before the next or `gap` microtasks apart; their outcomes. */
async function issue(state: State, calls: readonly Call[], gap: number | 'awaited'): Promise<string[]> {
  const ended: Promise<string>[] = [];
  for (const [i, call] of calls.entries()) {
    if (gap === 'awaited') ended.push(Promise.resolve(await outcome(call(state))));
    else {
      if (i > 0 && gap > 0) await ticks(gap);
      ended.push(outcome(call(state)));
    }
  }
  return Promise.all(ended);
}

/** What the store holds after `calls`: their outcomes, the versions (in memory and reopened) and the head's values. */
async function runCalls(calls: readonly Call[], gap: number | 'awaited') {
  const { place, state } = await fourVersions();
  const outcomes = await issue(state, calls, gap);
  const versions = state.versions().map((v) => v.version);
  await state.close();
  const reopened = await place.open();
  const stored = reopened.versions().map((v) => v.version);
  const head = reopened.head()?.version;
  const values = head === undefined ? [] : (await reopened.getMany([key(0), key(KEYS - 1)])).map((v) => v?.[0]);
  await reopened.close();
  return { outcomes, versions, stored, head, values };
}

describe('writes called at once run in call order, as if each were awaited', { timeout: 60_000 }, () => {
  const rollback3: Call = (s) => s.rollback(3);
  const keepLast1: Call = (s) => s.prune({ keepLast: 1 });
  const before3: Call = (s) => s.prune({ before: 3 });
  const putCommit: Call = async (s) => {
    const put = s.put(key(0), value(0, 9));
    return Promise.all([put, s.commit()]);
  };
  const commit: Call = (s) => s.commit();
  const put: Call = (s) => s.put(key(1), value(1, 9));
  const GAPS = [0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50];

  it.each([
    ['rollback(3), then prune({ keepLast: 1 })', [rollback3, keepLast1]],
    ['prune({ keepLast: 1 }), then rollback(3)', [keepLast1, rollback3]],
    ['rollback(3), then prune({ before: 3 })', [rollback3, before3]],
    ['prune({ before: 3 }), then rollback(3)', [before3, rollback3]],
    ['put and commit, then prune({ keepLast: 1 })', [putCommit, keepLast1]],
    ['prune({ keepLast: 1 }), then put and commit', [keepLast1, putCommit]],
    ['put, prune({ keepLast: 2 }), commit, rollback(4)', [put, (s: State) => s.prune({ keepLast: 2 }), commit, (s: State) => s.rollback(4)]],
  ] as const)('%s', async (_, calls) => {
    const expected = await runCalls(calls, 'awaited');
    // A version always survives a prune and a rollback.
    expect(expected.stored.length).toBeGreaterThan(0);
    for (const gap of GAPS) {
      expect({ gap, ...(await runCalls(calls, gap)) }).toEqual({ gap, ...expected });
    }
  });

  it('rollback(3) then prune({ keepLast: 1 }) keeps version 3 alone (the audit found none left)', async () => {
    expect(await runCalls([rollback3, keepLast1], 0)).toEqual({ outcomes: ['ok', 'ok'], versions: [3], stored: [3], head: 3, values: [3, 3] });
  });

  it('discardSync, then a put and a commit: the put and commit run once the discard has', async () => {
    const calls: Call[] = [
      (s) => s.discardSync(),
      (s) => s.put(key(0), value(0, 9)),
      (s) => s.commit(),
    ];
    const run = async (gap: number | 'awaited') => {
      const place = inMemory();
      const state = await place.open({ capacity: 4 });
      // An unfinished sync stored: a sink opened and stopped before any chunk.
      const sink = await state.syncSink(new Uint8Array(32).fill(7));
      await sink.close();
      expect(await state.pendingSync()).toBeDefined();
      const outcomes = await issue(state, calls, gap);
      const result = { outcomes, pending: await state.pendingSync(), versions: state.versions().map((v) => v.version), got: await state.get(key(0)) };
      await state.close();
      return result;
    };
    const expected = await run('awaited');
    expect(expected.outcomes).toEqual(['ok', 'ok', 'ok']);
    for (const gap of [0, 1, 2, 5, 20]) expect(await run(gap)).toEqual(expected);
  });

  it('a sync opened after a commit is judged after it: STORE_NOT_EMPTY, as when awaited', async () => {
    for (const gap of ['awaited', 0, 1, 3] as const) {
      const state = await inMemory().open({ capacity: 4 });
      const calls: Call[] = [(s) => s.put(key(0), value(0, 1)), (s) => s.commit(), (s) => s.syncSink(new Uint8Array(32).fill(7))];
      const ended: string[] = [];
      const pending: Promise<string>[] = [];
      for (const call of calls) {
        if (gap === 'awaited') ended.push(await outcome(call(state)));
        else {
          if (gap > 0) await ticks(gap);
          pending.push(outcome(call(state)));
        }
      }
      ended.push(...(await Promise.all(pending)));
      expect({ gap, ended, pending: await state.pendingSync() }).toEqual({ gap, ended: ['ok', 'ok', 'STORE_NOT_EMPTY'], pending: undefined });
      await state.close();
    }
  });

  it('a bulk load called after a discard of the stored sync loads, as when awaited', async () => {
    for (const gap of ['awaited', 0, 2] as const) {
      const state = await inMemory().open({ capacity: 4 });
      const sink = await state.syncSink(new Uint8Array(32).fill(7));
      await sink.close();
      const discard = outcome(state.discardSync());
      if (gap === 'awaited') await discard;
      else if (gap > 0) await ticks(gap);
      const load = outcome(state.bulkLoad([[key(0), value(0, 1)]]));
      expect({ gap, ended: [await discard, await load] }).toEqual({ gap, ended: ['ok', 'ok'] });
      expect(state.versions().map((v) => v.version)).toEqual([1]);
      await state.close();
    }
  });
});

describe('close and a running prune', () => {
  it('close lets a prune that has started end, and resolves; a prune called but not started is STORE_CLOSED', async () => {
    const dir = newDir();
    let state = await openState({ path: dir, capacity: 4 });
    for (let v = 1; v <= 5; v++) {
      for (let k = 0; k < 200; k++) await state.put(key(k), value(k, v));
      await state.commit();
    }
    const running = outcome(state.prune({ keepLast: 1 }));
    // Started: it runs once the writes before it (none) have, a microtask on.
    await ticks(2);
    await state.close();
    expect(await running).toBe('ok');
    state = await openState({ path: dir });
    expect(state.versions().map((v) => v.version)).toEqual([5]);
    expect((await state.getMany([key(0), key(199)])).map((v) => v?.[0])).toEqual([5, 5]);
    // Called, then closed before its turn: refused, the store unchanged.
    await state.put(key(0), value(0, 6));
    await state.commit();
    const queued = outcome(state.prune({ keepLast: 1 }));
    await state.close();
    expect(await queued).toBe('STORE_CLOSED');
    state = await openState({ path: dir });
    expect(state.versions().map((v) => v.version)).toEqual([5, 6]);
    await state.close();
  });
});

describe('a refused open writes nothing', () => {
  const refusals = [
    [1, 'CAPACITY_INVALID'],
    [4097, 'CAPACITY_INVALID'],
    [0, 'CAPACITY_INVALID'],
    [2.5, 'RangeError'],
    [-1, 'RangeError'],
    [Number.NaN, 'RangeError'],
    ['8', 'TypeError'],
  ] as const;

  it.each(refusals)('capacity %s is %s, and the directory stays as it was', async (capacity, expected) => {
    const empty = newDir();
    const missing = join(newDir(), 'not-made');
    for (const path of [empty, missing]) {
      expect(await outcome(openState({ path, capacity: capacity as number }))).toBe(expected);
    }
    expect(readdirSync(empty)).toEqual([]);
    expect(existsSync(missing)).toBe(false);
    // And the directory still opens as a new store.
    const state = await openState({ path: empty, capacity: 4 });
    expect(state.capacity).toBe(4);
    await state.close();
  });

  it('a bad cacheBytes writes nothing either, and a given backend is closed by a refused open', async () => {
    const empty = newDir();
    await expect(openState({ path: empty, cacheBytes: -1 })).rejects.toThrow(RangeError);
    expect(readdirSync(empty)).toEqual([]);
    const place = inMemory();
    let closed = false;
    const backend = memoryBackend(place.database);
    const close = backend.close.bind(backend);
    backend.close = async () => {
      closed = true;
      await close();
    };
    expect(await outcome(openState({ backend, capacity: 1 }))).toBe('CAPACITY_INVALID');
    expect(closed).toBe(true);
    expect([...place.database.table('meta')]).toEqual([]);
  });
});

describe('bad arguments: TypeError for a wrong type, RangeError for a wrong value', () => {
  it('a chunk index and a root', async () => {
    const { state } = await fourVersions();
    for (const index of [-1, 1.5, Number.NaN, Infinity]) {
      await expect(state.proveChunk(index)).rejects.toThrow(RangeError);
      await expect(state.exportChunk(index)).rejects.toThrow(RangeError);
    }
    await expect(state.proveChunk('0' as unknown as number)).rejects.toThrow(TypeError);
    await expect(state.proveChunk(1 << 30)).rejects.toMatchObject({ code: 'CHUNK_OUT_OF_RANGE' });
    for (const root of [new Uint8Array(31), new Uint8Array(33)]) {
      await expect(state.syncSink(root)).rejects.toThrow(RangeError);
      await expect(state.catchUpSession(root)).rejects.toThrow(RangeError);
    }
    for (const root of ['ab', Array(32).fill(0)]) {
      await expect(state.syncSink(root as unknown as Uint8Array)).rejects.toThrow(TypeError);
      await expect(state.catchUpSession(root as unknown as Uint8Array)).rejects.toThrow(TypeError);
    }
    // Refused before anything: the store takes writes as before.
    await state.put(key(0), value(0, 5));
    expect((await state.commit()).version).toBe(5);
    await state.close();
  });
});
