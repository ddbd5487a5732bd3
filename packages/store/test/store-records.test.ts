// The records and keys the store reads itself, against spec/vectors/store_records.json
// (spec/store-format.md): the keys of records.ts, and the records it decodes
// through the WASM exports (store, version, values and entry records, and
// sync progress records through StoreSync, which decodes them: the store
// never does; chunk deltas through the loader of Pages, which applies them
// to their base and checks the chunk's hash). Node and full chunk records
// are read only inside the core's loader, whose Rust suite checks them
// (crates/core/tests/vectors.rs).
import { describe, expect, it } from 'vitest';
import { decodeStoreRecord, decodeVersionRecord, encodeStoreRecord, entryValue, heldValue, init, Pages, StoreSync } from '@bpavl/wasm';
import { indexOfProgress, progressKey, staleRecord, staleTable, valuesKeys, versionKey, versionOf } from '../src/records.ts';
import { hex, loadVectors, thrown, toHex } from '../../bpavl-wasm/test/helpers.ts';

await init();
const vectors = loadVectors('store_records');

/** The case's code, from what `f` threw. */
const codeOf = (f: () => unknown): unknown => thrown(f).code;

/** An entry record's key: the birth only locates the record, the hash is what it must verify to. */
const entryKey = (entryHash: string): Uint8Array => hex(`${'00'.repeat(8)}${entryHash}`);

