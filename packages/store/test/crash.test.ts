// SIGKILL at random instants: a child process (crash/child.ts) opens a store
// on the Node backend and commits versions in a loop, printing each version
// and root once its commit resolved; it is killed with SIGKILL at a random
// instant, 55 times over one directory (one kill in five while it starts,
// the others 0-120 ms after it opened; every fifth version is large enough
// to be written ahead in pieces, between its puts and at its commit). After every kill the store must open
// at the last version the child printed, or the one after it (killed after
// the write but before the print), whole: every record of the head is
// checked against its hash when the store opens, its root is the one
// printed, and it holds exactly the model replayed from commits.ts.
// A bulk load (crash/bulk-child.ts, sorted on disk by the sort's worker as
// `bpavl import` does) is killed the same way, each time into
// a new directory: the store then opens empty, with no record left, or at
// the whole loaded version with the root the child printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, it } from 'vitest';
import { instants, kill, startScript } from '../../storage/test/processes.ts';
import { openState } from '../src/index.ts';
import { bulkEntries, changes } from './crash/commits.ts';

const KILLS = 55;
const EARLY_KILLS = 0.2;
const MAX_EARLY_MS = 300;
const MAX_COMMITTING_MS = 120;
const CHILD = new URL('./crash/child.ts', import.meta.url).pathname;
const BULK_CHILD = new URL('./crash/bulk-child.ts', import.meta.url).pathname;
const BULK_KILLS = 12;
/** Kills land up to this long after "ready": the child's load (two sorts and the writes) takes about 0.7 s here. */
const MAX_LOADING_MS = 1000;

const dir = mkdtempSync(join(tmpdir(), 'store-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

it(`after each of ${KILLS} SIGKILLs the store opens at the last reported version (or the next), whole`, { timeout: 120_000 }, async () => {
  const random = instants(0x2545f491);
  const model = new Map<string, string>();
  let modelVersion = 0;
  const replayTo = (version: number) => {
    for (; modelVersion < version; ) {
      for (const [k, v] of changes(++modelVersion)) {
        if (v === undefined) model.delete(hex(k));
        else model.set(hex(k), hex(v));
      }
    }
  };
  /** Every root the children printed, by version. */
  const roots = new Map<number, string>();
  let head = 0;
  let killedWhileCommitting = 0;
  for (let i = 0; i < KILLS; i++) {
    const child = startScript(CHILD, dir);
    if (random() < EARLY_KILLS) await sleep(Math.floor(random() * MAX_EARLY_MS));
    else {
      await child.waitFor('ready');
      await sleep(Math.floor(random() * MAX_COMMITTING_MS));
    }
    const lines = await kill(child);
    expect(child.process.signalCode, `kill ${i}`).toBe('SIGKILL');
    const reports = lines.filter((l) => /^\d+ [0-9a-f]{64}$/.test(l)).map((l) => l.split(' '));
    const reported = reports.length > 0 ? Number(reports.at(-1)![0]) : head;
    if (reports.length > 0) killedWhileCommitting++;
    for (const [v, root] of reports) roots.set(Number(v), root!);

    const state = await openState({ path: dir });
    const now = state.head()?.version ?? 0;
    expect([reported, reported + 1], `kill ${i}: head ${head} before, ${reported} reported`).toContain(now);
    if (roots.has(now)) expect(hex(state.head()!.root), `kill ${i}: root of ${now}`).toBe(roots.get(now));
    replayTo(now);
    const snapshot = await state.snapshot();
    expect(snapshot.len).toBe(model.size);
    for (const [k, v] of model) expect(hex(snapshot.get(Buffer.from(k, 'hex'))!), `kill ${i}: key ${k}`).toBe(v);
    await state.close();
    head = now;
  }
  expect(head).toBeGreaterThan(0);
  console.info(`store crash test: ${KILLS} SIGKILLs, ${killedWhileCommitting} while committing, ${head} versions in the end`);
});

it(`after each of ${BULK_KILLS} SIGKILLs of a bulk load the store opens empty, or whole at the loaded root`, { timeout: 120_000 }, async () => {
  const random = instants(0x1b873593);
  const input = [...bulkEntries()];
  const outcomes = { empty: 0, loaded: 0 };
  for (let i = 0; i < BULK_KILLS; i++) {
    const at = join(dir, `bulk-${i}`);
    const child = startScript(BULK_CHILD, at);
    await child.waitFor('ready');
    await sleep(Math.floor(random() * MAX_LOADING_MS));
    const lines = await kill(child);
    expect(child.process.signalCode, `kill ${i}`).toBe('SIGKILL');
    const printed = lines.find((l) => l.startsWith('loaded '))?.slice('loaded '.length);

    let state = await openState({ path: at });
    const versions = state.versions();
    if (versions.length === 0) {
      expect(printed, `kill ${i}: a root was printed, but the store is empty`).toBeUndefined();
      // Nothing of the torn load stays (the open removed it), and a load into the same store then works.
      await state.close();
      const db = new DatabaseSync(join(at, 'data.sqlite'), { readOnly: true });
      const rows = ['nodes', 'chunks', 'entries'].map((t) => (db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n);
      db.close();
      expect(rows, `kill ${i}: records of the torn load`).toEqual([0, 0, 0]);
      state = await openState({ path: at });
      await state.bulkLoad(input);
      outcomes.empty++;
    } else {
      expect(versions.map((v) => v.version)).toEqual([1]);
      if (printed !== undefined) expect(hex(versions[0]!.root)).toBe(printed);
      outcomes.loaded++;
    }
    const snapshot = await state.snapshot();
    expect(snapshot.len).toBe(input.length);
    for (const [k, v] of input.filter((_, j) => j % 101 === 0)) expect(hex(snapshot.get(k)!)).toBe(hex(v));
    await state.close();
    rmSync(at, { recursive: true, force: true });
  }
  // Both outcomes happen: the kills land inside the load and after it.
  expect(outcomes.empty).toBeGreaterThan(0);
  console.info(`store crash test, bulk load: ${BULK_KILLS} SIGKILLs, ${outcomes.empty} left it empty, ${outcomes.loaded} after it`);
});
