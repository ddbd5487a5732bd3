// Value constructors that src/lib.rs imports. Conversions only.

/** An `Error` whose `name` is `BaselineError` and `code` the crate's stable code. */
export function codedError(name, code, message) {
  const e = new Error(message);
  e.name = name;
  e.code = code;
  return e;
}

export function rangeError(message) {
  return new RangeError(message);
}

/** `Uint8Array[]` from chunks laid end to end in `flat` (a view of wasm memory); `ends` holds each chunk's end offset. */
export function chunkArray(flat, ends) {
  const out = new Array(ends.length);
  let at = 0;
  for (let i = 0; i < ends.length; i++) {
    out[i] = flat.slice(at, ends[i]);
    at = ends[i];
  }
  return out;
}
