// `@bpavl/store/sort`: entries in any order, with repeated keys, come out
// in key order, each key once with its last value, whether they fit in one
// run or take many run files; the run files are gone afterwards, also when
// the input fails or the caller stops early.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { removeSortDirs, sortEntries } from '../src/sort.node.ts';

const dir = mkdtempSync(join(tmpdir(), 'bpavl-sort-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** `n` entries with keys of 1 … 40 bytes drawn from a small set (so they repeat), values of 0 … 3,000 bytes. */
function shuffled(n: number): [Uint8Array, Uint8Array][] {
  let x = 0x9e3779b9;
  const next = () => ((x = (x * 1103515245 + 12345) >>> 0), x >>> 8);
  return Array.from({ length: n }, (_, i) => {
    const k = next() % (n / 2);
    const key = new Uint8Array(1 + (k % 40)).fill(k & 0xff);
    key[0] = k >> 8;
    return [key, new Uint8Array(next() % 3000).fill(i & 0xff)];
  });
}

/** What the sort must give: the last value of each key, keys ascending. */
function expected(input: readonly [Uint8Array, Uint8Array][]): string[][] {
  const last = new Map<string, string>();
  for (const [k, v] of input) last.set(hex(k), hex(v));
  return [...last].sort(([a], [b]) => Buffer.compare(Buffer.from(a, 'hex'), Buffer.from(b, 'hex')));
}

async function collect(it: AsyncIterable<[Uint8Array, Uint8Array]>): Promise<string[][]> {
  const out: string[][] = [];
  for await (const [k, v] of it) out.push([hex(k), hex(v)]);
  return out;
}

describe('sortEntries', () => {
  it('sorts in memory and across run files, the last value of a key winning', { timeout: 30_000 }, async () => {
    // Runs of 1,000 bytes: most entries are larger than a run, and 600 runs take merges of merges (256 at a time).
    for (const [n, runBytes] of [[4000, 1 << 30], [4000, 200_000], [4000, 5_000], [600, 1_000]]) {
      const input = shuffled(n);
      expect(await collect(sortEntries(input, { dir, runBytes })), `runBytes ${runBytes}`).toEqual(expected(input));
      expect(readdirSync(dir)).toEqual([]);
    }
    expect(await collect(sortEntries([], { dir }))).toEqual([]);
  });

  it('takes an async source, and removes its files when the source fails or the caller stops', async () => {
    const input = shuffled(2000);
    async function* source(failAt = Infinity) {
      for (const [i, e] of input.entries()) {
        if (i === failAt) throw Object.assign(new Error('source failed'), { code: 'SOURCE' });
        yield e;
      }
    }
    expect(await collect(sortEntries(source(), { dir, runBytes: 50_000 }))).toEqual(expected(input));
    await expect(collect(sortEntries(source(1500), { dir, runBytes: 50_000 }))).rejects.toMatchObject({ code: 'SOURCE' });
    expect(readdirSync(dir)).toEqual([]);
    for await (const _ of sortEntries(source(), { dir, runBytes: 50_000 })) {
      expect(readdirSync(dir).length).toBe(1);
      break;
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it("passes the worker's failure on as STORE_IO (a file it cannot write: ENOENT here, ENOSPC on a full disk), and leaves nothing", async () => {
    const input = shuffled(2000);
    // The run directory goes once the first run is in it: the worker's next run file cannot be made.
    // A run file the worker makes while the directory is being removed leaves it (ENOTEMPTY); the
    // next entry tries again.
    async function* source() {
      for (const e of input) {
        for (const name of readdirSync(dir)) {
          if (readdirSync(join(dir, name)).length === 0) continue;
          try {
            rmSync(join(dir, name), { recursive: true });
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'ENOTEMPTY') throw error;
          }
        }
        yield e;
        await new Promise((r) => setImmediate(r));
      }
    }
    await expect(collect(sortEntries(source(), { dir, runBytes: 50_000 }))).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a bad run size and a key too long for its files, and removeSortDirs clears what a killed sort left', async () => {
    await expect(collect(sortEntries([], { dir, runBytes: 0 }))).rejects.toThrow(RangeError);
    await expect(collect(sortEntries([[new Uint8Array(65536), new Uint8Array()]], { dir }))).rejects.toThrow(RangeError);
    const left = mkdtempSync(join(dir, 'bpavl-sort-'));
    writeFileSync(join(left, '0'), 'x');
    writeFileSync(join(dir, 'keep'), 'y');
    removeSortDirs(dir);
    expect(readdirSync(dir)).toEqual(['keep']);
    rmSync(join(dir, 'keep'));
  });

  it('a run directory that cannot be made (a full disk; here its parent is a file) is STORE_IO', async () => {
    // The run files' directory cannot be made: its parent is a file.
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    expect(await collect(sortEntries(shuffled(2_000), { dir: file, runBytes: 4_096 })).catch((e: { code?: unknown }) => e.code)).toBe('STORE_IO');
    rmSync(file);
  });
});
