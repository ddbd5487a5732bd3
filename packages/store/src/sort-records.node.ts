/**
 * The record format of `@bpavl/store/sort`, shared by the caller's thread
 * and the sort's worker: `u16be(key length) ‖ u32be(value length) ‖ key ‖
 * value`, end to end, in a run's buffer, in run files and in the sorted
 * output handed back; and the run files' writer and reader.
 * @module
 */

import { closeSync, openSync, readSync, writeSync } from 'node:fs';

/** A record's header: `u16be(key length) ‖ u32be(value length)`. */
export const HEADER = 6;

/** Writes one record at `at` of `out` (which has room for it); returns where the next goes. */
export function putRecord(out: Buffer, at: number, key: Uint8Array, value: Uint8Array): number {
  out.writeUInt16BE(key.length, at);
  out.writeUInt32BE(value.length, at + 2);
  out.set(key, at + HEADER);
  out.set(value, at + HEADER + key.length);
  return at + HEADER + key.length + value.length;
}

/** The bytes one record of `key` and `value` takes. */
export function recordBytes(key: Uint8Array, value: Uint8Array): number {
  return HEADER + key.length + value.length;
}

/** The records of `bytes[0, end)` as views `[key, value]` of it (whole records only: they were written so). */
export function* records(bytes: Buffer, end: number): Generator<[Buffer, Buffer]> {
  for (let at = 0; at < end; ) {
    const keyAt = at + HEADER;
    const valueAt = keyAt + bytes.readUInt16BE(at);
    at = valueAt + bytes.readUInt32BE(at + 2);
    yield [bytes.subarray(keyAt, valueAt), bytes.subarray(valueAt, at)];
  }
}

/** Bytes written to a run file at a time, at most. */
export const WRITE_BYTES = 4 << 20;

/** Writes `records` to a new file at `path`. */
export function writeRecords(path: string, records: Iterable<readonly [Uint8Array, Uint8Array]>): void {
  const out = new RecordWriter(path);
  try {
    for (const [key, value] of records) out.put(key, value);
  } finally {
    out.close();
  }
}

/** A new file of records, written through a buffer of at most {@link WRITE_BYTES}. */
export class RecordWriter {
  readonly #fd: number;
  #out: Buffer;
  #at = 0;

  /** `sizeHint`: about the bytes to come (a smaller buffer for a small file). */
  constructor(path: string, sizeHint = WRITE_BYTES) {
    this.#fd = openSync(path, 'wx');
    this.#out = Buffer.allocUnsafe(Math.max(1, Math.min(WRITE_BYTES, sizeHint)));
  }

  put(key: Uint8Array, value: Uint8Array): void {
    this.#room(recordBytes(key, value));
    this.#at = putRecord(this.#out, this.#at, key, value);
  }

  /** Adds the records already encoded in `bytes[start, end)`. */
  copy(bytes: Buffer, start: number, end: number): void {
    this.#room(end - start);
    this.#at += bytes.copy(this.#out, this.#at, start, end);
  }

  /** Writes what is buffered and closes the file (its bytes are all written then, or it threw). */
  close(): void {
    try {
      this.#flush();
    } finally {
      closeSync(this.#fd);
    }
  }

  #room(size: number): void {
    if (this.#at + size > this.#out.length) this.#flush();
    if (size > this.#out.length) this.#out = Buffer.allocUnsafe(size);
  }

  #flush(): void {
    for (let done = 0; done < this.#at; ) done += writeSync(this.#fd, this.#out, done, this.#at - done);
    this.#at = 0;
  }
}

/** A run file read back one record at a time. */
export class RunReader {
  readonly run: number;
  key: Buffer = Buffer.alloc(0);
  value: Buffer = Buffer.alloc(0);
  readonly #fd: number;
  #buffer: Buffer;
  #start = 0;
  #end = 0;
  #eof = false;
  #closed = false;

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
    this.close();
    return false;
  }

  /** Closes the file once (its number may belong to another file afterwards). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeSync(this.#fd);
  }
}
