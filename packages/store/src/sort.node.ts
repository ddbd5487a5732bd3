/**
 * `@bpavl/store/sort` (Node): sorts entries by key on disk, for a bulk load
 * (`State.bulkLoad`, `docs/store.md`, "A bulk load") of entries that come in
 * any order. Runs of `runBytes` are sorted in memory and written to files
 * under a directory of their own, then merged; the last entry of each key,
 * in input order, is the one kept. Memory stays near twice `runBytes` (a
 * run, and the read buffers of a merge), whatever the input's size.
 * @module
 */

import { closeSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** Default bytes of keys and values sorted in memory at a time. */
export const DEFAULT_RUN_BYTES = 64 << 20;
/** Bytes read from each run file at a time during a merge, at most. */
const READ_BYTES = 256 << 10;
/** …and at least, however many runs a merge reads. */
const MIN_READ_BYTES = 4 << 10;
/** Bytes written to a run file at a time. */
const WRITE_BYTES = 4 << 20;
/** Runs merged at once (files open at once); more are merged into longer runs first. */
const MAX_MERGE = 128;
/** A run record's header: `u16be(key length) ‖ u32be(value length)`. */
const HEADER = 6;
/** What a temporary directory's name starts with (`removeSortDirs`). */
const PREFIX = 'bpavl-sort-';

export interface SortOptions {
  /** Where the run files go (in a new directory, removed when the sort ends). */
  readonly dir: string;
  /** Bytes of keys and values sorted in memory at a time (default 64 MiB). */
  readonly runBytes?: number;
}

type Entry = readonly [Uint8Array, Uint8Array];

/**
 * `entries` in ascending key order, each key once (its last value in
 * input order). Nothing is yielded before the input has been read whole.
 * The arrays yielded are views of the sort's buffers, valid until the next
 * entry is asked for: copy what must be kept (`State.bulkLoad` copies each
 * entry as it takes it). The run files are removed when the iteration
 * ends, fails or is left.
 *
 * @example
 * ```ts
 * await state.bulkLoad(sortEntries(readEntries(file), { dir: stateDir }));
 * ```
 */
export async function* sortEntries(entries: AsyncIterable<Entry> | Iterable<Entry>, options: SortOptions): AsyncGenerator<[Uint8Array, Uint8Array]> {
  const runBytes = options.runBytes ?? DEFAULT_RUN_BYTES;
  if (!Number.isSafeInteger(runBytes) || runBytes < 1) throw new RangeError('runBytes must be a positive integer');
  let dir: string | undefined;
  const runs: string[] = [];
  try {
    const run = new Run(runBytes);
    for await (const [key, value] of entries) {
      if (key.length > 0xffff) throw new RangeError('a key to sort is longer than 65535 bytes');
      if (!run.fits(key, value) && run.count > 0) {
        dir ??= mkdtempSync(join(options.dir, PREFIX));
        runs.push(run.write(join(dir, `${runs.length}`)));
      }
      run.add(key, value);
    }
    if (runs.length === 0) {
      yield* run.sorted();
      return;
    }
    if (run.count > 0) runs.push(run.write(join(dir!, `${runs.length}`)));
    run.release();
    // A merged run takes the place of the runs it merged, which came before all the others: later runs still win.
    for (let made = 0; runs.length > MAX_MERGE; made++) {
      const merged = join(dir!, `m${made}`);
      writeRecords(merged, merge(runs.slice(0, MAX_MERGE), runBytes));
      runs.splice(0, MAX_MERGE, merged).forEach((path) => rmSync(path));
    }
    yield* merge(runs, runBytes);
  } finally {
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
 * The entries of one run, copied end to end into one buffer (not held as
 * the caller's arrays: a million small arrays weigh several times their
 * bytes in a JavaScript heap).
 */
class Run {
  count = 0;
  #arena: Buffer;
  #used = 0;
  /** Per entry: where its key starts, and its key and value lengths (the value follows the key). */
  #starts: number[] = [];
  #keyLens: number[] = [];
  #valueLens: number[] = [];
  /** Per entry: its key's bytes 0–5 and 6–11, each as a number (`prefixOf`). */
  #prefixes: number[] = [];
  #nextPrefixes: number[] = [];

  constructor(bytes: number) {
    this.#arena = Buffer.allocUnsafeSlow(bytes);
  }

  fits(key: Uint8Array, value: Uint8Array): boolean {
    return this.#used + key.length + value.length <= this.#arena.length;
  }

  add(key: Uint8Array, value: Uint8Array): void {
    const size = key.length + value.length;
    if (size > this.#arena.length - this.#used) {
      // An entry larger than a run, in a run of its own (sortEntries wrote the run before it).
      this.#arena = Buffer.allocUnsafeSlow(size);
    }
    this.#prefixes.push(prefixOf(key, 0));
    this.#nextPrefixes.push(prefixOf(key, 6));
    this.#starts.push(this.#used);
    this.#keyLens.push(key.length);
    this.#valueLens.push(value.length);
    this.#arena.set(key, this.#used);
    this.#arena.set(value, this.#used + key.length);
    this.#used += size;
    this.count++;
  }

  /** The run's entries in key order, each key once (the last added), as views of the run's buffer. */
  *sorted(): Generator<[Uint8Array, Uint8Array]> {
    const arena = this.#arena;
    for (const i of this.#order()) {
      const start = this.#starts[i]!;
      const valueAt = start + this.#keyLens[i]!;
      yield [arena.subarray(start, valueAt), arena.subarray(valueAt, valueAt + this.#valueLens[i]!)];
    }
  }

  /** Writes the run sorted, then empties it; returns the file's path. */
  write(path: string): string {
    writeRecords(path, this.sorted(), Math.min(WRITE_BYTES, this.#used + HEADER * this.count));
    [this.count, this.#used, this.#starts, this.#keyLens, this.#valueLens, this.#prefixes, this.#nextPrefixes] = [0, 0, [], [], [], [], []];
    return path;
  }

  /** Lets the buffer go (the merge needs none of it). */
  release(): void {
    this.#arena = Buffer.alloc(0);
  }

  /** Indexes in key order, equal keys in the order added, then only the last of each. */
  #order(): number[] {
    const [arena, starts, lens, prefixes, next] = [this.#arena, this.#starts, this.#keyLens, this.#prefixes, this.#nextPrefixes];
    // Numbers first (hashed keys nearly always differ in them; a record key's
    // first 8 bytes are its birth), then Buffer#compare on ranges of one buffer.
    const compare = (a: number, b: number) =>
      prefixes[a]! - prefixes[b]! || next[a]! - next[b]! || arena.compare(arena, starts[b]!, starts[b]! + lens[b]!, starts[a]!, starts[a]! + lens[a]!);
    const order = Array.from({ length: this.count }, (_, i) => i).sort((a, b) => compare(a, b) || a - b);
    return order.filter((i, at) => at + 1 === order.length || compare(i, order[at + 1]!) !== 0);
  }
}

/**
 * Bytes `at … at + 5` of `key` (zeros past its end) as a number: keys
 * whose numbers for bytes 0–5, then 6–11, differ sort as those numbers do,
 * since a zero is the least byte and a shorter key sorts first. Equal
 * numbers say nothing.
 */
function prefixOf(key: Uint8Array, at: number): number {
  let n = 0;
  for (let i = at; i < at + 6; i++) n = n * 256 + (key[i] ?? 0);
  return n;
}

/** Writes `records` to a new file at `path`: `u16be(key length) ‖ u32be(value length) ‖ key ‖ value` each. */
function writeRecords(path: string, records: Iterable<[Uint8Array, Uint8Array]>, bufferBytes = WRITE_BYTES): void {
  const fd = openSync(path, 'wx');
  try {
    let out = Buffer.allocUnsafe(bufferBytes);
    let at = 0;
    const flush = () => {
      writeAll(fd, out.subarray(0, at));
      at = 0;
    };
    for (const [key, value] of records) {
      const size = HEADER + key.length + value.length;
      if (at + size > out.length) flush();
      if (size > out.length) out = Buffer.allocUnsafe(size);
      out.writeUInt16BE(key.length, at);
      out.writeUInt32BE(value.length, at + 2);
      out.set(key, at + HEADER);
      out.set(value, at + HEADER + key.length);
      at += size;
    }
    flush();
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, bytes: Buffer): void {
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
}

/** A run file read back one record at a time. */
class RunReader {
  readonly run: number;
  key: Buffer = Buffer.alloc(0);
  value: Buffer = Buffer.alloc(0);
  readonly #fd: number;
  #buffer: Buffer;
  #start = 0;
  #end = 0;
  #eof = false;

  constructor(path: string, run: number, readBytes: number) {
    this.#fd = openSync(path, 'r');
    this.run = run;
    this.#buffer = Buffer.allocUnsafe(readBytes);
  }

  /** Moves to the next record; false at the end of the run (the file is closed then). */
  next(): boolean {
    if (!this.#have(HEADER)) return this.#close();
    const keyLen = this.#buffer.readUInt16BE(this.#start);
    const valueLen = this.#buffer.readUInt32BE(this.#start + 2);
    if (!this.#have(HEADER + keyLen + valueLen)) throw new Error('a sort run file ends inside a record');
    const at = this.#start + HEADER;
    // Views, not copies: valid until this reader moves again (the buffer is refilled under them).
    this.key = this.#buffer.subarray(at, at + keyLen);
    this.value = this.#buffer.subarray(at + keyLen, at + keyLen + valueLen);
    this.#start = at + keyLen + valueLen;
    return true;
  }

  /** Whether `n` bytes are buffered, reading more as needed (false only at a clean end). */
  #have(n: number): boolean {
    if (this.#end - this.#start >= n) return true;
    if (n > this.#buffer.length) {
      const bigger = Buffer.allocUnsafe(n);
      this.#buffer.copy(bigger, 0, this.#start, this.#end);
      [this.#buffer, this.#end, this.#start] = [bigger, this.#end - this.#start, 0];
    } else {
      this.#buffer.copy(this.#buffer, 0, this.#start, this.#end);
      [this.#end, this.#start] = [this.#end - this.#start, 0];
    }
    while (!this.#eof && this.#end < n) {
      const read = readSync(this.#fd, this.#buffer, this.#end, this.#buffer.length - this.#end, null);
      if (read === 0) this.#eof = true;
      this.#end += read;
    }
    if (this.#end >= n) return true;
    if (this.#end > 0) throw new Error('a sort run file ends inside a record');
    return false;
  }

  #close(): boolean {
    closeSync(this.#fd);
    return false;
  }

  close(): void {
    try {
      closeSync(this.#fd);
    } catch {
      // Closed at its end already.
    }
  }
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
