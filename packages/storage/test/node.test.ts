// The Node backend beyond the shared suite: the writer lock across
// processes (and its release when the holder is killed), readers in one
// process while another writes, and files that are not a database.
import { mkdtempSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isStorageError } from '../src/errors.ts';
import { holdsNoStore, openNodeBackend } from '../src/node/index.ts';
import { DATA_FILE } from '../src/node/sqlite.ts';
import { checkPrefix, checkStablePrefix, TABLES } from './batches.ts';
import { kill, startChild, type Child } from './processes.ts';

let dir: string;
const children: Child[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'backends-node-'));
});

afterEach(async () => {
  await Promise.all(children.splice(0).map(kill));
  rmSync(dir, { recursive: true, force: true });
});

function child(...args: string[]): Child {
  const c = startChild(...args);
  children.push(c);
  return c;
}

async function codeOf(action: () => Promise<unknown>): Promise<string> {
  try {
    await action();
    return 'succeeded';
  } catch (e) {
    if (!isStorageError(e)) throw e;
    return e.code;
  }
}

describe('Node backend across processes', () => {
  it('refuses a second writer from another process, lets readers in, and frees the lock when the holder is SIGKILLed', async () => {
    const holder = child('hold', dir);
    await holder.waitFor('ready');
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES }))).toBe('STORE_LOCKED');
    expect(await child('open', dir).exited).toEqual(['STORE_LOCKED']);
    const reader = await openNodeBackend({ path: dir, tables: TABLES, readOnly: true });
    expect(await checkPrefix(reader)).toBe(0);
    await kill(holder);
    const writer = await openNodeBackend({ path: dir, tables: TABLES });
    await writer.close();
    await reader.close();
  });

  it('a reader in this process sees only whole batches while another process writes them', { timeout: 90_000 }, async () => {
    // 10 ms apart, so that the reader's scans find quiet moments (see checkStablePrefix).
    const writer = child('write', dir, '30', '10');
    await writer.waitFor('ready');
    const reader = await openNodeBackend({ path: dir, tables: TABLES, readOnly: true });
    const seen: number[] = [];
    let running = true;
    void writer.exited.then(() => (running = false));
    for (let i = 0; running && i < 300; i++) seen.push(await checkStablePrefix(reader));
    expect(await writer.exited).toContain('30');
    seen.push(await checkPrefix(reader));
    expect(seen.at(-1)).toBe(30);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    await reader.close();
  });
});

