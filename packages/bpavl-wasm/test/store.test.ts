// The state-store bindings (src/store.rs): a commit's write set, loading a
// version back from its records, and StoreError codes. The store's own
// behaviour is tested in packages/store.
import { describe, expect, it } from 'vitest';
import { decodeStoreRecord, decodeVersionRecord, encodeStoreRecord, entryValue, heldValue, init, Loader, PagedRange, Pages, type RecordTable, Tree, verifyAbsence } from '../index.js';
import { thrown, toHex, utf8 } from './helpers.js';

await init();

function committed() {
  const tree = new Tree(4);
  for (let i = 0; i < 30; i++) tree.insert(utf8(`k${i}`), utf8(`v${i}`));
  const w = tree.commitToStore();
  const records = new Map(w.puts.map(([t, k, v]) => [`${t}/${toHex(k)}`, v]));
  return { tree, w, records };
}

function load(w: { version: number; versionRecord: Uint8Array }, records: Map<string, Uint8Array>): Tree {
  const loader = new Loader(w.version, w.versionRecord, 4);
  for (let round = 0; round < 64; round++) {
    const wanted = loader.wanted();
    if (wanted.length === 0) return loader.finish();
    for (const [t, k] of wanted) loader.supply(t, k, records.get(`${t}/${toHex(k)}`));
  }
  throw new Error('too many rounds');
}

describe('commitToStore and Loader', () => {
  it('a write set loads back to the same tree', () => {
    const { tree, w, records } = committed();
    expect(w.version).toBe(1);
    expect(toHex(w.root)).toBe(toHex(tree.head().root));
    expect(new Set(w.puts.map(([t]) => t))).toEqual(new Set(['nodes', 'chunks', 'entries']));
    expect(w.puts.every(([, k]) => k.length === 40)).toBe(true);
    expect(w.stale).toEqual([]);
    const loaded = load(w, records);
    expect(toHex(loaded.head().root)).toBe(toHex(tree.head().root));
    expect(loaded.get(utf8('k7'))).toEqual(utf8('v7'));
  });

  it('the next commit writes what changed and marks what it replaced stale', () => {
    const { tree, records } = committed();
    tree.insert(utf8('k7'), utf8('new'));
    const w = tree.commitToStore();
    expect(w.puts.filter(([t]) => t === 'entries')).toHaveLength(1);
    expect(w.stale.length).toBeGreaterThan(0);
    expect(w.stale.every((k) => k.length === 49)).toBe(true);
    for (const [t, k, v] of w.puts) records.set(`${t}/${toHex(k)}`, v);
    expect(load(w, records).get(utf8('k7'))).toEqual(utf8('new'));
  });

  it('a missing or flipped record is StoreError STORE_CORRUPT', () => {
    const { w, records } = committed();
    const [first] = records.keys();
    // Its last byte: an entry record of a short value ("v0") is 3 bytes long.
    const flipped = records.get(first!)!.slice();
    flipped[flipped.length - 1]! ^= 1;
    const damaged = new Map(records).set(first!, flipped);
    expect(thrown(() => load(w, damaged))).toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
    const missing = new Map(records);
    missing.delete(first!);
    expect(thrown(() => load(w, missing))).toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
    const record = w.versionRecord.slice();
    record[record.length - 1]! ^= 1;
    expect(thrown(() => new Loader(1, record, 4))).toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
  });

  it('bad arguments are TypeError or RangeError', () => {
    const { w } = committed();
    const loader = new Loader(w.version, w.versionRecord, 4);
    expect(thrown(() => loader.supply('other', new Uint8Array(40), undefined))).toBeInstanceOf(RangeError);
    expect(thrown(() => loader.supply('nodes', new Uint8Array(39), undefined))).toBeInstanceOf(RangeError);
    expect(thrown(() => new Loader(1, 'x' as any, 4))).toBeInstanceOf(TypeError);
  });

  it('a head loader finishes only as a head, a whole-version loader only as a tree', () => {
    const { w } = committed();
    const head = Loader.head(w.version, w.versionRecord, 4);
    expect(thrown(() => head.finish())).toBeInstanceOf(RangeError);
    const whole = new Loader(w.version, w.versionRecord, 4);
    expect(thrown(() => whole.finishHead())).toBeInstanceOf(RangeError);
    head.free();
    whole.free();
  });
});

describe('the store record', () => {
  it('round-trips the capacity and rejects garbage', () => {
    expect(decodeStoreRecord(encodeStoreRecord(256))).toBe(256);
    expect(thrown(() => decodeStoreRecord(utf8('SQLite format 3')))).toMatchObject({ code: 'STORE_CORRUPT' });
  });
});

