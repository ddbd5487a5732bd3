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

export function entryPosition(chunkIndex, position, chunkCount, entryCount) {
  return { chunkIndex, position, chunkCount, entryCount };
}

export function chunkPosition(index, chunkCount, entryCount, keyHeight) {
  return { index, chunkCount, entryCount, keyHeight };
}

/** An absence proof's neighbour: `EntryPosition` plus its key and value (views of wasm memory: copied here). */
export function neighbour(key, value, position) {
  return { key: key.slice(), value: value.slice(), ...position };
}

export function absenceResult(left, right) {
  return { left, right };
}

export function rangeResult(entries, complete, resumeKey) {
  return { entries, complete, resumeKey };
}

/** Each value a view of `proof` (`spans`: start and end per key), `undefined` where `present` is 0. */
export function multiproofResult(proof, spans, present, chunkCount, entryCount) {
  const values = new Array(present.length);
  for (let i = 0; i < values.length; i++) values[i] = present[i] ? proof.subarray(spans[2 * i], spans[2 * i + 1]) : undefined;
  return { values, chunkCount, entryCount };
}

/**
 * Checks `items` is `{ key, value, proof }[]` of Uint8Arrays (a TypeError
 * naming the first bad one otherwise) and writes `[total bytes, items]` into `size`.
 */
export function existenceItemsSize(items, size) {
  if (!Array.isArray(items)) throw new TypeError('items must be an array of { key, value, proof }');
  let bytes = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const k = bytesLength(item?.key);
    const v = bytesLength(item?.value);
    const p = bytesLength(item?.proof);
    if (k < 0 || v < 0 || p < 0) {
      const field = k < 0 ? 'key' : v < 0 ? 'value' : 'proof';
      throw new TypeError(`items[${i}].${field} must be a Uint8Array`);
    }
    bytes += k + v + p;
  }
  size[0] = bytes;
  size[1] = items.length;
}

/** Lays out what `existenceItemsSize` checked: the bytes end to end in `flat`, each one's end in `ends`. */
export function copyExistenceItems(items, flat, ends) {
  let at = 0;
  for (let i = 0, e = 0; i < items.length; i++) {
    const { key, value, proof } = items[i];
    flat.set(key, at);
    ends[e++] = at += key.length;
    flat.set(value, at);
    ends[e++] = at += value.length;
    flat.set(proof, at);
    ends[e++] = at += proof.length;
  }
}

const RECORD_TABLES = [undefined, 'nodes', 'chunks', 'entries', 'values'];
const RECORD_KEY_LEN = 40;
const STALE_KEY_LEN = 49;

/** A WriteSet from records laid end to end (each a 40-byte key, then the value) and 49-byte stale keys. */
export function writeSet(version, root, putTables, putFlat, putEnds, staleFlat, discardedTables, discardedFlat, versionRecord) {
  return {
    version,
    root: root.slice(),
    puts: records(putTables, putFlat, putEnds),
    stale: staleKeys(staleFlat),
    discarded: tableKeys(discardedTables, discardedFlat),
    versionRecord: versionRecord.slice(),
  };
}

/** What `StoredHead.writeAhead` returns: records, stale marks and records to delete (views of wasm memory, copied here). */
export function writtenAhead(putTables, putFlat, putEnds, staleFlat, discardedTables, discardedFlat, unloaded) {
  return { puts: records(putTables, putFlat, putEnds), stale: staleKeys(staleFlat), discarded: tableKeys(discardedTables, discardedFlat), unloaded };
}

/** 49-byte stale keys laid end to end, each copied. */
export function staleKeys(flat) {
  const out = new Array(flat.length / STALE_KEY_LEN);
  for (let i = 0; i < out.length; i++) out[i] = flat.slice(i * STALE_KEY_LEN, (i + 1) * STALE_KEY_LEN);
  return out;
}

/**
 * `[table, key, record][]` from table ids and `key ‖ record` laid end to
 * end, each ending at `ends[i]`: views of one copy of `flat` (a view of wasm
 * memory), not a buffer per key and per record (a chunk's 258 records made
 * 516 small buffers for the allocator to churn through).
 */
function records(tables, flat, ends) {
  const copy = flat.slice();
  const out = new Array(tables.length);
  let at = 0;
  for (let i = 0; i < out.length; i++) {
    const end = ends[i];
    out[i] = [RECORD_TABLES[tables[i]], copy.subarray(at, at + RECORD_KEY_LEN), copy.subarray(at + RECORD_KEY_LEN, end)];
    at = end;
  }
  return out;
}

/** What `StoreSync.add` returns: a chunk's records and its progress record. */
export function chunkWrite(index, putTables, putFlat, putEnds, progress) {
  return { index, puts: records(putTables, putFlat, putEnds), progress: progress.slice() };
}