describe('Node backend and files that are not its database', () => {
  it('a file that is not SQLite is STORE_NOT_A_DATABASE, for writers and readers', async () => {
    writeFileSync(join(dir, DATA_FILE), 'these are not the bytes of a database, but they are long enough to look like a header '.repeat(20));
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES }))).toBe('STORE_NOT_A_DATABASE');
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES, readOnly: true }))).toBe('STORE_NOT_A_DATABASE');
    // The failed writer let go of its lock.
    expect(await child('open', dir).exited).toEqual(['STORE_NOT_A_DATABASE']);
  });

  it("another application's SQLite database is STORE_NOT_A_DATABASE and is left as it was", async () => {
    const other = new DatabaseSync(join(dir, DATA_FILE));
    other.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')");
    other.close();
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES }))).toBe('STORE_NOT_A_DATABASE');
    const again = new DatabaseSync(join(dir, DATA_FILE), { readOnly: true });
    expect(again.prepare("SELECT group_concat(name) AS names FROM sqlite_schema WHERE type = 'table'").get()).toEqual({ names: 'notes' });
    again.close();
  });

  it('a read-only open finds no database in an empty or missing directory; a path that is a file is STORE_IO', async () => {
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES, readOnly: true }))).toBe('STORE_NOT_A_DATABASE');
    expect(await codeOf(() => openNodeBackend({ path: join(dir, 'missing'), tables: TABLES, readOnly: true }))).toBe('STORE_NOT_A_DATABASE');
    writeFileSync(join(dir, 'file'), 'x');
    expect(await codeOf(() => openNodeBackend({ path: join(dir, 'file'), tables: TABLES }))).toBe('STORE_IO');
  });

  it('holdsNoStore: true for what a writer has not made a store in yet, false for a store and for what is not one', async () => {
    // Nothing yet: a reader's open is STORE_NOT_A_DATABASE, and a writer makes the store there.
    expect(holdsNoStore(join(dir, 'missing', 'deeper'))).toBe(true);
    expect(holdsNoStore(dir)).toBe(true);
    writeFileSync(join(dir, 'notes.txt'), 'an operator\'s notes');
    expect(holdsNoStore(dir)).toBe(true);
    writeFileSync(join(dir, DATA_FILE), '');
    expect(holdsNoStore(dir)).toBe(true); // a new database: what a writer leaves before it sets the file up
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES, readOnly: true }))).toBe('STORE_NOT_A_DATABASE');
    const writer = await openNodeBackend({ path: dir, tables: TABLES });
    expect(holdsNoStore(dir)).toBe(false);
    await writer.close();
    expect(holdsNoStore(dir)).toBe(false);
    // Not a store: the open says what it is.
    const notSqlite = mkdtempSync(join(dir, 'not-sqlite-'));
    writeFileSync(join(notSqlite, DATA_FILE), 'these are not the bytes of a database, but they are long enough to look like a header '.repeat(20));
    expect(holdsNoStore(notSqlite)).toBe(false);
    const otherApp = mkdtempSync(join(dir, 'other-app-'));
    const other = new DatabaseSync(join(otherApp, DATA_FILE));
    other.exec("CREATE TABLE notes (body TEXT)");
    other.close();
    expect(holdsNoStore(otherApp)).toBe(false);
    rmSync(join(dir, `${DATA_FILE}-wal`), { force: true });
    rmSync(join(dir, `${DATA_FILE}-shm`), { force: true });
    truncateSync(join(dir, DATA_FILE), 0);
    expect(holdsNoStore(dir)).toBe(false); // store.made says a store was made: truncated (STORE_CORRUPT)
    writeFileSync(join(dir, 'file'), 'x');
    expect(holdsNoStore(join(dir, 'file'))).toBe(false);
  });

  it('a data file truncated to zero bytes, or removed, is STORE_CORRUPT, not a new empty store', async () => {
    const writer = await openNodeBackend({ path: dir, tables: TABLES });
    await writer.write({ puts: [['items', Uint8Array.of(1), Uint8Array.of(2)]] });
    await writer.close();
    rmSync(join(dir, `${DATA_FILE}-wal`), { force: true });
    rmSync(join(dir, `${DATA_FILE}-shm`), { force: true });
    truncateSync(join(dir, DATA_FILE), 0);
    for (let attempt = 0; attempt < 2; attempt++) {
      expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES }))).toBe('STORE_CORRUPT');
      expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES, readOnly: true }))).toBe('STORE_CORRUPT');
    }
    unlinkSync(join(dir, DATA_FILE));
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES }))).toBe('STORE_CORRUPT');
    expect(await codeOf(() => openNodeBackend({ path: dir, tables: TABLES, readOnly: true }))).toBe('STORE_CORRUPT');
    // The failed writer let go of its lock.
    expect(await child('open', dir).exited).toEqual(['STORE_CORRUPT']);
  });

  it('a record that another program stored as another SQLite type (TEXT, NULL) is STORE_CORRUPT on every read', async () => {
    const writer = await openNodeBackend({ path: dir, tables: TABLES });
    await writer.write({ puts: [['items', Uint8Array.of(1), Uint8Array.of(2)], ['items', Uint8Array.of(3), Uint8Array.of(4)]] });
    await writer.close();
    const db = new DatabaseSync(join(dir, DATA_FILE));
    db.exec(`UPDATE items SET v = 'text' WHERE k = x'01'; UPDATE items SET k = NULL WHERE k = x'03'`);
    db.close();
    const reader = await openNodeBackend({ path: dir, tables: TABLES, readOnly: true });
    expect(await codeOf(() => reader.get('items', Uint8Array.of(1)))).toBe('STORE_CORRUPT');
    expect(await codeOf(() => reader.getMany('items', [Uint8Array.of(1)]))).toBe('STORE_CORRUPT');
    expect(await codeOf(async () => {
      for await (const _ of reader.scan('items')) {
        // reads every row
      }
    })).toBe('STORE_CORRUPT');
    await reader.close();
  });

  it('compact gives the space of deleted records back to the file system', async () => {
    const writer = await openNodeBackend({ path: dir, tables: TABLES });
    const blob = new Uint8Array(140_000).fill(7);
    await writer.write({ puts: Array.from({ length: 64 }, (_, i) => ['items', Uint8Array.of(i + 1), blob] as const) });
    await writer.compact();
    const full = await writer.sizeBytes();
    await writer.write({ deletes: Array.from({ length: 56 }, (_, i) => ['items', Uint8Array.of(i + 1)] as const) });
    await writer.compact();
    const after = await writer.sizeBytes();
    expect(after).toBeLessThan(full * 0.25);
    expect(await writer.get('items', Uint8Array.of(64))).toEqual(blob);
    await writer.close();
  });

  it('a full compact packs the pages that deletes left partly empty', async () => {
    const writer = await openNodeBackend({ path: dir, tables: TABLES });
    const value = new Uint8Array(600).fill(9);
    const key = (i: number) => Uint8Array.of(i >> 8, i & 0xff);
    await writer.write({ puts: Array.from({ length: 4000 }, (_, i) => ['items', key(i), value] as const) });
    // Every other record: no page empties, so only a rewrite gives the space back.
    await writer.write({ deletes: Array.from({ length: 2000 }, (_, i) => ['items', key(2 * i)] as const) });
    await writer.compact();
    const freed = await writer.sizeBytes();
    await writer.compact({ full: true });
    const packed = await writer.sizeBytes();
    expect(packed).toBeLessThan(freed * 0.7);
    for (const i of [1, 2, 3999]) expect(await writer.get('items', key(i))).toEqual(i % 2 === 1 ? value : undefined);
    await writer.close();
  });

  it('reads copy pages unless mmapBytes asks for a memory map; a bad mmapBytes is TypeError / RangeError', async () => {
    // The data file itself, not its WAL index (`data.sqlite-shm`), which SQLite always maps.
    const mapped = () => readFileSync('/proc/self/maps', 'utf8').split('\n').some((line) => line.endsWith(` ${join(dir, DATA_FILE)}`));
    const value = new Uint8Array(100_000).fill(7);
    // Closed, so that the record is in the data file: pages still in the WAL are read from there.
    const writer = await openNodeBackend({ path: dir, tables: ['items'] });
    await writer.write({ puts: [['items', Uint8Array.of(1), value]] });
    await writer.close();
    for (const mmapBytes of [undefined, 0, 1 << 24]) {
      const b = await openNodeBackend({ path: dir, tables: ['items'], mmapBytes });
      expect(await b.get('items', Uint8Array.of(1))).toEqual(value);
      expect(mapped(), `mmapBytes ${mmapBytes}`).toBe(mmapBytes === 1 << 24);
      await b.close();
    }
    await expect(openNodeBackend({ path: dir, tables: ['items'], mmapBytes: '1' as unknown as number })).rejects.toBeInstanceOf(TypeError);
    for (const mmapBytes of [-1, 1.5, 2 ** 53]) await expect(openNodeBackend({ path: dir, tables: ['items'], mmapBytes })).rejects.toBeInstanceOf(RangeError);
    // The lock of a refused open is not kept.
    await (await openNodeBackend({ path: dir, tables: ['items'] })).close();
  });

  it('a table no writer has created yet reads as empty for a reader', async () => {
    const writer = await openNodeBackend({ path: dir, tables: ['items'] });
    await writer.write({ puts: [['items', Uint8Array.of(1), Uint8Array.of(2)]] });
    const reader = await openNodeBackend({ path: dir, tables: ['items', 'later'], readOnly: true });
    expect(await reader.get('later', Uint8Array.of(1))).toBeUndefined();
    expect(await reader.getMany('later', [Uint8Array.of(1)])).toEqual([undefined]);
    for await (const record of reader.scan('later')) expect.unreachable(`a record ${record}`);
    expect(await reader.get('items', Uint8Array.of(1))).toEqual(Uint8Array.of(2));
    await writer.close();
    await reader.close();
  });
});
