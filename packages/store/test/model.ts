// The store against a model of every retained version: random puts,
// deletes, commits, prunes, rollbacks and reopens (closing the store and
// opening it again on the same records). After each step every retained
// version reads exactly its model, and its proofs verify against its own
// root. Errors are checked by code.
//
// Browser-safe (no node: modules, no test framework; a failure throws), so
// that every backend runs the same model: memory and SQLite in vitest
// (state.test.ts), IndexedDB in Chromium (tests/browser/store.spec.ts).
import { verifyAbsence, verifyExistence, verifyRange } from '@bpavl/wasm';
import type { State } from '../src/index.ts';

/** Where a model run keeps its state; each `open` is a new backend on the same records. */
export interface ModelPlace {
  open(options?: { readonly capacity?: number } & Caches): Promise<State>;
}

/** The store's caches in a model run; each at its default if omitted. */
export interface Caches {
  readonly cacheBytes?: number;
  readonly valueCacheBytes?: number;
  /** Set: puts go through `putMany`, which checks the batch against it after each call (0: writes every changed chunk ahead). */
  readonly batchBytes?: number;
}

export type Model = Map<string, Uint8Array>;

export const hex = (b: Uint8Array | undefined): string =>
  b === undefined ? 'undefined' : Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/** Keys from a small domain, of varying lengths, so updates and deletes hit. */
export function key(k: number): Uint8Array {
  return new Uint8Array([k >> 8, k & 0xff, ...new Array(k % 3).fill(0x6b)]);
}

export function value(k: number, seed: number): Uint8Array {
  return new Uint8Array((k + seed) % 40).fill(seed);
}

