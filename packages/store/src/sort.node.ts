/**
 * `@bpavl/store/sort` (Node): sorts entries by key on disk, for a bulk load
 * (`State.bulkLoad`, `docs/store.md`, "A bulk load") of entries that come in
 * any order. The caller's thread copies the entries into runs of
 * `runBytes`; two worker threads (`sort-worker.node.ts`) sort the runs in
 * turn and write them to files under a directory of their own, then one
 * merges the files and hands the entries back in key order. The last entry
 * of each key, in input order, is the one kept. Memory stays near three
 * times `runBytes` (three runs: one filled while the workers sort the
 * others; the read buffers of a merge take their place), whatever the
 * input's size.
 * @module
 */

import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { StoreError } from './errors.ts';
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
 * for await (const [key, value] of sortEntries(readEntries(file), { dir })) use(key, value);
 * ```
 */
export async function* sortEntries(entries: AsyncIterable<Entry> | Iterable<Entry>, options: SortOptions): AsyncGenerator<[Uint8Array, Uint8Array]> {
  for await (const buffer of sortRecords(entries, options)) yield* records(buffer, buffer.length);
}

/**
 * The same sort as {@link sortEntries}, handed out as buffers of records
 * end to end, each `u16be(key length) ‖ u32be(value length) ‖ key ‖ value`
 * (about 4 MiB a buffer), valid until the next is asked for.
 * `State.bulkLoad` takes them as they are, making no object an entry: a
 * bulk load's fastest input.
 *
 * @example
 * ```ts
 * await state.bulkLoad(sortRecords(readEntries(file), { dir: stateDir }));
 * ```
 */
export async function* sortRecords(entries: AsyncIterable<Entry> | Iterable<Entry>, options: SortOptions): AsyncGenerator<Buffer> {
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
        dir ??= makeRunDir(options.dir);
        sorter.sendRun({ buffer: run.buffer as ArrayBuffer, used, path: join(dir, `${runs++}`) });
        [run, used] = [await sorter.buffer(size), 0];
      }
      if (size > run.length) {
        // An entry larger than a run, in a run of its own (the run before it went to the worker).
        sorter.giveBack(run);
        run = Buffer.allocUnsafeSlow(size);
      }
      used = putRecord(run, used, key, value);
    }
    await sorter.finish({
      buffer: run.buffer as ArrayBuffer,
      used,
      runBytes,
      runs: Array.from({ length: runs }, (_, i) => join(dir!, `${i}`)),
      ...(dir !== undefined && { path: join(dir, `${runs}`), dir }),
    });
    for (let out = await sorter.output(); out !== undefined; out = await sorter.output()) yield out;
  } finally {
    await sorter.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The sort's failure: a file it could not write or read (a full disk, a
 * missing directory, no permission: an errno code such as `ENOSPC`) is
 * `STORE_IO` (spec/errors.md, "Storage"), the errno kept in the message.
 */
function sortFailure(message: string, code: string | undefined): Error {
  if (code !== undefined && /^E[A-Z0-9]+$/.test(code)) return new StoreError('STORE_IO', `the sort failed: ${message} (${code})`);
  return Object.assign(new Error(`the sort failed: ${message}`), code !== undefined && { code });
}

/** The run files' directory under `dir` (`STORE_IO` when it cannot be made). */
function makeRunDir(dir: string): string {
  try {
    return mkdtempSync(join(dir, PREFIX));
  } catch (e) {
    const { message, code } = e as { message?: unknown; code?: unknown };
    throw sortFailure(String(message ?? e), typeof code === 'string' ? code : undefined);
  }
}

/** Removes the run directories a sort under `dir` left behind (a process killed during a sort). */
export function removeSortDirs(dir: string): void {
  for (const name of readdirSync(dir)) {
    if (name.startsWith(PREFIX)) rmSync(join(dir, name), { recursive: true, force: true });
  }
}

/** Workers a sort has: one sorts a run while the other sorts the next (the caller's thread fills runs meanwhile). */
const WORKERS = 2;

/**
 * The caller's side of a sort's workers: up to three run buffers of
 * `runBytes` (one filled here while each worker sorts another), runs handed
 * to the worker with fewer of them, and the sorted output as it comes from
 * the first worker, which merges. The workers keep the process alive only
 * while the caller waits for them.
 */
class Sorter {
  readonly #workers: Worker[] = [];
  readonly #runBytes: number;
  /** Run buffers made (at most {@link WORKERS} + 1), and those the workers handed back. */
  #made = 0;
  readonly #free: Buffer[] = [];
  /** Per worker: runs sent to it and not handed back yet. */
  readonly #sorting: number[] = [];
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
    for (let i = 0; i < WORKERS; i++) this.#workers.push(this.#start(i));
  }

  #start(index: number): Worker {
    const worker = new Worker(WORKER);
    worker.unref();
    this.#sorting.push(0);
    worker.on('message', (m: FromWorker) => {
      if (m.type === 'written') {
        this.#sorting[index]!--;
        this.giveBack(Buffer.from(m.buffer));
      } else if (m.type === 'out') this.#outputs.push(Buffer.from(m.buffer, 0, m.used));
      else if (m.type === 'done') this.#done = true;
      else this.#failure ??= sortFailure(m.message, m.code);
      this.#wake?.();
    });
    worker.on('error', (e) => {
      this.#failure ??= e;
      this.#wake?.();
    });
    worker.on('exit', (code) => {
      if (!this.#stopping) this.#failure ??= new Error(`the sort's worker stopped (exit ${code})`);
      this.#wake?.();
    });
    return worker;
  }

  /** Hands a full run to the worker with fewer runs to sort. */
  sendRun(m: Omit<Extract<ToWorker, { type: 'run' }>, 'type'>): void {
    const index = this.#sorting[1]! < this.#sorting[0]! ? 1 : 0;
    this.#post(index, { type: 'run', ...m });
    this.#sorting[index]!++;
  }

  /**
   * Hands the last run to the first worker once every other run is in its
   * file (the merge reads them all); the buffers kept for more runs, and
   * those still with a worker when they come back, are let go.
   */
  async finish(m: Omit<Extract<ToWorker, { type: 'finish' }>, 'type'>): Promise<void> {
    [this.#finished, this.#free.length] = [true, 0];
    while (this.#busy() > 0) await this.#message();
    this.#post(0, { type: 'finish', ...m });
  }

  /**
   * A run buffer with room for a record of `size` bytes, once each worker
   * has at most one run: a free one, a new one, or one a worker hands back
   * (a record larger than a run gets a buffer of its own).
   */
  async buffer(size: number): Promise<Buffer> {
    while (this.#busy() >= WORKERS) await this.#message();
    if (size > this.#runBytes) return Buffer.allocUnsafeSlow(size);
    for (;;) {
      const free = this.#free.pop();
      if (free !== undefined) return free;
      if (this.#made <= WORKERS) {
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
        this.#post(0, { type: 'taken', ...(done !== undefined && { buffer: done }) });
        return out;
      }
      if (this.#done) return undefined;
      await this.#message();
    }
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }

  #post(index: number, m: ToWorker): void {
    this.#check();
    this.#workers[index]!.postMessage(m, 'buffer' in m && m.buffer !== undefined ? [m.buffer] : []);
  }

  /** Runs with the workers, not handed back yet. */
  #busy(): number {
    return this.#sorting.reduce((a, b) => a + b, 0);
  }

  #check(): void {
    if (this.#failure !== undefined) throw this.#failure;
  }

  /** Waits for a worker's next message (holding the process open meanwhile). */
  async #message(): Promise<void> {
    this.#check();
    for (const w of this.#workers) w.ref();
    try {
      await new Promise<void>((wake) => (this.#wake = wake));
    } finally {
      this.#wake = undefined;
      for (const w of this.#workers) w.unref();
    }
    this.#check();
  }
}
