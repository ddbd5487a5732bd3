/**
 * A worker thread of `@bpavl/store/sort` (`sort.node.ts`; a sort has two).
 * It sorts each run its caller hands it and writes it to a file, handing the
 * run's buffer back; the one told to finish merges every run file (or
 * sorts the one run in memory) and hands the entries back in key order, in
 * buffers of records, at most {@link WINDOW} of them ahead of the caller.
 * So the caller's thread only copies entries in and reads them out, and the
 * sorting, the file writes and the merge run beside it.
 * @module
 */

import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { parentPort } from 'node:worker_threads';
import { HEADER, putRecord, recordBytes, RunReader, RecordWriter, writeRecords } from './sort-records.node.ts';

/** What the caller's thread sends. */
export type ToWorker =
  /** Sort the records of `buffer[0, used)` and write them to `path`; hand the buffer back. */
  | { readonly type: 'run'; readonly buffer: ArrayBuffer; readonly used: number; readonly path: string }
  /**
   * The last run: sorted in memory and handed back if no run went to a file
   * before it (`runs` empty); else written to `path`, and it and the files
   * `runs` (oldest first: a later run's value of a key wins; every one
   * written) merged, merges of merges written in `dir`.
   */
  | {
      readonly type: 'finish';
      readonly buffer: ArrayBuffer;
      readonly used: number;
      readonly runs: readonly string[];
      readonly path?: string;
      readonly dir?: string;
      readonly runBytes: number;
    }
  /** An output buffer was taken: one more may be sent. With it comes the one taken before, to be filled again. */
  | { readonly type: 'taken'; readonly buffer?: ArrayBuffer };

/** What the worker sends. */
export type FromWorker =
  | { readonly type: 'written'; readonly buffer: ArrayBuffer }
  | { readonly type: 'out'; readonly buffer: ArrayBuffer; readonly used: number }
  | { readonly type: 'done' }
  | { readonly type: 'failed'; readonly message: string; readonly code?: string };

/** Bytes of records an output buffer holds (a larger record gets a buffer of its own). */
const OUT_BYTES = 4 << 20;
/** Output buffers sent and not yet taken, at most. */
const WINDOW = 4;
/** Bytes read from each run file at a time during a merge, at most… */
const READ_BYTES = 256 << 10;
/** …and at least, however many runs a merge reads. */
const MIN_READ_BYTES = 4 << 10;
/** Runs merged at once (files open at once); more are merged into longer runs first. */
const MAX_MERGE = 256;

const port = parentPort!;
let taken = 0;
let wakeOnTaken: (() => void) | undefined;
/** Output buffers handed back, to be filled again. */
const pool: Buffer<ArrayBuffer>[] = [];

port.on('message', (m: ToWorker) => {
  try {
    if (m.type === 'taken') {
      taken++;
      if (m.buffer?.byteLength === OUT_BYTES) pool.push(Buffer.from(m.buffer));
      wakeOnTaken?.();
    } else if (m.type === 'run') {
      new Run(Buffer.from(m.buffer), m.used).write(m.path);
      port.postMessage({ type: 'written', buffer: m.buffer } satisfies FromWorker, [m.buffer]);
    } else finish(m).catch(failed);
  } catch (e) {
    failed(e);
  }
});

function failed(e: unknown): void {
  const { message, code } = e as { message?: unknown; code?: unknown };
  port.postMessage({ type: 'failed', message: String(message ?? e), ...(typeof code === 'string' && { code }) } satisfies FromWorker);
}