describe('Pages, decodeVersionRecord and entryValue', () => {
  it('look keys up in a stored version, found or bracketed', () => {
    const { tree, w, records } = committed();
    const record = decodeVersionRecord(w.versionRecord, 4);
    expect(record).toMatchObject({ root: w.root, chunkCount: tree.head().chunkCount, entryCount: 30 });
    const top = record.top!;
    const pages = new Pages(4, 0);
    const get = (key: Uint8Array): Uint8Array | undefined => {
      for (let round = 0; round < 64; round++) {
        const answer = pages.lookup(top[0], top[1], key);
        if ('found' in answer) return entryValue(answer.found, records.get(`entries/${toHex(answer.found)}`)!, key);
        if ('value' in answer) return answer.value;
        if ('held' in answer) return heldValue(records.get(`values/${toHex(answer.held)}`)!, key, answer.hash);
        if ('absent' in answer) {
          for (const [entry, slotKey] of answer.absent) entryValue(entry, records.get(`entries/${toHex(entry)}`)!, slotKey);
          return undefined;
        }
        for (const [t, k] of answer.need) pages.supply(t, k, records.get(`${t}/${toHex(k)}`));
      }
      throw new Error('too many rounds');
    };
    expect(get(utf8('k12'))).toEqual(utf8('v12'));
    expect(get(utf8('k125'))).toBeUndefined();
    expect(pages.misses).toBeGreaterThan(0);
    expect(pages.residentBytes).toBeLessThanOrEqual(pages.budget);
    const [entryKey] = [...records.keys()].filter((k) => k.startsWith('entries/'));
    const key = Buffer.from(entryKey!.slice(8), 'hex');
    expect(thrown(() => entryValue(key, utf8('nonsense'), utf8('k1')))).toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
  });

  it('prove absence in a stored version, and say present for a present key', () => {
    const { tree, w, records } = committed();
    const { top, root } = decodeVersionRecord(w.versionRecord, 4);
    const pages = new Pages(4, 0);
    const absence = (key: Uint8Array) => {
      for (let round = 0; round < 64; round++) {
        const answer = pages.proveAbsence(top![0], top![1], key);
        if (!('need' in answer)) return answer;
        for (const [t, k] of answer.need) pages.supply(t, k, records.get(`${t}/${toHex(k)}`));
      }
      throw new Error('too many rounds');
    };
    for (const key of ['a', 'k125', 'k19x', 'z'].map(utf8)) {
      const answer = absence(key);
      if (!('proof' in answer)) throw new Error('no proof');
      expect(answer.proof).toEqual(tree.head().proveAbsence(key));
      verifyAbsence(root, key, answer.proof);
    }
    expect(absence(utf8('k7'))).toEqual({ present: true });
    expect(thrown(() => pages.proveAbsence(top![0], top![1], new Uint8Array()))).toMatchObject({ code: 'KEY_EMPTY' });
    const empty = pages.proveAbsence(undefined, undefined, utf8('k'));
    if (!('proof' in empty)) throw new Error('no proof');
    verifyAbsence(new Tree(4).head().root, utf8('k'), empty.proof);
    expect(thrown(() => decodeVersionRecord(utf8('nonsense'), 4))).toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
  });

  it('prove ranges and chunks and export chunks as the snapshot does', () => {
    const { tree, w, records } = committed();
    const { top } = decodeVersionRecord(w.versionRecord, 4);
    const pages = new Pages(4, 0);
    const paged = (ask: () => { need: [RecordTable, Uint8Array][] } | { done: Uint8Array }) => {
      for (let round = 0; round < 256; round++) {
        const answer = ask();
        if ('done' in answer) return answer.done;
        for (const [t, k] of answer.need) pages.supply(t, k, records.get(`${t}/${toHex(k)}`));
      }
      throw new Error('too many rounds');
    };
    const range = new PagedRange(utf8('k1'), utf8('k3'), 9);
    expect(paged(() => pages.proveRange(top![0], top![1], range))).toEqual(tree.head().proveRange(utf8('k1'), utf8('k3'), 9));
    for (const index of [0, 3, tree.head().chunkCount - 1]) {
      expect(paged(() => pages.proveChunk(top![0], top![1], index))).toEqual(tree.head().proveChunk(index));
      expect(paged(() => pages.exportChunk(top![0], top![1], index))).toEqual(tree.head().exportChunk(index));
    }
    expect(thrown(() => pages.proveChunk(top![0], top![1], tree.head().chunkCount))).toMatchObject({ name: 'StoreError', code: 'STORE_CORRUPT' });
    expect(thrown(() => new PagedRange(utf8('b'), utf8('a'), 5))).toMatchObject({ name: 'ProofError', code: 'QUERY_INVALID' });
  });
});