/** xorshift32: a seeded, repeatable stream of choices below `n`. */
export function rng(seed: number): (n: number) => number {
  let x = seed || 1;
  return (n: number) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

function same(got: unknown, want: unknown, what: string): void {
  const show = (x: unknown) => (x instanceof Uint8Array ? hex(x) : JSON.stringify(x));
  if (show(got) !== show(want)) throw new Error(`${what}: got ${show(got)}, want ${show(want)}`);
}

async function rejectsWith(action: () => Promise<unknown>, code: string, what: string): Promise<void> {
  try {
    await action();
  } catch (e) {
    if ((e as { code?: unknown }).code === code) return;
    throw new Error(`${what}: threw ${String(e)}, want ${code}`);
  }
  throw new Error(`${what}: succeeded, want ${code}`);
}

/** Every retained version of `state` reads, proves and ranges as its model. */
async function checkVersions(state: State, models: Map<number, Model>, domain: number, pick: (n: number) => number): Promise<void> {
  same(
    state.versions().map((v) => v.version),
    [...models.keys()],
    'retained versions',
  );
  for (const { version, root } of state.versions()) {
    const model = models.get(version)!;
    const snapshot = await state.snapshot({ version });
    same(snapshot.root, root, `root of version ${version}`);
    same(snapshot.len, model.size, `entries of version ${version}`);
    for (let i = 0; i < 6; i++) {
      const k = key(pick(domain));
      const want = model.get(hex(k));
      same(await state.get(k, { version }), want, `get ${hex(k)} at version ${version}`);
      if (want) {
        verifyExistence(root, k, want, snapshot.proveExistence(k));
        const paged = await state.proveExistence(k, { version });
        same(paged.value, want, `proved value of ${hex(k)} at version ${version}`);
        verifyExistence(root, k, want, paged.proof);
      } else {
        verifyAbsence(root, k, snapshot.proveAbsence(k));
        verifyAbsence(root, k, await state.proveAbsence(k, { version }));
        await rejectsWith(() => state.proveExistence(k, { version }), 'KEY_NOT_FOUND', `existence proof of absent ${hex(k)}`);
      }
      if (want) await rejectsWith(() => state.proveAbsence(k, { version }), 'KEY_EXISTS', `absence proof of present ${hex(k)}`);
    }
    // Up to 12 keys at once, repeats included, in the order asked.
    const asked = Array.from({ length: pick(13) }, () => key(pick(domain)));
    same(await state.getMany(asked, { version }), asked.map((k) => model.get(hex(k))), `getMany at version ${version}`);
    const all = [...model.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    const from = pick(domain);
    const start = key(from);
    const want = all.filter(([k]) => k >= hex(start)).slice(0, 8);
    const rangeProof = snapshot.proveRange(start, undefined, 8);
    const got = verifyRange(root, start, undefined, 8, rangeProof);
    same(
      got.entries.map(([k, v]) => [hex(k), hex(v)]),
      want.map(([k, v]) => [k, hex(v)]),
      `range from ${hex(start)} at version ${version}`,
    );
    same(await state.proveRange(start, undefined, 8, { version }), rangeProof, `paged range proof from ${hex(start)} at version ${version}`);
    // Up to 24 keys on, or to the end, a few entries a proof.
    const stop = from + 24 < domain ? key(from + 24) : undefined;
    const iterated: [string, string][] = [];
    for await (const [k, v] of state.range(start, stop, { version, pageSize: 1 + pick(5) })) iterated.push([hex(k), hex(v)]);
    same(
      iterated,
      all.filter(([k]) => k >= hex(start) && (stop === undefined || k < hex(stop))).map(([k, v]) => [k, hex(v)]),
      `entries from ${hex(start)} to ${stop && hex(stop)} at version ${version}`,
    );
    if (snapshot.chunkCount > 0) {
      const index = pick(snapshot.chunkCount);
      same(await state.proveChunk(index, { version }), snapshot.proveChunk(index), `proof of chunk ${index} at version ${version}`);
      same(await state.exportChunk(index, { version }), snapshot.exportChunk(index), `envelope of chunk ${index} at version ${version}`);
    }
    await rejectsWith(() => state.proveChunk(snapshot.chunkCount, { version }), 'CHUNK_OUT_OF_RANGE', `chunk ${snapshot.chunkCount} at version ${version}`);
  }
}

/**
 * `steps` random operations at chunk capacity `capacity` over keys
 * `key(0 … domain−1)`, with the store's caches at `cache`: its chunk caches
 * (paged reads and the paged head) and its value cache, whose answers a
 * commit, a rollback or a reopen must never leave stale.
 */
export async function runModel(place: ModelPlace, capacity: number, seed: number, steps: number, domain: number, cache: Caches = {}): Promise<void> {
  const pick = rng(seed);
  let state = await place.open({ capacity, ...cache });
  let model: Model = new Map();
  const models = new Map<number, Model>();
  try {
    for (let step = 0; step < steps; step++) {
      const roll = pick(100);
      if (roll < 50) {
        const k = pick(domain);
        if (cache.batchBytes === undefined) await state.put(key(k), value(k, step & 0xff));
        else await state.putMany([[key(k), value(k, step & 0xff)]]);
        model.set(hex(key(k)), value(k, step & 0xff));
      } else if (roll < 75) {
        const k = pick(domain);
        same(await state.delete(key(k)), model.delete(hex(key(k))), `delete ${k}`);
      } else if (roll < 88) {
        const { version } = await state.commit();
        models.set(version, new Map(model));
      } else if (roll < 92 && models.size > 0) {
        const versions = [...models.keys()];
        if (pick(2) === 0) {
          const keepLast = 1 + pick(4);
          await state.prune({ keepLast, vacuum: keepLast === 4 });
          for (const v of versions.slice(0, Math.max(0, versions.length - keepLast))) models.delete(v);
        } else {
          // Any version number, retained or not, up to past the head: the head always stays.
          const head = state.head()!.version;
          const before = pick(head + 3);
          await state.prune({ before });
          for (const v of versions) if (v < Math.min(before, head)) models.delete(v);
        }
      } else if (roll < 96 && models.size > 0) {
        const versions = [...models.keys()];
        const to = versions[Math.max(0, versions.length - 1 - pick(3))]!;
        await state.rollback(to);
        for (const v of versions.filter((v) => v > to)) models.delete(v);
        model = new Map(models.get(to));
      } else {
        await state.close();
        state = await place.open(cache);
        const head = [...models.keys()].at(-1);
        model = new Map(head === undefined ? [] : models.get(head));
      }
      if (roll >= 75) await checkVersions(state, models, domain, pick);
    }
  } finally {
    await state.close();
  }
}