async function finish(m: Extract<ToWorker, { type: 'finish' }>): Promise<void> {
  let sorted: Iterable<[Uint8Array, Uint8Array]>;
  const runs = [...m.runs];
  if (runs.length === 0) sorted = new Run(Buffer.from(m.buffer), m.used).sorted();
  else {
    // The last run's buffer is garbage once written: the merge's read buffers take its place.
    if (m.used > 0) {
      new Run(Buffer.from(m.buffer), m.used).write(m.path!);
      runs.push(m.path!);
    }
    // A merged run takes the place of the runs it merged, which came before all the others: later runs still win.
    for (let made = 0; runs.length > MAX_MERGE; made++) {
      const merged = join(m.dir!, `m${made}`);
      writeRecords(merged, merge(runs.slice(0, MAX_MERGE), m.runBytes));
      runs.splice(0, MAX_MERGE, merged).forEach((path) => rmSync(path));
    }
    sorted = merge(runs, m.runBytes);
  }
  const out = new Output();
  for (const [key, value] of sorted) if (out.put(key, value)) await out.room();
  out.send();
  port.postMessage({ type: 'done' } satisfies FromWorker);
}

/** The sorted entries, copied into buffers of records and sent, a window at a time. */
class Output {
  #buffer = Buffer.allocUnsafeSlow(OUT_BYTES);
  #used = 0;
  #sent = 0;

