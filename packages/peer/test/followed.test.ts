// `FollowedState` (src/followed.ts) against a prune by the writer that
// lands while the server reads the version records again: the records read
// before the prune list the pruned version, a request at it meanwhile finds
// it gone (VERSION_UNKNOWN, which the server answers UNKNOWN_ROOT and drops
// the version for), and the read that ends after that must not list it
// again in ROOTS. Deterministic: the reader's backend holds the end of its
// scan of the version records until the prune and the request are done.
// And a version the writer rolls back and commits again with another root
// while a request at the old root is read: the answer is UNKNOWN_ROOT, never
// the new root's data (a), nor BUSY from a STORE_CORRUPT (b); the backend
// holds one read of the records until the writer and a refresh are done.
// And `FollowedState.awaiting`: a directory with no store is served empty
// until a writer makes one. Every wait is bounded.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdsNoState, openState, type State, TABLES } from '@bpavl/store';
import { Kind, Status } from '@bpavl/light-client/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNodeBackend } from '../../storage/src/node/index.ts';
import type { StorageBackend } from '../../storage/src/port.ts';
import { FollowedState } from '../src/followed.ts';
import { SyncServer } from '../src/server.ts';
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

/** Every call of a backend, passed on to `inner` (the wrappers below replace one). */
function forwarding(inner: StorageBackend): StorageBackend {
  return {
    kind: inner.kind,
    readOnly: inner.readOnly,
    get: (table, k) => inner.get(table, k),
    getMany: (table, keys) => inner.getMany(table, keys),
    scan: (table, range) => inner.scan(table, range),
    write: (batch) => inner.write(batch),
    sizeBytes: () => inner.sizeBytes(),
    compact: (options) => inner.compact(options),
    close: () => inner.close(),
  };
}

/** A read-only backend on `path` whose scans of the version records, while `hold` is set, have read every record but end only once it resolves. */
async function heldBackend(path: string): Promise<{ backend: StorageBackend; hold(gate: Promise<void>): void; scanned(): boolean }> {
  const inner = await openNodeBackend({ path, tables: TABLES, readOnly: true });
  let gate: Promise<void> | undefined;
  let scanned = false;
  const backend: StorageBackend = {
    ...forwarding(inner),
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
  };
  return { backend, hold: (g) => ((gate = g), (scanned = false)), scanned: () => scanned };
}

/** A read-only backend on `path` whose next `getMany`, once `hold` is called, waits for the gate before it reads anything. */
async function pausedBackend(path: string): Promise<{ backend: StorageBackend; hold(gate: Promise<void>): void; waiting(): boolean }> {
  const inner = await openNodeBackend({ path, tables: TABLES, readOnly: true });
  let gate: Promise<void> | undefined;
  let waiting = false;
  const backend: StorageBackend = {
    ...forwarding(inner),
    async getMany(table, keys) {
      const held = gate;
      gate = undefined;
      if (held !== undefined) {
        waiting = true;
        await held;
        waiting = false;
      }
      return inner.getMany(table, keys);
    },
  };
  return { backend, hold: (g) => ((gate = g), (waiting = false)), waiting: () => waiting };
}

/**
 * A writer with versions 1 … 3, each rewriting all 60 values (so that
 * version 3's records are all born at 3), a reader on a paused backend,
 * followed and served; `replace` rolls the writer back to 2 and commits
 * another version 3, then lets the reader refresh.
 */
