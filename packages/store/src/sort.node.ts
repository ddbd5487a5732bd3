/**
 * `@bpavl/store/sort` (Node): sorts entries by key on disk, for a bulk load
 * (`State.bulkLoad`, `docs/store.md`, "A bulk load") of entries that come in
 * any order. The caller's thread copies the entries into runs of
 * `runBytes`; a worker thread (`sort-worker.node.ts`) sorts each run and
 * writes it to a file under a directory of its own, then merges the files
 * and hands the entries back in key order. The last entry of each key, in
 * input order, is the one kept. Memory stays near three times `runBytes`
 * (two runs, one filled while the worker sorts the other, and the read
 * buffers of a merge), whatever the input's size.
 * @module
 */

import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { putRecord, recordBytes, records } from './sort-records.node.ts';
import type { FromWorker, ToWorker } from './sort-worker.node.ts';

/** Default bytes of keys and values sorted in memory at a time. */
export const DEFAULT_RUN_BYTES = 32 << 20;
/** What a temporary directory's name starts with (`removeSortDirs`). */
const PREFIX = 'bpavl-sort-';
/** The worker's module, beside this one (Node strips its types as it does this module's). */
const WORKER = new URL('./sort-worker.node.ts', import.meta.url);

export interface SortOptions {
  /** Where the run files go (in a new directory, removed when the sort ends). */
  readonly dir: string;
  /** Bytes of keys and values sorted in memory at a time (default 32 MiB). */
  readonly runBytes?: number;
}

type Entry = readonly [Uint8Array, Uint8Array];

/**
 * `entries` in ascending key order, each key once (its last value in
 * input order). Nothing is yielded before the input has been read whole.
 * The arrays yielded are views of the sort's buffers, valid until the next
 * entry is asked for: copy what must be kept (`State.bulkLoad` copies each
 * entry as it takes it). The run files are removed, and the worker
 * stopped, when the iteration ends, fails or is left.
 *
 * @example
 * ```ts
 * await state.bulkLoad(sortEntries(readEntries(file), { dir: stateDir }));
 * ```
 */
