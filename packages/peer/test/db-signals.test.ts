// SIGINT and SIGTERM on the commands that write a state directory
// (src/interrupt.ts), as a user sends them: real child processes on a real
// SQLite database. A bulk import stopped during its on-disk sort removes the
// sort's directory and exits 130 with one ABORTED line; `generate --db`
// stopped between commits keeps its last commit (check passes); a sort
// directory that a killed process left is removed by the next writer. Every
// wait is bounded.
import { createWriteStream, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { openState } from '@bpavl/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, spawnCli, wasmReady } from './support.ts';

let dir: string;
beforeAll(async () => {
  await wasmReady();
  dir = await mkdtemp(join(tmpdir(), 'bpavl-db-signals-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const sortDirs = (db: string) => (existsSync(db) ? readdirSync(db).filter((n) => n.startsWith('bpavl-sort-')) : []);

/** Polls `ready` every 20 ms, at most `ms`. */
async function until(ready: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (await ready()) return true;
  return false;
}

/** The one JSON line of `stdout`. */
function oneLine(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

describe('signals on the commands that write a state directory', { timeout: 120_000 }, () => {
  it('a bulk import stopped by SIGINT during its sort exits 130 with one ABORTED line, its sort directory removed', async () => {
    // 1 KiB values: the sort's first 32 MiB run goes to its files after ~33 000 lines, long before the end.
    const file = join(dir, 'big.jsonl');
    const out = createWriteStream(file);
    const value = 'v'.repeat(1000);
    for (let i = 0; i < 120_000; i++) if (!out.write(`{"key":"key-${i}","value":"${value}"}\n`)) await once(out, 'drain');
    out.end();
    await once(out, 'finish');

    const db = join(dir, 'bulk');
    const run = spawnCli(['import', '--db', db, '--utf8', '--json', file], 'ignore', 60_000);
    expect(await until(() => sortDirs(db).length > 0, 30_000), 'the sort made its directory').toBe(true);
    run.child.kill('SIGINT');
    const { code, stdout, stderr } = await run.done;
    expect(code, stderr).toBe(130);
    expect(oneLine(stdout)).toEqual({ error: 'ABORTED', message: expect.any(String) });
    expect(sortDirs(db)).toEqual([]);
    const state = await openState({ path: db, readOnly: true });
    try {
      expect(state.head()).toBeUndefined();
    } finally {
      await state.close();
    }
  });

  it('a sort directory a killed bulk import left is removed by the next writer: generate --db, import --batch', async () => {
    const db = join(dir, 'leftover');
    const made = await spawnCli(['generate', '--db', db, '--entries', '1000', '--json'], 'ignore', 60_000).done;
    expect(made.code, made.stderr).toBe(0);
    const leave = () => {
      // What a SIGKILL during a bulk import's sort leaves: a directory of run files.
      mkdirSync(join(db, 'bpavl-sort-Xk2u9a'));
      writeFileSync(join(db, 'bpavl-sort-Xk2u9a', '0'), Buffer.alloc(1 << 16, 7));
      expect(sortDirs(db)).toEqual(['bpavl-sort-Xk2u9a']);
    };
    leave();
    const generated = await spawnCli(['generate', '--db', db, '--entries', '1000', '--seed', '1', '--json'], 'ignore', 60_000).done;
    expect(generated.code, generated.stderr).toBe(0);
    expect(sortDirs(db)).toEqual([]);

    leave();
    const file = join(dir, 'small.jsonl');
    writeFileSync(file, '{"key":"a","value":"1"}\n{"key":"b","value":"2"}\n');
    const imported = await spawnCli(['import', '--db', db, '--utf8', '--batch', '1', '--json', file], 'ignore', 60_000).done;
    expect(imported.code, imported.stderr).toBe(0);
    expect(sortDirs(db)).toEqual([]);

    // A reader leaves it: it holds no writer lock, and a bulk import may be sorting there.
    leave();
    const read = await spawnCli(['versions', '--db', db, '--json'], 'ignore', 60_000).done;
    expect(read.code, read.stderr).toBe(0);
    expect(sortDirs(db)).toEqual(['bpavl-sort-Xk2u9a']);
  });

  it('generate --db stopped by SIGTERM between commits exits 130 with an ABORTED line; the state keeps its last commit', async () => {
    const db = join(dir, 'generate');
    const batch = 20_000;
    // Far more entries than the bound leaves time for: the signal lands mid-way.
    const run = spawnCli(['generate', '--db', db, '--entries', '50000000', '--batch', String(batch), '--chunk', '64', '--json'], 'ignore', 60_000);
    const committed = async () => {
      if (!existsSync(join(db, 'data.sqlite'))) return false;
      const state = await openState({ path: db, readOnly: true }).catch(() => undefined);
      if (state === undefined) return false;
      try {
        return (state.head()?.version ?? 0) >= 2;
      } finally {
        await state.close();
      }
    };
    expect(await until(committed, 40_000), 'two commits').toBe(true);
    run.child.kill('SIGTERM');
    const { code, stdout, stderr } = await run.done;
    expect(code, stderr).toBe(130);
    expect(oneLine(stdout)).toEqual({ error: 'ABORTED', message: expect.any(String) });

    const state = await openState({ path: db, readOnly: true });
    try {
      const head = state.head()!;
      expect(head.version).toBeGreaterThanOrEqual(2);
      // Every commit holds whole batches: the batch the signal stopped was dropped.
      expect(head.entryCount).toBe(head.version * batch);
    } finally {
      await state.close();
    }
    const check = await spawnCli(['check', '--db', db, '--json'], 'ignore', 60_000).done;
    expect(check.code, check.stderr).toBe(0);
    expect(JSON.parse(check.stdout)).toMatchObject({ damaged: [], gone: [] });
  });
});
