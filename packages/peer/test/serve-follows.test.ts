// `bpavl serve --db DIR` follows DIR while other processes write it: a real
// serve child on 127.0.0.1, real `bpavl import`, `rollback`, `prune` and
// `sync` children, and a raw WebSocket client. A version committed after
// serve started is listed in ROOTS and served (chunks, proofs, ranges, a
// whole sync and a catch-up, each verified against its root); a version
// rolled back or pruned is answered UNKNOWN_ROOT and no longer listed; a
// version record that fails its checks is not served, and the rest is,
// whether it is damaged while serve runs or before serve starts. A store
// with no version yet is served too (ROOTS lists nothing) until another
// process commits one; a directory with no store is refused, unless
// --wait-for-store: then it is served from none until another process
// (sync --db, import, generate --db) makes the store, and what is not a
// store is refused all the same.
// Every wait is bounded.

import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { decodeProofPayload, decodeRootsPayload, Kind, Status } from '@bpavl/light-client/wire';
import { verifyChunk, verifyExistence, verifyRange } from '@bpavl/light-client/verify';
import { openState } from '@bpavl/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cliJson, sleep, spawnCli, wasmReady, type WireClient, wsClient } from './support.ts';
import { damageVersionRecord } from '../../store/test/support/damage.ts';

let dir: string;
beforeAll(async () => {
  await wasmReady();
  dir = await mkdtemp(join(tmpdir(), 'bpavl-serve-follows-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const hex = (s: string) => Buffer.from(s).toString('hex');
const bytes = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));

const json = cliJson;

/** Imports `entries` (UTF-8 keys and values) into `db` as its next version; resolves to the new root. */
async function importEntries(db: string, name: string, entries: Record<string, string>): Promise<string> {
  const file = join(dir, `${name}.jsonl`);
  await writeFile(file, Object.entries(entries).map(([key, value]) => `${JSON.stringify({ key: hex(key), value: hex(value) })}\n`).join(''));
  const r = await json(['import', '--db', db, file]);
  expect(r.code, r.stderr).toBe(0);
  return r.out.root;
}

type ServeInfo = { ws: string; root: string | null; versions: number };

/** `bpavl serve --db db` as a child: its first JSON line, and its stderr so far. */
function serveDb(db: string, ...extra: string[]): Promise<{ child: ChildProcess; info: ServeInfo; stderr: () => string }> {
  return serveChild(['--db', db, ...extra]);
}

/** `bpavl serve ARGS` as a child: its first JSON line, and its stderr so far. */
async function serveChild(args: string[]): Promise<{ child: ChildProcess; info: ServeInfo; stderr: () => string }> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args, '--json', '--verbose', '--libp2p-port', 'off', '--exit-on-stdin-end'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const info = await new Promise<ServeInfo>((resolve, reject) => {
    let buf = '';
    const t = setTimeout(() => reject(new Error(`serve --db did not start: ${err}`)), 30_000);
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`serve --db exited (${code}) before it started: ${err}`));
    });
    child.stdout!.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) {
        clearTimeout(t);
        resolve(JSON.parse(buf.split('\n')[0]!));
      }
    });
  });
  return { child, info, stderr: () => err };
}

/** The roots `ROOTS` lists, as hex, oldest first. */
async function roots(c: WireClient): Promise<string[]> {
  const r = await c.request({ kind: Kind.Roots });
  expect(r.status).toBe(Status.Ok);
  return decodeRootsPayload(r.payload).map((x) => Buffer.from(x.root).toString('hex'));
}

/** Asks ROOTS until it lists exactly `want` (the server reads the records again at most every 250 ms), for at most 3 s. */
async function rootsBecome(c: WireClient, want: string[]): Promise<void> {
  const until = Date.now() + 3000;
  let listed = await roots(c);
  while (JSON.stringify(listed) !== JSON.stringify(want) && Date.now() < until) {
    await sleep(50);
    listed = await roots(c);
  }
  expect(listed).toEqual(want);
}