export async function* sortEntries(entries: AsyncIterable<Entry> | Iterable<Entry>, options: SortOptions): AsyncGenerator<[Uint8Array, Uint8Array]> {
  const runBytes = options.runBytes ?? DEFAULT_RUN_BYTES;
  if (!Number.isSafeInteger(runBytes) || runBytes < 1) throw new RangeError('runBytes must be a positive integer');
  const sorter = new Sorter(runBytes);
  let dir: string | undefined;
  let runs = 0;
  try {
    let run = await sorter.buffer(0);
    let used = 0;
    for await (const [key, value] of entries) {
      if (key.length > 0xffff) throw new RangeError('a key to sort is longer than 65535 bytes');
      const size = recordBytes(key, value);
      if (used + size > run.length && used > 0) {
        dir ??= mkdtempSync(join(options.dir, PREFIX));
        sorter.send({ type: 'run', buffer: run.buffer as ArrayBuffer, used, path: join(dir, `${runs++}`) });
        [run, used] = [await sorter.buffer(size), 0];
      }
      if (size > run.length) {
        // An entry larger than a run, in a run of its own (the run before it went to the worker).
        sorter.giveBack(run);
        run = Buffer.allocUnsafeSlow(size);
      }
      used = putRecord(run, used, key, value);
    }
    sorter.send({ type: 'finish', buffer: run.buffer as ArrayBuffer, used, runBytes, ...(dir !== undefined && { path: join(dir, `${runs}`), dir }) });
    for (let out = await sorter.output(); out !== undefined; out = await sorter.output()) yield* records(out, out.length);
  } finally {
    await sorter.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** Removes the run directories a sort under `dir` left behind (a process killed during a sort). */
export function removeSortDirs(dir: string): void {
  for (const name of readdirSync(dir)) {
    if (name.startsWith(PREFIX)) rmSync(join(dir, name), { recursive: true, force: true });
  }
}

/**
 * The caller's side of a sort's worker: two run buffers of `runBytes` (one
 * filled here while the worker sorts the other), and the sorted output as
 * it comes. The worker keeps the process alive only while the caller
 * waits for it.
 */
class Sorter {
  readonly #worker: Worker;
  readonly #runBytes: number;
  /** Run buffers made (at most two), and those the worker handed back. */
  #made = 0;
  readonly #free: Buffer[] = [];
  /** Runs sent to the worker and not handed back yet. */
  #sorting = 0;
  readonly #outputs: Buffer[] = [];
  /** The output buffer being read, handed back when the next is taken (its views are then stale). */
  #reading: Buffer | undefined;
  #finished = false;
  #done = false;
  #stopping = false;
  #failure: Error | undefined;
  #wake: (() => void) | undefined;

  constructor(runBytes: number) {
    this.#runBytes = runBytes;
    this.#worker = new Worker(WORKER);
    this.#worker.unref();
    this.#worker.on('message', (m: FromWorker) => {
      if (m.type === 'written') {
        this.#sorting--;
        this.giveBack(Buffer.from(m.buffer));
      } else if (m.type === 'out') this.#outputs.push(Buffer.from(m.buffer, 0, m.used));
      else if (m.type === 'done') this.#done = true;
      else this.#failure ??= Object.assign(new Error(`the sort failed: ${m.message}`), m.code !== undefined && { code: m.code });
      this.#wake?.();
    });
    this.#worker.on('error', (e) => {
      this.#failure ??= e;
      this.#wake?.();
    });
    this.#worker.on('exit', (code) => {
      if (!this.#stopping) this.#failure ??= new Error(`the sort's worker stopped (exit ${code})`);
      this.#wake?.();
    });
  }

  send(m: ToWorker): void {
    this.#check();
    this.#worker.postMessage(m, 'buffer' in m && m.buffer !== undefined ? [m.buffer] : []);
    if (m.type === 'run') this.#sorting++;
    // Every run is in: the buffers kept for more are let go, and those still with the worker when they come back.
    if (m.type === 'finish') [this.#finished, this.#free.length] = [true, 0];
  }

  /**
   * A run buffer with room for a record of `size` bytes, once at most one
   * run is with the worker: a free one, a new one, or one the worker hands
   * back (a record larger than a run gets a buffer of its own).
   */
  async buffer(size: number): Promise<Buffer> {
    while (this.#sorting >= 2) await this.#message();
    if (size > this.#runBytes) return Buffer.allocUnsafeSlow(size);
    for (;;) {
      const free = this.#free.pop();
      if (free !== undefined) return free;
      if (this.#made < 2) {
        this.#made++;
        return Buffer.allocUnsafeSlow(this.#runBytes);
      }
      await this.#message();
    }
  }

  /** Keeps a run buffer for reuse (one made for a large record is let go). */
  giveBack(run: Buffer): void {
    if (run.length === this.#runBytes && !this.#finished) this.#free.push(run);
  }

  /** The next buffer of sorted records, or undefined at the end. */
  async output(): Promise<Buffer | undefined> {
    for (;;) {
      const out = this.#outputs.shift();
      if (out !== undefined) {
        const done = this.#reading?.buffer as ArrayBuffer | undefined;
        this.#reading = out;
        this.send({ type: 'taken', ...(done !== undefined && { buffer: done }) });
        return out;
      }
      if (this.#done) return undefined;
      await this.#message();
    }
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#worker.terminate();
  }

  #check(): void {
    if (this.#failure !== undefined) throw this.#failure;
  }

  /** Waits for the worker's next message (holding the process open meanwhile). */
  async #message(): Promise<void> {
    this.#check();
    this.#worker.ref();
    try {
      await new Promise<void>((wake) => (this.#wake = wake));
    } finally {
      this.#wake = undefined;
      this.#worker.unref();
    }
    this.#check();
  }
}
