// spec/vectors through the WebAssembly build: every valid case verifies with
// exactly the expected outputs, every invalid case throws a ProofError with
// exactly the expected code, every tree of trees.json is reproduced by
// replaying its operations through the WASM Tree, every case of
// rebuild.json goes through the WASM Rebuilder, every catch-up piece of
// catchup.json through verifySubtree, verifyLeaves and verifyEntries, and
// every load of bulk_load.json through the WASM StoreBulkLoad.
import { describe, expect, it } from 'vitest';
import {
  init,
  Rebuilder,
  StoreBulkLoad,
  Tree,
  verifyAbsence,
  verifyMultiproof,
  verifyChunk,
  verifyChunkProof,
  verifyExistence,
  verifyExistenceBatch,
  verifyRange,
  verifySubtree,
  verifyLeaves,
  verifyEntries,
} from '../index.js';
import { hex, loadVectors, thrown, toHex } from './helpers.js';

await init();

// Vector cases are plain JSON (spec/vectors/README.md); fields are read by name.
type Case = any;
/** `[label, case]` rows for `it.each`. */
const valid = (cases: Case[], label: (c: Case, i: number) => string): [string, Case][] =>
  cases.map((c, i) => [label(c, i), c]);
/** `[code, why, case]` rows for `it.each`. */
const invalid = (cases: Case[]): [string, string, Case][] => cases.map((c) => [c.code, c.why, c]);

const pairsHex = (ps: [Uint8Array, Uint8Array][]) => ps.map(([k, v]) => [toHex(k), toHex(v)]);
const opt = (s: string | null) => (s === null ? undefined : hex(s));

/** The thrown error's code, checking it is a ProofError. */
function proofCode(f: () => unknown): string {
  const e = thrown(f);
  expect(e).toBeInstanceOf(Error);
  expect(e.name).toBe('ProofError');
  return e.code;
}

describe('existence.json', () => {
  const v = loadVectors('existence');
  it.each(valid(v.valid, (c) => c.description))('valid: %s', (_d, c) => {
    const r = verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof));
    expect(r).toEqual({ chunkIndex: c.chunk_index, position: c.position, chunkCount: c.chunk_count, entryCount: c.entry_count });
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof)))).toBe(code);
  });
  it('verifyExistenceBatch: every case, valid and invalid mixed, one batch per root', () => {
    const cases: Case[] = [...v.valid, ...v.invalid];
    const roots = [...new Set(cases.map((c) => c.root as string))];
    let checked = 0;
    for (const root of roots) {
      const mine = cases.filter((c) => c.root === root);
      const results = verifyExistenceBatch(
        hex(root),
        mine.map((c) => ({ key: hex(c.key), value: hex(c.value), proof: hex(c.proof) })),
      );
      expect(results).toHaveLength(mine.length);
      mine.forEach((c, i) => {
        const r = results[i];
        if (c.code === undefined) {
          expect(r).toEqual({ chunkIndex: c.chunk_index, position: c.position, chunkCount: c.chunk_count, entryCount: c.entry_count });
        } else {
          expect(r).toBeInstanceOf(Error);
          expect((r as Error).name).toBe('ProofError');
          expect((r as { code: string }).code).toBe(c.code);
        }
        checked++;
      });
    }
    expect(checked).toBe(v.valid.length + v.invalid.length);
  });
  it('verifyExistenceBatch: a TypeError for items that are not Uint8Arrays, a RangeError for a bad root', () => {
    const c = v.valid[0];
    const item = { key: hex(c.key), value: hex(c.value), proof: hex(c.proof) };
    expect(verifyExistenceBatch(hex(c.root), [])).toEqual([]);
    expect(thrown(() => verifyExistenceBatch(hex(c.root), [item, { ...item, proof: [1, 2] as never }]))).toBeInstanceOf(TypeError);
    expect(thrown(() => verifyExistenceBatch(hex(c.root), item as never))).toBeInstanceOf(TypeError);
    expect(thrown(() => verifyExistenceBatch(hex(c.root).subarray(1), [item]))).toBeInstanceOf(RangeError);
  });
});

describe('absence.json', () => {
  const v = loadVectors('absence');
  it.each(valid(v.valid, (c) => c.description))('valid: %s', (_d, c) => {
    const { left, right } = verifyAbsence(hex(c.root), hex(c.key), hex(c.proof));
    expect([left ? toHex(left.key) : null, right ? toHex(right.key) : null]).toEqual([c.left_key, c.right_key]);
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => verifyAbsence(hex(c.root), hex(c.key), hex(c.proof)))).toBe(code);
  });
});

