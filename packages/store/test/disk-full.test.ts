/**
 * A full disk, made real: SQLite's `max_page_count` set on the writer's own
 * connection, so that a write needing a page past it fails with the engine's
 * own SQLITE_FULL (`STORE_IO`), and raising it is space freed. No fake error.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync, StatementSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openState } from '../src/index.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bpavl-full-'));
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

const SQLITE_FULL = 13;

/**
 * Watches the connections opened from now on (the writer's is the last to
 * run a statement). `afterFull` runs once the writer's transaction that
 * failed with SQLITE_FULL has been rolled back.
 */
function watch(afterFull: () => void): { writer: () => DatabaseSync } {
  const seen: DatabaseSync[] = [];
  let rollingBack = false;
  const exec = DatabaseSync.prototype.exec;
  vi.spyOn(DatabaseSync.prototype, 'exec').mockImplementation(function (this: DatabaseSync, sql: string) {
    if (!seen.includes(this)) seen.push(this);
    const r = exec.call(this, sql);
    if (sql === 'ROLLBACK' && rollingBack) {
      rollingBack = false;
      afterFull();
    }
    return r;
  });
  const run = StatementSync.prototype.run;
  vi.spyOn(StatementSync.prototype, 'run').mockImplementation(function (this: StatementSync, ...args: unknown[]) {
    try {
      return (run as (...a: unknown[]) => ReturnType<StatementSync['run']>).apply(this, args);
    } catch (e) {
      if ((((e as { errcode?: number }).errcode ?? 0) & 0xff) === SQLITE_FULL) {
        const db = seen.at(-1)!;
        if (db.isTransaction) rollingBack = true;
        else afterFull();
      }
      throw e;
    }
  });
  return { writer: () => seen.at(-1)! };
}

const key = (i: number) => new TextEncoder().encode(`key ${String(i).padStart(8, '0')}`);
const value = (i: number, round: number) => new Uint8Array(300).fill((i * 7 + round) & 0xff);
const batch = (from: number, to: number, round: number) => Array.from({ length: to - from }, (_, k) => [key(from + k), value(from + k, round)] as const);
const pageCount = (db: DatabaseSync) => (db.prepare('PRAGMA page_count').get() as { page_count: number }).page_count;

describe('a full disk (SQLITE_FULL from max_page_count)', () => {
  it('a batch written ahead that a full disk stops, and whose removal fails too, is removed before the next commit: a prune then keeps what the head uses', async () => {
    // On a full disk the removal of what was written ahead fails as well (its deletes need WAL
    // space); here another writer's lock makes it fail, a real error of the engine too.
    let blocker: DatabaseSync | undefined;
    const { writer } = watch(() => {
      if (blocker !== undefined) return;
      blocker = new DatabaseSync(join(dir, 'data.sqlite'), { timeout: 0 });
      blocker.exec('BEGIN IMMEDIATE');
    });
    const state = await openState({ path: dir, capacity: 64, cacheBytes: 1 << 20, batchBytes: 2 << 20 });
    await state.putMany(batch(0, 20_000, 1));
    const first = await state.commit();
    const db = writer();
    db.exec('PRAGMA busy_timeout = 0');
    db.exec(`PRAGMA max_page_count = ${pageCount(db) + 20}`);
    const failed = await state
      .putMany(batch(0, 20_000, 2))
      .then(() => state.commit())
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(failed).toMatchObject({ code: 'STORE_IO' });
    expect(blocker).toBeDefined();
    expect(state.head()?.version).toBe(first.version);
    // Space freed, the lock let go: the next batch commits, and a prune to it keeps it whole.
    blocker!.exec('ROLLBACK');
    blocker!.close();
    db.exec('PRAGMA max_page_count = 1073741823');
    await state.putMany(batch(0, 100, 3));
    const next = await state.commit();
    expect(next.version).toBe(first.version + 1);
    await state.prune({ keepLast: 1 });
    for (let i = 0; i < 20_000; i += 97) expect(await state.get(key(i))).toEqual(value(i, i < 100 ? 3 : 1));
    await state.close();
    const again = await openState({ path: dir });
    for (let i = 0; i < 20_000; i += 97) expect(await again.get(key(i))).toEqual(value(i, i < 100 ? 3 : 1));
    await again.close();
  });
});