/** `[table, key][]` from table ids and 40-byte record keys laid end to end. */
export function tableKeys(tables, flat) {
  const out = new Array(tables.length);
  for (let i = 0; i < out.length; i++) {
    out[i] = [RECORD_TABLES[tables[i]], flat.slice(i * RECORD_KEY_LEN, (i + 1) * RECORD_KEY_LEN)];
  }
  return out;
}

/** A `Lookup`: records needed (kind 0), the entry found (1), the entries bracketing an absence (2), or the value found (3). */
export function lookupResult(kind, tables, flat, ends) {
  if (kind === 0) return { need: tableKeys(tables, flat) };
  if (kind === 1) return { found: flat.slice() };
  if (kind === 3) return { value: flat.slice() };
  if (kind === 4) return { held: flat.slice(0, RECORD_KEY_LEN), hash: flat.slice(RECORD_KEY_LEN) };
  return { absent: pairs(flat, ends) };
}

/** `[table, key]` for one record. */
export function tableKey(table, key) {
  return [RECORD_TABLES[table], key.slice()];
}

/** A `ProvenAbsent`: the absence proof, or present. */
export function absentResult(proof) {
  return proof === undefined ? { present: true } : { proof };
}

/** `{ done }` with a copy of the bytes. */
export function pagedBytes(done) {
  return { done: done.slice() };
}

/** A `VersionRecord` from its fields. */
export function versionFields(top, root, chunkCount, entryCount) {
  return { top, root: root.slice(), chunkCount, entryCount };
}

/** A `Proven`: the entry record's key (or the value, or the record holding it with its hash) and the proof, or not found. */
export function provenResult(entryKey, value, held, proof) {
  if (value !== undefined) return { value, proof };
  if (held !== undefined) return { held: held.subarray(0, RECORD_KEY_LEN), hash: held.subarray(RECORD_KEY_LEN), proof };
  return entryKey === undefined ? { notFound: true } : { found: entryKey, proof };
}

/** Record puts (`CatchUp.takePuts`, `StoreBulkLoad.takePuts`), as `chunkWrite`'s. */
export function recordPuts(putTables, putFlat, putEnds) {
  return records(putTables, putFlat, putEnds);
}

/** What a catch-up asks of peers next (`CatchUp.fetches`). */
export function catchUpFetch(kind, path, bitmap) {
  return kind === 'entries' ? { kind, path: path.slice(), bitmap: bitmap.slice() } : { kind, path: path.slice() };
}

/** What a finished catch-up returns: its write set, the tags of peers whose key copies lied, and its changed chunks' indices (a view of wasm memory, copied here). */
export function caughtUp(writeSet, liars, changed) {
  return { writeSet, liars: Array.from(liars), changedIndices: changed.slice() };
}

/** A subtree answer a catch-up took (`CatchUp.takeProgress`): views of wasm memory, copied here. */
export function progressItem(path, levels, answer) {
  return [path.slice(), levels, answer.slice()];
}

/** A subtree that checked (`verifySubtree`): the capacity it carries and its nodes (views of wasm memory, copied here). */
export function verifiedSubtree(capacity, paths, pathEnds, heights, counts, kinds, hashes, keys, keyEnds) {
  const nodes = new Array(heights.length);
  let p = 0;
  let k = 0;
  for (let i = 0; i < nodes.length; i++) {
    nodes[i] = {
      path: paths.slice(p, pathEnds[i]),
      height: heights[i],
      chunkCount: counts[2 * i],
      entryCount: counts[2 * i + 1],
      leftIsChunk: (kinds[i] & 1) !== 0,
      rightIsChunk: (kinds[i] & 2) !== 0,
      kindsProven: (kinds[i] & 4) !== 0,
      left: hashes.slice(96 * i, 96 * i + 32),
      right: hashes.slice(96 * i + 32, 96 * i + 64),
      hash: hashes.slice(96 * i + 64, 96 * i + 96),
      keyCopy: keys.slice(k, keyEnds[i]),
    };
    p = pathEnds[i];
    k = keyEnds[i];
  }
  return { capacity, nodes };
}

/** Hashes laid end to end (`verifyLeaves`), as 32-byte arrays. */
export function hashList(flat) {
  const out = new Array(flat.length / 32);
  for (let i = 0; i < out.length; i++) out[i] = flat.slice(32 * i, 32 * i + 32);
  return out;
}

/** Entries that checked (`verifyEntries`): `[position, key, value][]`. */
export function positionedEntries(positions, flat, ends) {
  const kv = pairs(flat, ends);
  return kv.map(([k, v], i) => [positions[i], k, v]);
}