  /** Adds a record; true when the window is full (wait for {@link room}). */
  put(key: Uint8Array, value: Uint8Array): boolean {
    const size = recordBytes(key, value);
    if (this.#used + size > this.#buffer.length) {
      this.send();
      if (size > this.#buffer.length) this.#buffer = Buffer.allocUnsafeSlow(size);
    }
    this.#used = putRecord(this.#buffer, this.#used, key, value);
    return this.#sent - taken >= WINDOW;
  }

  /** Sends what the current buffer holds (its memory goes with it). */
  send(): void {
    if (this.#used === 0) return;
    const buffer = this.#buffer.buffer as ArrayBuffer;
    port.postMessage({ type: 'out', buffer, used: this.#used } satisfies FromWorker, [buffer]);
    this.#sent++;
    [this.#buffer, this.#used] = [pool.pop() ?? Buffer.allocUnsafeSlow(OUT_BYTES), 0];
  }

  async room(): Promise<void> {
    while (this.#sent - taken >= WINDOW) await new Promise<void>((wake) => (wakeOnTaken = wake));
    wakeOnTaken = undefined;
  }
}

/** The records of a run's buffer, in key order, each key once (the last in the buffer). */
class Run {
  readonly #bytes: Buffer;
  /** Per record: where its key starts, and its key and value lengths (the value follows the key). */
  readonly #starts: number[] = [];
  readonly #keyLens: number[] = [];
  readonly #valueLens: number[] = [];
  /** Per record: its key's bytes 0–5 and 6–11, each as a number (`prefixOf`). */
  readonly #prefixes: number[] = [];
  readonly #nextPrefixes: number[] = [];

  constructor(bytes: Buffer, used: number) {
    this.#bytes = bytes;
    for (let at = 0; at < used; ) {
      const keyLen = bytes.readUInt16BE(at);
      const valueLen = bytes.readUInt32BE(at + 2);
      const start = at + HEADER;
      this.#starts.push(start);
      this.#keyLens.push(keyLen);
      this.#valueLens.push(valueLen);
      this.#prefixes.push(prefixOf(bytes, start, keyLen, 0));
      this.#nextPrefixes.push(prefixOf(bytes, start, keyLen, 6));
      at = start + keyLen + valueLen;
    }
  }

  /**
   * Writes the records in key order, each key once, to a new file at
   * `path`: each record's bytes copied whole, header and all, since a run's
   * records are already in the files' format (no views, no re-encoding).
   */
  write(path: string): void {
    const [bytes, starts, keyLens, valueLens] = [this.#bytes, this.#starts, this.#keyLens, this.#valueLens];
    const out = new RecordWriter(path, bytes.length);
    try {
      for (const i of this.#order()) out.copy(bytes, starts[i]! - HEADER, starts[i]! + keyLens[i]! + valueLens[i]!);
    } finally {
      out.close();
    }
  }

  /** The records in key order, each key once, as views of the buffer. */
  *sorted(): Generator<[Uint8Array, Uint8Array]> {
    const bytes = this.#bytes;
    for (const i of this.#order()) {
      const start = this.#starts[i]!;
      const valueAt = start + this.#keyLens[i]!;
      yield [bytes.subarray(start, valueAt), bytes.subarray(valueAt, valueAt + this.#valueLens[i]!)];
    }
  }

  /** Indexes in key order, equal keys in the order added, then only the last of each. */
  #order(): number[] {
    const [bytes, starts, lens, prefixes, next] = [this.#bytes, this.#starts, this.#keyLens, this.#prefixes, this.#nextPrefixes];
    // Numbers first (hashed keys nearly always differ in them; a record key's
    // first 8 bytes are its birth), then Buffer#compare on ranges of one buffer.
    const compare = (a: number, b: number) =>
      prefixes[a]! - prefixes[b]! || next[a]! - next[b]! || bytes.compare(bytes, starts[b]!, starts[b]! + lens[b]!, starts[a]!, starts[a]! + lens[a]!);
    const order = Array.from({ length: starts.length }, (_, i) => i).sort((a, b) => compare(a, b) || a - b);
    return order.filter((i, at) => at + 1 === order.length || compare(i, order[at + 1]!) !== 0);
  }
}

/**
 * Bytes `from … from + 5` of the key of `length` bytes at `start` (zeros
 * past its end) as a number: keys whose numbers for bytes 0–5, then 6–11,
 * differ sort as those numbers do, since a zero is the least byte and a
 * shorter key sorts first. Equal numbers say nothing.
 */
function prefixOf(bytes: Buffer, start: number, length: number, from: number): number {
  let n = 0;
  for (let i = from; i < from + 6; i++) n = n * 256 + (i < length ? bytes[start + i]! : 0);
  return n;
}

/** Smaller key first; of equal keys the later run first (it wins). */
function before(a: RunReader, b: RunReader): boolean {
  const c = Buffer.compare(a.key, b.key);
  return c < 0 || (c === 0 && a.run > b.run);
}

/**
 * The runs merged in key order, each key once: the value of the latest run
 * that holds it. Their read buffers share about `runBytes`.
 */
function* merge(paths: readonly string[], runBytes: number): Generator<[Uint8Array, Uint8Array]> {
  const readBytes = Math.max(MIN_READ_BYTES, Math.min(READ_BYTES, Math.floor(runBytes / paths.length)));
  const readers = paths.map((p, i) => new RunReader(p, i, readBytes));
  try {
    const heap = new MinHeap(before);
    for (const r of readers) if (r.next()) heap.push(r);
    while (heap.size > 0) {
      const top = heap.pop();
      yield [top.key, top.value];
      // Older runs' entries of the same key lose; compared while `top` has not moved, so its key is in place.
      while (heap.size > 0 && heap.peek().key.equals(top.key)) {
        const older = heap.pop();
        if (older.next()) heap.push(older);
      }
      if (top.next()) heap.push(top);
    }
  } finally {
    for (const r of readers) r.close();
  }
}

/** A binary min-heap under `less`. */
class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;

  constructor(less: (a: T, b: T) => boolean) {
    this.#less = less;
  }

  get size(): number {
    return this.#items.length;
  }

  peek(): T {
    return this.#items[0]!;
  }

  push(item: T): void {
    const items = this.#items;
    let i = items.push(item) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): T {
    const items = this.#items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      for (let i = 0; ; ) {
        const [l, r] = [2 * i + 1, 2 * i + 2];
        let least = i;
        if (l < items.length && this.#less(items[l]!, items[least]!)) least = l;
        if (r < items.length && this.#less(items[r]!, items[least]!)) least = r;
        if (least === i) break;
        [items[i], items[least]] = [items[least]!, items[i]!];
        i = least;
      }
    }
    return top;
  }
}
