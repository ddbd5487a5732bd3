// SIGKILL at random instants: a child process (child.ts write) writes
// numbered batches to the Node backend in a loop and prints each number once
// its write resolved; it is killed with SIGKILL at a random instant, 55
// times over one database: one kill in five at 0-300 ms after the start
// (while it starts or opens), the others at 0-80 ms after it opened (while
// it writes). After every kill the database must hold exactly batches 1 … last,
// each whole (never a torn batch), and last must be at least the highest
// number the child printed (no batch it reported as written is lost).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, it } from 'vitest';
import { openNodeBackend } from '../src/node/index.ts';
import { checkPrefix, TABLES } from './batches.ts';
import { instants, kill, startChild } from './processes.ts';

const KILLS = 55;
const EARLY_KILLS = 0.2;
const MAX_EARLY_MS = 300;
const MAX_WRITING_MS = 80;

const dir = mkdtempSync(join(tmpdir(), 'backends-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it(`every reopen after ${KILLS} SIGKILLs holds a whole prefix of the batches, none reported written is lost`, { timeout: 120_000 }, async () => {
  const random = instants(0x9e3779b9);
  let last = 0;
  let killedWhileWriting = 0;
  for (let i = 0; i < KILLS; i++) {
    const child = startChild('write', dir);
    if (random() < EARLY_KILLS) await sleep(Math.floor(random() * MAX_EARLY_MS));
    else {
      await child.waitFor('ready');
      await sleep(Math.floor(random() * MAX_WRITING_MS));
    }
    const lines = await kill(child);
    expect(child.process.signalCode, `kill ${i}`).toBe('SIGKILL');
    const reported = Math.max(last, ...lines.filter((l) => /^\d+$/.test(l)).map(Number));
    if (lines.length > 1) killedWhileWriting++;

    const backend = await openNodeBackend({ path: dir, tables: TABLES });
    const now = await checkPrefix(backend);
    await backend.close();
    expect(now, `kill ${i}: batches ${last} before, ${reported} reported`).toBeGreaterThanOrEqual(reported);
    last = now;
  }
  expect(last).toBeGreaterThan(0);
  console.info(`crash test: ${KILLS} SIGKILLs, ${killedWhileWriting} while writing, ${last} batches in the end`);
});