describe('multiproof.json', () => {
  const v = loadVectors('multiproof');
  const keys = (c: { keys: string[] }) => c.keys.map(hex);
  it.each(valid(v.valid, (c) => c.description))('valid: %s', (_d, c) => {
    const r = verifyMultiproof(hex(c.root), keys(c), hex(c.proof));
    expect([r.values.map((x) => (x ? toHex(x) : null)), r.chunkCount, r.entryCount]).toEqual([c.values, c.chunk_count, c.entry_count]);
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => verifyMultiproof(hex(c.root), keys(c), hex(c.proof)))).toBe(code);
  });
});

describe('range.json', () => {
  const v = loadVectors('range');
  it.each(valid(v.valid, (c) => c.description))('valid: %s', (_d, c) => {
    const r = verifyRange(hex(c.root), hex(c.start), opt(c.end), c.limit, hex(c.proof));
    expect(pairsHex(r.entries)).toEqual(c.results);
    expect(r.complete).toBe(c.complete);
    expect(r.resumeKey === undefined ? null : toHex(r.resumeKey)).toBe(c.resume_key);
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => verifyRange(hex(c.root), hex(c.start), opt(c.end), c.limit, hex(c.proof)))).toBe(code);
  });
  it('null and undefined both mean an unbounded end', () => {
    const c = v.valid.find((c: Case) => c.end === null);
    const a = verifyRange(hex(c.root), hex(c.start), undefined, c.limit, hex(c.proof));
    const b = verifyRange(hex(c.root), hex(c.start), null, c.limit, hex(c.proof));
    expect(pairsHex(b.entries)).toEqual(pairsHex(a.entries));
  });
});

describe('chunk_proof.json', () => {
  const v = loadVectors('chunk_proof');
  it.each(valid(v.valid, (c, i) => `${c.tree} #${i}`))('valid: %s', (_d, c) => {
    const r = verifyChunkProof(hex(c.root), hex(c.proof));
    expect(r).toEqual({ index: c.index, chunkCount: c.chunk_count, entryCount: c.entry_count, keyHeight: c.key_height });
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => verifyChunkProof(hex(c.root), hex(c.proof)))).toBe(code);
  });
});

describe('chunk_envelope.json', () => {
  const v = loadVectors('chunk_envelope');
  it.each(valid(v.valid, (c, i) => `${c.tree} #${i}`))('valid: %s', (_d, c) => {
    const chunk = verifyChunk(hex(c.root), c.index, hex(c.envelope));
    try {
      expect({
        root: toHex(chunk.root),
        index: chunk.index,
        capacity: chunk.capacity,
        keyHeight: chunk.keyHeight,
        chunkCount: chunk.chunkCount,
        entryCount: chunk.entryCount,
        len: chunk.len,
        chunkEntries: pairsHex(chunk.entries),
      }).toEqual({
        root: c.root,
        index: c.index,
        capacity: c.capacity,
        keyHeight: c.key_height,
        chunkCount: c.chunk_count,
        entryCount: c.entry_count,
        len: c.chunk_entries.length,
        chunkEntries: c.chunk_entries,
      });
    } finally {
      chunk.free();
    }
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => verifyChunk(hex(c.root), c.index, hex(c.envelope)))).toBe(code);
  });
});

describe('rebuild.json', () => {
  const v = loadVectors('rebuild');
  /** Adds the case's envelopes in order; returns what each add returned. */
  const addAll = (r: Rebuilder, c: Case) => c.adds.map((a: Case) => r.add(a.index, hex(a.envelope)));
  it.each(valid(v.valid, (c) => c.description))('valid: %s', (_d, c) => {
    const r = new Rebuilder(hex(c.root));
    expect(addAll(r, c)).toEqual(c.adds.map((a: Case) => a.new));
    const tree = r.finish(c.version);
    expect([toHex(tree.head().root), tree.head().version, tree.chunkCount, tree.len]).toEqual([c.root, c.version, c.chunk_count, c.entry_count]);
    tree.free();
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    const r = new Rebuilder(hex(c.root));
    // Every add before `at` succeeds; the add at `at` fails, or (at null) finish does.
    const at = c.at ?? c.adds.length;
    addAll(r, { adds: c.adds.slice(0, at) });
    const failing = c.at === null ? () => r.finish(c.version) : () => addAll(r, { adds: [c.adds[at]] });
    const e = thrown(failing);
    expect([e.name, e.code]).toEqual(['RebuildError', code]);
  });
});