describe('store records', () => {
  it('store records decode to their capacity and encode back; invalid ones are refused', () => {
    for (const c of vectors.store.valid) {
      expect([c.description, decodeStoreRecord(hex(c.record))]).toEqual([c.description, c.capacity]);
      expect(toHex(encodeStoreRecord(c.capacity))).toBe(c.record);
    }
    for (const c of vectors.store.invalid) expect([c.why, codeOf(() => decodeStoreRecord(hex(c.record)))]).toEqual([c.why, c.code]);
  });

  it('version records decode to their fields; invalid ones are refused', () => {
    for (const c of vectors.version.valid) {
      const v = decodeVersionRecord(hex(c.record), c.capacity);
      const top = v.top === undefined ? null : { table: v.top[0], key: toHex(v.top[1]) };
      expect({ top, root: toHex(v.root), chunkCount: v.chunkCount, entryCount: v.entryCount }).toEqual({
        top: c.top === null ? null : { table: c.top.table, key: c.top.key },
        root: c.root,
        chunkCount: c.chunk_count,
        entryCount: c.entry_count,
      });
    }
    for (const c of vectors.version.invalid) {
      expect([c.why, codeOf(() => decodeVersionRecord(hex(c.record), c.capacity))]).toEqual([c.why, c.code]);
    }
  });

  it("values records give each slot's value, checked against its entry hash; invalid ones are refused", () => {
    for (const c of vectors.values.valid) {
      for (const v of c.values) expect(toHex(heldValue(hex(c.record), hex(v.key), hex(v.entry_hash)))).toBe(v.value);
    }
    for (const c of vectors.values.invalid) {
      expect([c.why, codeOf(() => heldValue(hex(c.record), hex(c.key), hex(c.entry_hash)))]).toEqual([c.why, c.code]);
    }
  });

  it('entry records give their value, checked with the slot key; invalid ones are refused', () => {
    for (const c of vectors.entry.valid) {
      expect(toHex(entryValue(entryKey(c.entry_hash), hex(c.record), hex(c.key)))).toBe(c.value);
    }
    for (const c of vectors.entry.invalid) {
      expect([c.why, codeOf(() => entryValue(entryKey(c.entry_hash), hex(c.record), hex(c.key)))]).toEqual([c.why, c.code]);
    }
  });

  it("chunk deltas load, through their base, to the chunk's entry hashes; invalid ones are refused", () => {
    // The LEAVES answer of a one-chunk version whose top is the delta, keyed by its chunk hash
    // (the birth only locates it); every other chunk record asked for is given the base.
    const leaves = (c: { capacity: number; chunk_hash: string; record: string; base_record: string }): Uint8Array => {
      using pages = new Pages(c.capacity, 1 << 22);
      const key = hex(`${'00'.repeat(7)}02${c.chunk_hash}`);
      for (let round = 0; round < 8; round++) {
        const r = pages.exportLeaves('chunks', key, Uint8Array.of(0));
        if ('done' in r) return r.done;
        for (const [table, k] of r.need) {
          pages.supply(table, k, table !== 'chunks' ? undefined : toHex(k) === toHex(key) ? hex(c.record) : hex(c.base_record));
        }
      }
      throw new Error('no answer in 8 rounds');
    };
    for (const c of vectors.chunk_delta.valid) {
      const hashes = c.slots.map((s: { entry_hash?: string; entry?: { hash: string } }) => s.entry_hash ?? s.entry!.hash).join('');
      expect([c.description, toHex(leaves(c))]).toEqual([c.description, `0f${c.slots.length.toString(16).padStart(2, '0')}${hashes}`]);
    }
    for (const c of vectors.chunk_delta.invalid) expect([c.why, codeOf(() => leaves(c))]).toEqual([c.why, c.code]);
  });

  it('sync progress records name their chunk record and are taken back by a new run of the sync; invalid ones are refused', () => {
    const syncOf = (c: { root: string; version: number }): StoreSync => new StoreSync(hex(c.root), c.version);
    const chunkRecord = (r: string | null): Uint8Array | undefined => (r === null ? undefined : hex(r));
    for (const c of vectors.progress.valid) {
      using sync = syncOf(c);
      const record = hex(c.record);
      expect([c.description, toHex(sync.chunkKey(record)!)]).toEqual([c.description, c.chunk_key]);
      sync.restore(c.index, record, hex(c.chunk_record));
      // The record's capacity, and the chunk count its path folds to, are the sync's now.
      expect([c.description, sync.has(c.index), sync.capacity, sync.chunkCount]).toEqual([c.description, true, c.capacity, c.chunk_count]);
    }
    for (const c of vectors.progress.invalid) {
      using sync = syncOf(c);
      const record = hex(c.record);
      // Decoding alone (chunkKey) refuses a "decode" case and takes a "restore" one.
      if (c.fails === 'decode') expect([c.why, codeOf(() => sync.chunkKey(record))]).toEqual([c.why, c.code]);
      else expect([c.why, sync.chunkKey(record) !== undefined]).toEqual([c.why, true]);
      expect([c.why, codeOf(() => sync.restore(c.index, record, chunkRecord(c.chunk_record)))]).toEqual([c.why, c.code]);
    }
  });
});

describe('store keys', () => {
  const keys = vectors.keys;

  it('version keys are u64be(version), and a record key starts with its birth', () => {
    for (const v of keys.versions) {
      expect(toHex(versionKey(v.version))).toBe(v.key);
      expect(versionOf(hex(v.key))).toBe(v.version);
    }
    for (const r of keys.record_keys) expect(versionOf(hex(r.key))).toBe(r.birth);
  });

  it('a progress key is sync ‖ u64be(index)', () => {
    for (const c of vectors.progress.valid) {
      expect(toHex(progressKey(c.index))).toBe(c.key);
      expect(indexOfProgress(hex(c.key))).toBe(c.index);
    }
  });

  it("a full chunk record's values records have its key's first 39 bytes and the group's index", () => {
    for (const c of keys.values_keys) expect(valuesKeys(hex(c.chunk_key), c.capacity).map(toHex)).toEqual(c.keys);
  });

  it('a stale key names its table and record; one that names none is refused', () => {
    for (const c of keys.stale.valid) {
      const key = hex(c.key);
      expect([staleTable(key), toHex(staleRecord(key)), versionOf(key)]).toEqual([c.table, c.record_key, c.since]);
    }
    for (const c of keys.stale.invalid) expect([c.why, codeOf(() => staleTable(hex(c.key)))]).toEqual([c.why, c.code]);
  });
});