async function replacedVersion(name: string) {
  const db = join(dir, name);
  const writer = await openState({ path: db, capacity: 4 });
  for (let round = 1; round <= 3; round++) {
    await writer.putMany(Array.from({ length: 60 }, (_, i) => [key(i), value(i, round)] as const));
    await writer.commit();
  }
  const old = writer.head()!;
  const paused = await pausedBackend(db);
  const reader = await openState({ backend: paused.backend });
  const warnings: string[] = [];
  const followed = new FollowedState(reader, { warn: (m) => warnings.push(m) });
  const server = new SyncServer(followed);
  const replace = async () => {
    await writer.rollback(2);
    await writer.putMany(Array.from({ length: 60 }, (_, i) => [key(i), value(i, 4)] as const));
    const now = await writer.commit();
    expect(now.version).toBe(3);
    expect(now.root).not.toEqual(old.root);
    await followed.update(true);
    expect(reader.versions().find((v) => v.version === 3)?.root).toEqual(now.root);
    return now;
  };
  const close = async () => {
    await followed.close();
    await reader.close();
    await writer.close();
  };
  return { old, paused, reader, followed, server, warnings, replace, close };
}

describe('a version committed again under its number while it is served', { timeout: 60_000 }, () => {
  it('(a) a request at the old root is never answered from the new root: UNKNOWN_ROOT', async () => {
    const t = await replacedVersion('replaced-a');
    try {
      // A key absent from both roots, its path cached: proving it at the old root is a read of
      // existence (from the cache) and then one of absence.
      const absent = new TextEncoder().encode('key-0100');
      expect((await t.server.answer({ id: 1, kind: Kind.Proof, root: t.old.root, key: absent })).status).toBe(Status.Ok);

      // A read of version 2 holds the reader's questions; the proof at the old root is asked behind it.
      let release!: () => void;
      t.paused.hold(new Promise<void>((resolve) => (release = resolve)));
      const blocking = t.reader.exportChunk(0, { version: 2 });
      await until(t.paused.waiting);
      const answer = t.server.answer({ id: 1, kind: Kind.Proof, root: t.old.root, key: absent });

      // The writer commits another version 3, and the reader lists it, before the proof is read.
      const now = await t.replace();
      release();
      await blocking;
      expect((await answer).status).toBe(Status.UnknownRoot);
      expect(t.server.stats.internalErrors).toBe(0);

      // The new version 3 is served, listed and readable.
      expect(t.followed.trees().map((x) => x.version)).toEqual([1, 2, 3]);
      expect(t.followed.lookup(now.root)).toBeDefined();
      expect(t.followed.lookup(t.old.root)).toBeUndefined();
      expect((await t.server.answer({ id: 1, kind: Kind.Proof, root: now.root, key: absent })).status).toBe(Status.Ok);
      expect(t.warnings).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('(b) a read at the old root whose records went is UNKNOWN_ROOT, not BUSY, and the new version stays listed', async () => {
    const t = await replacedVersion('replaced-b');
    try {
      // The chunk's first read of records waits until the old version 3's records are gone.
      let release!: () => void;
      t.paused.hold(new Promise<void>((resolve) => (release = resolve)));
      const answer = t.server.answer({ id: 1, kind: Kind.Chunk, root: t.old.root, index: 0 });
      await until(t.paused.waiting);
      const now = await t.replace();
      release();
      expect((await answer).status).toBe(Status.UnknownRoot);
      expect(t.server.stats.internalErrors).toBe(0);

      // The reader forgot the old root only: the new version 3 is still its and the server's.
      expect(t.reader.versions().map((v) => [v.version, v.root])).toEqual(t.followed.trees().map((x) => [x.version, x.root]));
      expect(t.reader.versions().at(-1)).toMatchObject({ version: 3, root: now.root });
      expect((await t.server.answer({ id: 1, kind: Kind.Chunk, root: now.root, index: 0 })).status).toBe(Status.Ok);
      // The store says the same to a caller that pins the root.
      await expect(t.reader.exportChunk(0, { version: 3, root: t.old.root })).rejects.toMatchObject({ code: 'VERSION_UNKNOWN' });
      expect(await t.reader.isRetained(3, t.old.root)).toBe(false);
      expect(await t.reader.isRetained(3, now.root)).toBe(true);
      expect(t.warnings).toEqual([]);
    } finally {
      await t.close();
    }
  });
});

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
