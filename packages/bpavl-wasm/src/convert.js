// Value constructors and checks that src/convert.rs imports: each result
// object is built in one call across the boundary. Conversions only.

/** An `Error` whose `name` is the Rust error type and `code` its stable code (spec/errors.md). */
export function codedError(name, code, message) {
  const e = new Error(message);
  e.name = name;
  e.code = code;
  return e;
}

export function typeError(message) {
  return new TypeError(message);
}

export function rangeError(message) {
  return new RangeError(message);
}

/** Length of `v` if it is a Uint8Array (also from another realm, or a Buffer), else -1. */
export function bytesLength(v) {
  return v instanceof Uint8Array || (ArrayBuffer.isView(v) && v.constructor?.name === 'Uint8Array')
    ? v.length
    : -1;
}

/** Copies `v` into `dst`, a view of wasm memory of the same length. */
export function copyBytes(v, dst) {
  dst.set(v);
}

/** `[key, value][]` from entries laid end to end in `flat`; `ends` holds each key's and value's end offset. */
export function pairs(flat, ends) {
  const out = new Array(ends.length >>> 1);
  let at = 0;
  for (let i = 0; i < out.length; i++) {
    const k = ends[2 * i];
    const v = ends[2 * i + 1];
    out[i] = [flat.slice(at, k), flat.slice(k, v)];
    at = v;
  }
  return out;
}

export function numbers(view) {
  return Array.from(view);
}

/** `root` is a view of wasm memory: copied here. */
export function commitResult(version, root) {
  return { version, root: root.slice() };
}

export function entryPosition(chunkIndex, position, chunks, entries) {
  return { chunkIndex, position, chunks, entries };
}

export function chunkPosition(index, chunks, entries, keyHeight) {
  return { index, chunks, entries, keyHeight };
}

export function rangeResult(entries, complete, resumeKey) {
  return { entries, complete, resumeKey };
}
