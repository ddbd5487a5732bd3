// A damaged database on the Node backend: bytes flipped in the SQLite file
// (at spread offsets, and inside stored records), the file truncated, one
// chunk record deleted through the backend. Opening the store and reading
// every retained version (whole snapshots and paged gets) must then either
// answer exactly the model or fail with a typed code; never a wrong answer.
// Every damaged copy is read twice, with pages copied and through SQLite's
// memory map (as `serve --db` and `check` read).
import { cpSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNodeBackend } from '../../storage/src/node/index.ts';
import { openState, TABLES } from '../src/index.ts';

const CODES = ['STORE_CORRUPT', 'STORE_NOT_A_DATABASE'];
const FILE = 'data.sqlite';
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const key = (k: number) => new Uint8Array([k >> 8, k & 0xff, 0x6b]);
const value = (k: number, v: number) => new Uint8Array(20 + (k % 30)).fill((k * 7 + v) & 0xff);

const root = mkdtempSync(join(tmpdir(), 'store-damage-'));
const pristine = join(root, 'pristine');
const models = new Map<number, Map<string, string>>();
let trials = 0;

beforeAll(async () => {
  const state = await openState({ path: pristine, capacity: 4 });
  const model = new Map<string, string>();
  for (let v = 1; v <= 3; v++) {
    for (let k = v; k < 120; k += v) {
      await state.put(key(k), value(k, v));
      model.set(hex(key(k)), hex(value(k, v)));
    }
    const { version } = await state.commit();
    models.set(version, new Map(model));
  }
  await state.close();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A copy of the pristine store, damaged by `damage`. */
function damaged(damage: (dir: string) => void): string {
  const dir = join(root, `trial-${trials++}`);
  cpSync(pristine, dir, { recursive: true });
  damage(dir);
  return dir;
}

/** Reads every retained version of the store in `dir`: each read is exact or throws. */
async function readAll(dir: string, mmapBytes: number): Promise<void> {
  const state = await openState({ path: dir, mmapBytes });
  try {
    for (const { version } of state.versions()) {
      const model = models.get(version)!;
      for (let k = 0; k < 125; k++) expect(hex((await state.get(key(k), { version })) ?? new Uint8Array())).toBe(model.get(hex(key(k))) ?? '');
      const snapshot = await state.snapshot({ version });
      expect(snapshot.len).toBe(model.size);
      for (const [k, v] of model) expect(hex(snapshot.get(Buffer.from(k, 'hex'))!)).toBe(v);
    }
  } finally {
    await state.close();
  }
}

/** `readAll`, which must either pass or fail with one of `CODES`; returns the code or 'intact'. */
async function outcomeOf(dir: string, mmapBytes: number): Promise<string> {
  try {
    await readAll(dir, mmapBytes);
    return 'intact';
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string' || !CODES.includes(code)) throw e;
    return code;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Bytes read through SQLite's memory map in the mapped runs, as `serve --db` and `check` read. */
const MAPPED = 1 << 26;

/** The outcome of reading `dir`, the same whether pages are copied or mapped (each on its own copy). */
async function outcome(dir: string): Promise<string> {
  const mapped = `${dir}-mapped`;
  cpSync(dir, mapped, { recursive: true });
  const copied = await outcomeOf(dir, 0);
  expect(await outcomeOf(mapped, MAPPED)).toBe(copied);
  return copied;
}

describe('a damaged database on the Node backend gives a typed error, never a wrong answer', { timeout: 60_000 }, () => {
  it('the pristine copy reads whole, and openState({ mmapBytes }) reads it through a map', async () => {
    expect(await outcome(damaged(() => undefined))).toBe('intact');
    const dir = damaged(() => undefined);
    const mapped = () => readFileSync('/proc/self/maps', 'utf8').split('\n').some((line) => line.endsWith(` ${join(dir, FILE)}`));
    for (const mmapBytes of [0, MAPPED]) {
      const state = await openState({ path: dir, readOnly: true, mmapBytes });
      expect(await state.get(key(1))).toBeDefined();
      expect(mapped()).toBe(mmapBytes > 0);
      await state.close();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('bytes flipped at spread offsets of the file', async () => {
    const size = readFileSync(join(pristine, FILE)).length;
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const at = Math.floor(((i + 0.5) / 40) * size);
      seen.add(await outcome(damaged((dir) => flip(join(dir, FILE), [at]))));
    }
    expect(seen.has('STORE_CORRUPT') || seen.has('STORE_NOT_A_DATABASE')).toBe(true);
  });

  it('bytes flipped inside stored records', async () => {
    const file = readFileSync(join(pristine, FILE));
    const backend = await openNodeBackend({ path: pristine, tables: TABLES, readOnly: true });
    const places: number[] = [];
    for (const table of ['nodes', 'chunks', 'entries']) {
      for await (const [, record] of backend.scan(table, { limit: 4 })) {
        const at = file.indexOf(Buffer.from(record));
        if (at >= 0) places.push(at + (record.length >> 1));
      }
    }
    await backend.close();
    expect(places.length).toBeGreaterThan(6);
    for (const at of places) expect(await outcome(damaged((dir) => flip(join(dir, FILE), [at])))).toBe('STORE_CORRUPT');
  });

  it('the file truncated', async () => {
    const size = readFileSync(join(pristine, FILE)).length;
    const outcomes: string[] = [];
    // A cut inside the last page may spare every record (then each read is exact); a
    // zero-length file is an empty SQLite database, so it is not tried here (docs/store.md, "Status").
    for (const fraction of [0.01, 0.25, 0.5, 0.75, 0.99]) {
      outcomes.push(await outcome(damaged((dir) => truncateSync(join(dir, FILE), Math.floor(size * fraction)))));
    }
    expect(outcomes.slice(0, 4)).toEqual(Array(4).fill('STORE_CORRUPT'));
  });

  it('one chunk record deleted through the backend', async () => {
    const dir = damaged(() => undefined);
    const backend = await openNodeBackend({ path: dir, tables: TABLES });
    for await (const [first] of backend.scan('chunks', { limit: 1 })) await backend.write({ deletes: [['chunks', first]] });
    await backend.close();
    expect(await outcome(dir)).toBe('STORE_CORRUPT');
  });
});

function flip(file: string, offsets: number[]): void {
  const bytes = readFileSync(file);
  for (const at of offsets) bytes[at]! ^= 0x41;
  writeFileSync(file, bytes);
}