describe('bpavl serve --db follows the directory', { timeout: 120_000 }, () => {
  it('serves versions other processes commit, stops serving those they roll back or prune, and skips a damaged version record', async () => {
    const db = join(dir, 'followed');
    const v1 = await importEntries(db, 'v1', Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`key-${String(i).padStart(4, '0')}`, `value ${i}`])));
    const { child, info, stderr } = await serveDb(db);
    const c = await wsClient(info.ws);
    try {
      expect(info).toMatchObject({ versions: 1, root: v1 });
      expect(await roots(c)).toEqual([v1]);

      // Committed by another process: asked for at once by its root (no ROOTS first), it is served.
      const v2 = await importEntries(db, 'v2', { 'key-0100': 'changed', 'new key': 'new value' });
      const chunk = await c.request({ kind: Kind.Chunk, root: bytes(v2), index: 0 });
      expect(chunk.status).toBe(Status.Ok);
      verifyChunk(bytes(v2), 0, chunk.payload);
      expect(await roots(c)).toEqual([v1, v2]);
      const proof = await c.request({ kind: Kind.Proof, root: bytes(v2), key: Buffer.from('new key') });
      expect(proof.status).toBe(Status.Ok);
      const p = decodeProofPayload(proof.payload);
      expect(Buffer.from(p.value!).toString()).toBe('new value');
      verifyExistence(bytes(v2), Buffer.from('new key'), p.value!, p.proof);
      const range = await c.request({ kind: Kind.Range, root: bytes(v2), start: Buffer.from('key-0099'), end: Buffer.from('key-0102'), limit: 10 });
      expect(range.status).toBe(Status.Ok);
      const page = verifyRange(bytes(v2), Buffer.from('key-0099'), Buffer.from('key-0102'), 10, range.payload);
      expect(page.entries.map(([, value]) => Buffer.from(value).toString())).toEqual(['value 99', 'changed', 'value 101']);

      // A whole sync of v2, then a catch-up of that copy to v3, committed later, all from this peer.
      const copy = join(dir, 'copy');
      const synced = await json(['sync', '--root', v2, '--peer', info.ws, '--db', copy]);
      expect(synced.code, synced.stderr).toBe(0);
      expect(synced.out.root).toBe(v2);
      const v3 = await importEntries(db, 'v3', { 'key-0200': 'changed again' });
      await rootsBecome(c, [v1, v2, v3]);
      const caughtUp = await json(['sync', '--root', v3, '--peer', info.ws, '--db', copy]);
      expect(caughtUp.code, caughtUp.stderr).toBe(0);
      expect(caughtUp.out).toMatchObject({ root: v3, caughtUpFrom: 1 });
      const read = await json(['get', '--db', copy, hex('key-0200')]);
      expect(read.out.results).toEqual([{ key: hex('key-0200'), value: hex('changed again') }]);

      // Rolled back by another process: no longer listed, and answered UNKNOWN_ROOT.
      expect((await json(['rollback', '--db', db, '--to', '2'])).code).toBe(0);
      await rootsBecome(c, [v1, v2]);
      expect((await c.request({ kind: Kind.Chunk, root: bytes(v3), index: 1 })).status).toBe(Status.UnknownRoot);
      // Version 3 committed again, with another root: that one is served, the old one still is not.
      const v3b = await importEntries(db, 'v3b', { 'key-0201': 'another change' });
      expect(v3b).not.toBe(v3);
      const again = await c.request({ kind: Kind.Chunk, root: bytes(v3b), index: 1 });
      expect(again.status).toBe(Status.Ok);
      verifyChunk(bytes(v3b), 1, again.payload);
      expect((await c.request({ kind: Kind.Chunk, root: bytes(v3), index: 1 })).status).toBe(Status.UnknownRoot);

      // Pruned by another process: the same.
      expect((await json(['prune', '--db', db, '--keep', '2'])).code).toBe(0);
      await rootsBecome(c, [v2, v3b]);
      expect((await c.request({ kind: Kind.Chunk, root: bytes(v1), index: 0 })).status).toBe(Status.UnknownRoot);

      // A version record that fails its checks (written here past the store's checks): not served, said
      // once on stderr; the other versions still are.
      const sqlite = new DatabaseSync(join(db, 'data.sqlite'));
      const key = new Uint8Array(8);
      key[7] = 4;
      sqlite.prepare('INSERT INTO versions (k, v) VALUES (?, ?)').run(key, new Uint8Array([7, 1, 2, 3]));
      sqlite.close();
      await sleep(300);
      expect(await roots(c)).toEqual([v2, v3b]);
      expect(stderr()).toMatch(/version 4 is not served: STORE_CORRUPT/);
      const head = await c.request({ kind: Kind.Chunk, root: bytes(v3b), index: 0 });
      expect(head.status).toBe(Status.Ok);
      verifyChunk(bytes(v3b), 0, head.payload);
    } finally {
      c.close();
      await stop(child);
    }
  });

  it('a server started on a store with no version yet lists no root, answers UNKNOWN_ROOT, and serves the first version another process commits', async () => {
    const db = join(dir, 'empty-at-start');
    // A store that holds no version: what a first sync or import into it leaves until it commits.
    await (await openState({ path: db, capacity: 16 })).close();
    const { child, info, stderr } = await serveDb(db);
    const c = await wsClient(info.ws);
    try {
      expect(info).toMatchObject({ versions: 0, root: null, version: null, chunkCount: 0 });
      expect(await roots(c)).toEqual([]);
      const unknown = bytes('11'.repeat(32));
      expect((await c.request({ kind: Kind.Chunk, root: unknown, index: 0 })).status).toBe(Status.UnknownRoot);
      expect((await c.request({ kind: Kind.Proof, root: unknown, key: Buffer.from('k') })).status).toBe(Status.UnknownRoot);

      // Committed by another process: listed, and a client syncs it from this server, verified against its root.
      const gen = await json(['generate', '--db', db, '--entries', '2000', '--chunk', '16', '--seed', '9']);
      expect(gen.code, gen.stderr).toBe(0);
      await rootsBecome(c, [gen.out.root]);
      const synced = await json(['sync', '--root', gen.out.root, '--peer', info.ws, '--db', join(dir, 'empty-copy')]);
      expect(synced.code, synced.stderr).toBe(0);
      expect(synced.out).toMatchObject({ root: gen.out.root, version: 1 });
      expect(stderr()).toMatch(/serving version 1 \(root /);
    } finally {
      c.close();
      await stop(child);
    }
  });

  it('with --wait-for-store, a server started on an empty directory serves nothing, then the store a sync makes there, and the versions an import adds', async () => {
    const db = join(dir, 'wait-empty');
    await mkdir(db);
    // The peer a sync into db takes its first version from.
    const source = await serveChild(['--entries', '3000', '--chunk', '16', '--seed', '5']);
    const { child, info, stderr } = await serveDb(db, '--wait-for-store');
    const c = await wsClient(info.ws);
    try {
      expect(info).toMatchObject({ versions: 0, root: null, version: null, chunkCount: 0, entryCount: 0, capacity: null });
      expect(await roots(c)).toEqual([]);
      expect((await c.request({ kind: Kind.Chunk, root: bytes(source.info.root!), index: 0 })).status).toBe(Status.UnknownRoot);
      await sleep(300);
      expect(await roots(c)).toEqual([]);

      // Another process syncs the directory's first version from the other peer: listed, and served (a whole sync from this server).
      const first = await json(['sync', '--root', source.info.root!, '--peer', source.info.ws, '--db', db]);
      expect(first.code, first.stderr).toBe(0);
      await rootsBecome(c, [source.info.root!]);
      const copy = await json(['sync', '--root', source.info.root!, '--peer', info.ws, '--db', join(dir, 'wait-empty-copy')]);
      expect(copy.code, copy.stderr).toBe(0);
      expect(copy.out).toMatchObject({ root: source.info.root, version: 1 });

      // Another process imports a second version: asked for at once by its root, it is served, and a key read from it is proven.
      const v2 = await importEntries(db, 'wait-v2', { 'waited key': 'waited value' });
      const got = await json(['get', '--root', v2, '--peer', info.ws, '--utf8', 'waited key']);
      expect(got.code, got.stderr).toBe(0);
      expect(got.out.results).toEqual([{ key: hex('waited key'), value: hex('waited value') }]);
      await rootsBecome(c, [source.info.root!, v2]);
      expect(stderr()).toMatch(/the store was made: following it/);
      expect(stderr()).toMatch(/serving version 2 \(root /);
      expect(stderr()).not.toMatch(/failed/);
    } finally {
      c.close();
      await stop(child);
      await stop(source.child);
    }
  });

  it('with --wait-for-store, a server started on a missing directory serves the store generate --db makes there', async () => {
    const db = join(dir, 'wait-missing', 'state');
    const { child, info } = await serveDb(db, '--wait-for-store');
    const c = await wsClient(info.ws);
    try {
      expect(info).toMatchObject({ versions: 0, root: null });
      expect(await roots(c)).toEqual([]);
      const gen = await json(['generate', '--db', db, '--entries', '1000', '--chunk', '16', '--seed', '4']);
      expect(gen.code, gen.stderr).toBe(0);
      await rootsBecome(c, [gen.out.root]);
      const chunk = await c.request({ kind: Kind.Chunk, root: bytes(gen.out.root), index: 0 });
      expect(chunk.status).toBe(Status.Ok);
      verifyChunk(bytes(gen.out.root), 0, chunk.payload);
    } finally {
      c.close();
      await stop(child);
    }
  });

  it('with --wait-for-store, a directory that holds what is not a store is refused all the same', async () => {
    const notSqlite = join(dir, 'wait-not-sqlite');
    await mkdir(notSqlite);
    await writeFile(join(notSqlite, 'data.sqlite'), 'this is not a database at all, but it is long enough to have a header'.repeat(20));
    const otherApp = join(dir, 'wait-other-app');
    await mkdir(otherApp);
    const other = new DatabaseSync(join(otherApp, 'data.sqlite'));
    other.exec('CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES (1)');
    other.close();
    const truncated = join(dir, 'wait-truncated');
    expect((await json(['generate', '--db', truncated, '--entries', '100', '--chunk', '16'])).code).toBe(0);
    await rm(join(truncated, 'data.sqlite-wal'), { force: true });
    await rm(join(truncated, 'data.sqlite-shm'), { force: true });
    await writeFile(join(truncated, 'data.sqlite'), '');
    const aFile = join(dir, 'wait-a-file');
    await writeFile(aFile, 'a file, not a directory');
    for (const [db, code] of [
      [notSqlite, 'STORE_NOT_A_DATABASE'],
      [otherApp, 'STORE_NOT_A_DATABASE'],
      [truncated, 'STORE_CORRUPT'],
      [aFile, 'STORE_NOT_A_DATABASE'],
    ] as const) {
      const r = await spawnCli(['serve', '--db', db, '--wait-for-store', '--libp2p-port', 'off', '--exit-on-stdin-end']).done;
      expect(r.code, `${db}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(`(${code})`);
    }
    const usage = await spawnCli(['serve', '--wait-for-store', '--libp2p-port', 'off', '--exit-on-stdin-end']).done;
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--wait-for-store needs --db/);
  });

  it('a directory with no store (missing, empty, or another kind of file) is refused with STORE_NOT_A_DATABASE', async () => {
    const empty = join(dir, 'no-store-empty');
    const other = join(dir, 'no-store-other');
    await mkdir(empty);
    await mkdir(other);
    await writeFile(join(other, 'notes.txt'), 'not a store');
    for (const db of [join(dir, 'no-store-missing'), empty, other]) {
      const r = await spawnCli(['serve', '--db', db, '--libp2p-port', 'off', '--exit-on-stdin-end']).done;
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/\(STORE_NOT_A_DATABASE\)/);
    }
  });

  it('a server started on a directory with a damaged version record serves every other version and says which is not served', async () => {
    const db = join(dir, 'damaged-at-start');
    const rootsOf: string[] = [];
    for (let v = 1; v <= 4; v++) rootsOf.push(await importEntries(db, `d${v}`, Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`key-${String(i * v).padStart(4, '0')}`, `value ${v}`]))));
    damageVersionRecord(db, 2);
    const [v1, v2, v3, v4] = rootsOf as [string, string, string, string];
    const { child, info, stderr } = await serveDb(db);
    const c = await wsClient(info.ws);
    try {
      expect(info).toMatchObject({ versions: 3, root: v4 });
      expect(await roots(c)).toEqual([v1, v3, v4]);
      expect(stderr()).toMatch(/version 2 is not served: STORE_CORRUPT the record of version 2/);
      for (const root of [v1, v3, v4]) {
        const chunk = await c.request({ kind: Kind.Chunk, root: bytes(root), index: 0 });
        expect(chunk.status).toBe(Status.Ok);
        verifyChunk(bytes(root), 0, chunk.payload);
      }
      expect((await c.request({ kind: Kind.Chunk, root: bytes(v2), index: 0 })).status).toBe(Status.UnknownRoot);
      // Said once, not again at each read of the records.
      await sleep(300);
      await roots(c);
      expect(stderr().match(/version 2 is not served/g)).toHaveLength(1);
    } finally {
      c.close();
      await stop(child);
    }
  });
});

/** Stops a serve child: SIGTERM, then SIGKILL after 10 s. */
async function stop(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve();
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, 10_000);
    child.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
  });
}
