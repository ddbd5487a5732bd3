/**
 * The record format of `@bpavl/store/sort`, shared by the caller's thread
 * and the sort's worker: `u16be(key length) ‖ u32be(value length) ‖ key ‖
 * value`, end to end, in a run's buffer, in run files and in the sorted
 * output handed back.
 * @module
 */

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
