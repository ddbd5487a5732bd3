/**
 * `@bpavl/store/sort` (Node): sorts entries by key on disk, for a bulk load
 * (`State.bulkLoad`, `docs/store.md`, "A bulk load") of entries that come in
 * any order. Runs of `runBytes` are sorted in memory and written to files
 * under a directory of their own, then merged; the last entry of each key,
 * in input order, is the one kept. Memory stays near `runBytes` plus a read
 * buffer per run, whatever the input's size.
 * @module
 */

import { closeSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** Default bytes of keys and values sorted in memory at a time. */
export const DEFAULT_RUN_BYTES = 64 << 20;
/** Bytes read from each run file at a time during the merge. */
const READ_BYTES = 256 << 10;
/** Bytes written to a run file at a time. */
const WRITE_BYTES = 4 << 20;
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
 * The run files are removed when the iteration ends, fails or is left.
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
    let keys: Buffer[] = [];
    let values: Buffer[] = [];
    let bytes = 0;
    for await (const [key, value] of entries) {
      keys.push(asBuffer(key));
      values.push(asBuffer(value));
      bytes += key.length + value.length + HEADER;
      if (bytes >= runBytes) {
        dir ??= mkdtempSync(join(options.dir, PREFIX));
        runs.push(writeRun(join(dir, `${runs.length}`), keys, values));
        [keys, values, bytes] = [[], [], 0];
      }
    }
    if (runs.length === 0) {
      for (const i of sortedLast(keys)) yield [keys[i]!, values[i]!];
      return;
    }
    if (keys.length > 0) runs.push(writeRun(join(dir!, `${runs.length}`), keys, values));
    keys = values = [];
    yield* merge(runs);
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

function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.length);
}

/** Indexes of `keys` in key order, only the last of equal keys (Array.sort is stable). */
function sortedLast(keys: readonly Buffer[]): number[] {
  const order = keys.map((_, i) => i).sort((a, b) => Buffer.compare(keys[a]!, keys[b]!));
  return order.filter((i, at) => at + 1 === order.length || !keys[i]!.equals(keys[order[at + 1]!]!));
}

/** Writes one sorted run; returns its path. */
function writeRun(path: string, keys: readonly Buffer[], values: readonly Buffer[]): string {
  const fd = openSync(path, 'wx');
  try {
    let out = Buffer.allocUnsafe(WRITE_BYTES);
    let at = 0;
    const flush = () => {
      writeAll(fd, out.subarray(0, at));
      at = 0;
    };
    for (const i of sortedLast(keys)) {
      const [key, value] = [keys[i]!, values[i]!];
      const size = HEADER + key.length + value.length;
      if (at + size > out.length) flush();
      if (size > out.length) out = Buffer.allocUnsafe(size);
      out.writeUInt16BE(key.length, at);
      out.writeUInt32BE(value.length, at + 2);
      key.copy(out, at + HEADER);
      value.copy(out, at + HEADER + key.length);
      at += size;
    }
    flush();
  } finally {
    closeSync(fd);
  }
  return path;
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
  #buffer = Buffer.allocUnsafe(READ_BYTES);
  #start = 0;
  #end = 0;
  #eof = false;

  constructor(path: string, run: number) {
    this.#fd = openSync(path, 'r');
    this.run = run;
  }

  /** Moves to the next record; false at the end of the run (the file is closed then). */
  next(): boolean {
    if (!this.#have(HEADER)) return this.#close();
    const keyLen = this.#buffer.readUInt16BE(this.#start);
    const valueLen = this.#buffer.readUInt32BE(this.#start + 2);
    if (!this.#have(HEADER + keyLen + valueLen)) throw new Error('a sort run file ends inside a record');
    const at = this.#start + HEADER;
    // Copies: the buffer is refilled under them.
    this.key = Buffer.from(this.#buffer.subarray(at, at + keyLen));
    this.value = Buffer.from(this.#buffer.subarray(at + keyLen, at + keyLen + valueLen));
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

/** The runs merged in key order, each key once: the value of the latest run that holds it. */
function* merge(paths: readonly string[]): Generator<[Uint8Array, Uint8Array]> {
  const readers = paths.map((p, i) => new RunReader(p, i));
  try {
    const heap = new MinHeap(before);
    for (const r of readers) if (r.next()) heap.push(r);
    while (heap.size > 0) {
      const top = heap.pop();
      const [key, value] = [top.key, top.value];
      if (top.next()) heap.push(top);
      // Older runs' entries of the same key lose.
      while (heap.size > 0 && heap.peek().key.equals(key)) {
        const older = heap.pop();
        if (older.next()) heap.push(older);
      }
      yield [key, value];
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