describe('catchup.json', () => {
  const v = loadVectors('catchup');
  const subtree = (c: Case) => verifySubtree(hex(c.path), hex(c.anchor), c.levels, c.capacity, hex(c.answer));
  it.each(valid(v.subtree.valid, (c, i) => `subtree ${i} of ${c.tree}`))('valid: %s', (_d, c) => {
    const got = subtree(c);
    expect(got.capacity).toBe(c.capacity_carried);
    const shown = got.nodes.map((n) => ({
      path: toHex(n.path),
      height: n.height,
      chunk_count: n.chunkCount,
      entry_count: n.entryCount,
      left_is_chunk: n.leftIsChunk,
      right_is_chunk: n.rightIsChunk,
      left: toHex(n.left),
      right: toHex(n.right),
      key_copy: toHex(n.keyCopy),
      hash: toHex(n.hash),
      kinds_proven: n.kindsProven,
    }));
    expect(shown).toEqual(c.nodes);
  });
  it.each(invalid(v.subtree.invalid))('subtree invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => subtree(c))).toBe(code);
  });
  const leaves = (c: Case) => verifyLeaves(hex(c.chunk_hash), c.capacity, hex(c.answer));
  it.each(valid(v.leaves.valid, (_c, i) => `leaves ${i}`))('valid: %s', (_d, c) => {
    expect(leaves(c).map(toHex)).toEqual(c.leaves);
  });
  it.each(invalid(v.leaves.invalid))('leaves invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => leaves(c))).toBe(code);
  });
  const entries = (c: Case) => verifyEntries(c.leaves.map(hex), hex(c.bitmap), hex(c.answer));
  it.each(valid(v.entries.valid, (_c, i) => `entries ${i}`))('valid: %s', (_d, c) => {
    expect(entries(c).map(([p, k, val]) => [p, toHex(k), toHex(val)])).toEqual(c.entries);
  });
  it.each(invalid(v.entries.invalid))('entries invalid %s: %s', (code, _w, c) => {
    expect(proofCode(() => entries(c))).toBe(code);
  });
});

describe('bulk_load.json: the loads through the WASM StoreBulkLoad', () => {
  const v = loadVectors('bulk_load');
  it.each(valid(v.valid, (c) => c.name))('valid: %s', (_n, c) => {
    const load = new StoreBulkLoad(c.capacity, 1);
    for (const [k, val] of c.entries) load.push(hex(k), hex(val));
    expect(load.entries).toBe(c.entry_count);
    const fullChunks = load.takePuts().filter(([table]) => table === 'chunks').length;
    const finished = load.finish();
    expect(toHex(finished.root)).toBe(c.root);
    expect(fullChunks + finished.puts.filter(([table]) => table === 'chunks').length).toBe(c.chunk_count);
    load.free();
  });
  it.each(invalid(v.invalid))('invalid %s: %s', (code, _w, c) => {
    const failed = thrown(() => {
      const load = new StoreBulkLoad(c.capacity, 1);
      c.entries.forEach(([k, val]: [string, string], i: number) => {
        try {
          load.push(hex(k), hex(val));
        } catch (e) {
          throw Object.assign(e as Error, { at: i });
        }
      });
    });
    expect([failed.name, failed.code, failed.at ?? null]).toEqual(['TreeError', code, c.at]);
  });
  it('a load as version 0 (a store before its first commit) is a RangeError', () => {
    expect(() => new StoreBulkLoad(4, 0)).toThrow(RangeError);
    new StoreBulkLoad(4, 1).free();
  });
});

describe('trees.json: replaying the operations through the WASM Tree', () => {
  const v = loadVectors('trees');
  it.each(valid(v.trees, (t) => t.name))('%s', (_n, t) => {
    const tree = new Tree(t.capacity);
    for (const op of t.ops) {
      if (op[0] === 'insert') tree.insert(hex(op[1]), hex(op[2]));
      else tree.remove(hex(op[1]));
    }
    const commit = tree.commit();
    expect(toHex(commit.root)).toBe(t.root);
    expect(commit.version).toBe(1);
    expect([tree.len, tree.chunkCount]).toEqual([t.entry_count, t.chunk_count]);
    for (const [k, val] of t.final_entries) expect(toHex(tree.get(hex(k))!)).toBe(val);
    // Each exported chunk verifies with the listed key-height and entries.
    const seen: string[][] = [];
    for (const c of t.chunk_list) {
      const chunk = verifyChunk(commit.root, c.index, tree.head().exportChunk(c.index));
      expect([chunk.index, chunk.keyHeight, chunk.len]).toEqual([c.index, c.key_height, c.entry_count]);
      seen.push(...pairsHex(chunk.entries));
      chunk.free();
    }
    expect(seen).toEqual(t.final_entries);
    tree.free();
  });
});
