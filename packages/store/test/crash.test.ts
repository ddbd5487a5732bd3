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
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, it } from 'vitest';
import { instants, kill, startScript } from '../../storage/test/processes.ts';
import { openState } from '../src/index.ts';
import { changes } from './crash/commits.ts';

const KILLS = 55;
const EARLY_KILLS = 0.2;
const MAX_EARLY_MS = 300;
const MAX_COMMITTING_MS = 120;
const CHILD = new URL('./crash/child.ts', import.meta.url).pathname;

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
