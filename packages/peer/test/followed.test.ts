// `FollowedState` (src/followed.ts) against a prune by the writer that
// lands while the server reads the version records again: the records read
// before the prune list the pruned version, a request at it meanwhile finds
// it gone (VERSION_UNKNOWN, which the server answers UNKNOWN_ROOT and drops
// the version for), and the read that ends after that must not list it
// again in ROOTS. Deterministic: the reader's backend holds the end of its
// scan of the version records until the prune and the request are done.
// And `FollowedState.awaiting`: a directory with no store is served empty
// until a writer makes one. Every wait is bounded.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdsNoState, openState, type State, TABLES } from '@bpavl/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNodeBackend } from '../../storage/src/node/index.ts';
import type { StorageBackend } from '../../storage/src/port.ts';
import { FollowedState } from '../src/followed.ts';
import type { StoredTree } from '../src/source.ts';
import { wasmReady } from './support.ts';

let dir: string;
beforeAll(async () => {
  await wasmReady();
  dir = await mkdtemp(join(tmpdir(), 'bpavl-followed-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const key = (i: number) => new TextEncoder().encode(`key-${String(i).padStart(4, '0')}`);
const value = (i: number, round: number) => new TextEncoder().encode(`value ${i} of round ${round}`);

/** Resolves once `test` holds, polling every 10 ms, for at most `ms`. */
async function until(test: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A read-only backend on `path` whose scans of the version records, while `hold` is set, have read every record but end only once it resolves. */
async function heldBackend(path: string): Promise<{ backend: StorageBackend; hold(gate: Promise<void>): void; scanned(): boolean }> {
  const inner = await openNodeBackend({ path, tables: TABLES, readOnly: true });
  let gate: Promise<void> | undefined;
  let scanned = false;
  const backend: StorageBackend = {
    kind: inner.kind,
    readOnly: inner.readOnly,
    get: (table, k) => inner.get(table, k),
    getMany: (table, keys) => inner.getMany(table, keys),
    scan(table, range) {
      const records = inner.scan(table, range);
      const held = table === 'versions' ? gate : undefined;
      if (held === undefined) return records;
      gate = undefined;
      return (async function* () {
        const all: (readonly [Uint8Array, Uint8Array])[] = [];
        for await (const r of records) all.push(r);
        scanned = true;
        await held;
        yield* all;
      })();
    },
    write: (batch) => inner.write(batch),
    sizeBytes: () => inner.sizeBytes(),
    compact: (options) => inner.compact(options),
    close: () => inner.close(),
  };
  return { backend, hold: (g) => ((gate = g), (scanned = false)), scanned: () => scanned };
}

describe('FollowedState', { timeout: 60_000 }, () => {
  it('a version pruned while the records are read again, and found gone by a request meanwhile, is not listed again', async () => {
    const db = join(dir, 'prune-race');
    const writer = await openState({ path: db, capacity: 4 });
    let reader: State | undefined;
    let followed: FollowedState | undefined;
    try {
      // Three versions; the second rewrites every value, so that pruning to it removes the first one's records.
      for (let round = 1; round <= 3; round++) {
        await writer.putMany(Array.from({ length: round === 3 ? 1 : 60 }, (_, i) => [key(i), value(i, round)] as const));
        await writer.commit();
      }
      const [v1] = writer.versions();
      const held = await heldBackend(db);
      reader = await openState({ backend: held.backend });
      const warnings: string[] = [];
      followed = new FollowedState(reader, { warn: (m) => warnings.push(m) });
      expect(followed.trees().map((t) => t.version)).toEqual([1, 2, 3]);

      // The server reads the records again (before a ROOTS answer); its scan has read all three.
      let release!: () => void;
      held.hold(new Promise<void>((resolve) => (release = resolve)));
      const updated = followed.update(true);
      await until(held.scanned);

      // The writer prunes version 1 meanwhile; a request at it finds it gone, and the server drops it.
      await writer.prune({ keepLast: 2 });
      const tree = followed.lookup(v1!.root) as StoredTree;
      expect(tree.version).toBe(1);
      await expect(tree.exportChunk(0)).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
      followed.drop(tree);
      expect(followed.trees().map((t) => t.version)).toEqual([2, 3]);

      // The read ends: what it read before the prune lists version 1, which stays out of ROOTS.
      release();
      await updated;
      expect(followed.trees().map((t) => t.version)).toEqual([2, 3]);
      expect(followed.lookup(v1!.root)).toBeUndefined();
      expect(reader.versions().map((v) => v.version)).toEqual([2, 3]);
      expect(warnings).toEqual([]);
      // And the next read, after the prune, agrees.
      await followed.update(true);
      expect(followed.trees().map((t) => t.version)).toEqual([2, 3]);
    } finally {
      await followed?.close();
      await reader?.close();
      await writer.close();
    }
  });

  it('awaiting a store: serves nothing, opens nothing while the directory holds no store, then follows the one a writer makes', async () => {
    const db = join(dir, 'awaited', 'state');
    expect(await holdsNoState(db)).toBe(true);
    const logged: string[] = [];
    const warnings: string[] = [];
    let opens = 0;
    const followed = FollowedState.awaiting(
      async () => {
        if (await holdsNoState(db)) return undefined;
        opens++;
        return openState({ path: db, readOnly: true });
      },
      { log: (m) => logged.push(m), warn: (m) => warnings.push(m) },
    );
    let writer: State | undefined;
    try {
      expect(followed.trees()).toEqual([]);
      expect(followed.state).toBeUndefined();
      await followed.update(true);
      expect(opens).toBe(0);
      expect(followed.state).toBeUndefined();
      expect(followed.trees()).toEqual([]);
      const w = (writer = await openState({ path: db, capacity: 8 }));
      // Made, no version yet: opened, and served empty.
      await followed.update(true);
      expect(opens).toBe(1);
      expect(followed.state).toBeDefined();
      expect(followed.trees()).toEqual([]);
      await w.put(key(1), value(1, 1));
      const { root } = await w.commit();
      await followed.update(true);
      expect(followed.trees().map((t) => t.version)).toEqual([1]);
      expect(followed.lookup(root)).toBeDefined();
      expect(opens).toBe(1);
      expect(logged.join('\n')).toMatch(/serving version 1/);
      expect(warnings).toEqual([]);
    } finally {
      await followed.close();
      await writer?.close();
    }
  });
});
