// Tree, proofs, chunk export and rebuild, all inside WebAssembly: a tree
// checked against a Map model, every kind of proof verified against its
// root, and state sync (export every chunk, verify, rebuild from a shuffled
// order) reproducing the identical tree.
import { describe, expect, it } from 'vitest';
import {
  init,
  initSync,
  Rebuilder,
  Tree,
  verifyAbsence,
  verifyChunk,
  verifyChunkProof,
  verifyExistence,
  verifyRange,
} from '../index.js';
import { readFileSync } from 'node:fs';
import { rng, shuffle, thrown, toHex, utf8 } from './helpers.js';

await init();

const key = (i: number) => utf8(`key-${String(i).padStart(6, '0')}`);
const value = (i: number, round = 0) => utf8(`value-${i}-${round}`.repeat(1 + (i % 3)));

/** A tree of capacity 8 after random inserts, replacements and removals, and its model. */
function randomTree(seed: number, ops: number): { tree: Tree; model: Map<string, Uint8Array> } {
  const random = rng(seed);
  const tree = new Tree(8);
  const model = new Map<string, Uint8Array>();
  for (let n = 0; n < ops; n++) {
    const i = Math.floor(random() * 1500);
    const k = key(i);
    if (random() < 0.75) {
      const v = value(i, n);
      expect(tree.insert(k, v)).toBe(!model.has(toHex(k)));
      model.set(toHex(k), v);
    } else {
      expect(tree.remove(k)).toBe(model.delete(toHex(k)));
    }
  }
  return { tree, model };
}

describe('Tree', () => {
  it('matches a Map model and proves every key against the committed root', () => {
    const { tree, model } = randomTree(7, 4000);
    expect(tree.len).toBe(model.size);
    for (let i = 0; i < 1500; i++) {
      const want = model.get(toHex(key(i)));
      const got = tree.get(key(i));
      expect(got === undefined ? undefined : toHex(got)).toBe(want === undefined ? undefined : toHex(want));
    }
    expect(tree.head().version).toBe(0);
    const { version, root } = tree.commit();
    expect(version).toBe(1);
    expect(toHex(tree.head().root)).toBe(toHex(root));
    for (let i = 0; i < 1500; i += 7) {
      const want = model.get(toHex(key(i)));
      if (want) {
        const p = verifyExistence(root, key(i), want, tree.head().proveExistence(key(i)));
        expect(p.chunkCount).toBe(tree.chunkCount);
        expect(p.entryCount).toBe(model.size);
      } else {
        const { left, right } = verifyAbsence(root, key(i), tree.head().proveAbsence(key(i)));
        expect(left === undefined || toHex(left.key) < toHex(key(i))).toBe(true);
        expect(right === undefined || toHex(key(i)) < toHex(right.key)).toBe(true);
      }
    }
    tree.free();
  });

  it('pages through the whole tree with range proofs and resume keys', () => {
    const { tree, model } = randomTree(11, 2000);
    const { root } = tree.commit();
    const sorted = [...model.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const got: [string, string][] = [];
    let start: Uint8Array | undefined = new Uint8Array();
    while (start !== undefined) {
      const r = verifyRange(root, start, undefined, 37, tree.head().proveRange(start, undefined, 37));
      got.push(...r.entries.map(([k, v]): [string, string] => [toHex(k), toHex(v)]));
      expect(r.complete).toBe(r.resumeKey === undefined);
      start = r.resumeKey;
    }
    expect(got).toEqual(sorted.map(([k, v]) => [k, toHex(v)]));
    // A bounded window.
    const r = verifyRange(root, key(100), key(200), 1000, tree.head().proveRange(key(100), key(200), 1000));
    expect(r.complete).toBe(true);
    expect(r.entries.map(([k]) => toHex(k))).toEqual(
      sorted.map(([k]) => k).filter((k) => k >= toHex(key(100)) && k < toHex(key(200))),
    );
    tree.free();
  });

  it('proves every chunk at its index', () => {
    const { tree } = randomTree(3, 1500);
    const { root } = tree.commit();
    for (let i = 0; i < tree.chunkCount; i++) {
      const p = verifyChunkProof(root, tree.head().proveChunk(i));
      expect([p.index, p.chunkCount, p.entryCount]).toEqual([i, tree.chunkCount, tree.len]);
    }
    tree.free();
  });

  it('takes proofs from the committed version; a snapshot keeps its version', () => {
    const tree = new Tree(4);
    for (let i = 0; i < 40; i++) tree.insert(key(i), value(i));
    const first = tree.commit();
    const snap = tree.head();
    tree.insert(key(1000), value(1000)); // working state only
    expect(tree.len).toBe(41);
    verifyExistence(first.root, key(3), value(3), tree.head().proveExistence(key(3)));
    expect(thrown(() => tree.head().proveExistence(key(1000))).code).toBe('KEY_NOT_FOUND');
    const second = tree.commit();
    expect(second.version).toBe(2);
    expect([snap.version, snap.len, toHex(snap.root)]).toEqual([1, 40, toHex(first.root)]);
    expect(snap.get(key(1000))).toBeUndefined();
    verifyExistence(first.root, key(3), value(3), snap.proveExistence(key(3)));
    verifyAbsence(first.root, key(1000), snap.proveAbsence(key(1000)));
    verifyChunk(first.root, 0, snap.exportChunk(0)).free();
    verifyChunkProof(first.root, snap.proveChunk(snap.chunkCount - 1));
    verifyRange(first.root, key(0), key(10), 5, snap.proveRange(key(0), key(10), 5));
    verifyExistence(second.root, key(1000), value(1000), tree.head().proveExistence(key(1000)));
    snap.free();
    tree.free();
  });

  it('defaults to capacity 256 and starts at the empty root, version 0', () => {
    using tree = new Tree();
    expect([tree.capacity, tree.len, tree.chunkCount, tree.head().version]).toEqual([256, 0, 0, 0]);
    const empty = tree.head().root;
    expect(empty.length).toBe(32);
    expect(toHex(tree.commit().root)).toBe(toHex(empty));
    verifyAbsence(empty, utf8('x'), tree.head().proveAbsence(utf8('x')));
  });
});

describe('state sync', () => {
  it('exports every chunk, verifies each, and rebuilds the identical tree from a shuffled order', () => {
    const { tree, model } = randomTree(5, 5000);
    const { root } = tree.commit();
    const n = tree.chunkCount;
    const envelopes = Array.from({ length: n }, (_, i) => tree.head().exportChunk(i));
    const order = shuffle([...envelopes.keys()], rng(99));

    const rebuilder = new Rebuilder(root);
    expect([rebuilder.chunkCount, rebuilder.missingCount(), rebuilder.received, rebuilder.isComplete]).toEqual([
      undefined,
      undefined,
      0,
      false,
    ]);
    expect(rebuilder.missing()).toEqual([]);
    for (const [at, i] of order.entries()) {
      if (at % 2 === 0) {
        expect(rebuilder.add(i, envelopes[i]!)).toBe(true);
      } else {
        const chunk = verifyChunk(root, i, envelopes[i]!);
        expect(chunk.index).toBe(i);
        expect(rebuilder.addVerified(chunk)).toBe(true);
      }
      expect(rebuilder.add(i, envelopes[i]!)).toBe(false); // already held
      expect(rebuilder.chunkCount).toBe(n);
      expect(rebuilder.received).toBe(at + 1);
      expect(rebuilder.missingCount()).toBe(n - at - 1);
      if (at === 0) {
        expect(rebuilder.missing(3)).toEqual([0, 1, 2, 3].filter((x) => x !== i).slice(0, 3));
        expect(rebuilder.missing().length).toBe(n - 1);
      }
    }
    expect(rebuilder.isComplete).toBe(true);
    expect(rebuilder.missing()).toEqual([]);

    const copy = rebuilder.finish(42);
    expect([copy.head().version, copy.len, copy.chunkCount, copy.capacity]).toEqual([42, model.size, n, 8]);
    expect(toHex(copy.head().root)).toBe(toHex(root));
    for (const [k, v] of model) expect(toHex(copy.get(Buffer.from(k, 'hex'))!)).toBe(toHex(v));
    for (let i = 0; i < n; i++) expect(toHex(copy.head().exportChunk(i))).toBe(toHex(envelopes[i]!));

    // The copy goes on exactly like the original.
    for (const t of [tree, copy]) {
      for (let i = 0; i < 300; i++) t.insert(key(2000 + i), value(i));
      for (let i = 0; i < 1500; i += 3) t.remove(key(i));
    }
    expect(toHex(copy.commit().root)).toBe(toHex(tree.commit().root));
    copy.free();
    tree.free();
  });
});

describe('memory', () => {
  // src/alloc.rs hands the allocator memory in large steps: many live and
  // freed trees with small and maximal values must keep every byte intact.
  it('keeps many interleaved trees intact while memory grows', () => {
    const random = rng(1234);
    const build = (seed: number) => {
      const t = new Tree(2 + (seed % 7));
      for (let i = 0; i < 60 + seed * 7; i++) {
        const size = random() < 0.05 ? 65536 : Math.floor(random() * 300);
        t.insert(key(seed * 1000 + i), new Uint8Array(size).fill((seed + i) & 0xff));
      }
      for (let i = 0; i < 60 + seed * 7; i += 3) t.remove(key(seed * 1000 + i));
      return t;
    };
    const trees = Array.from({ length: 24 }, (_, s) => build(s));
    const roots = trees.map((t) => toHex(t.commit().root));
    for (let s = 0; s < trees.length; s += 2) trees[s]!.free();
    for (let s = 1; s < trees.length; s += 2) {
      const t = trees[s]!;
      const rebuilder = new Rebuilder(t.head().root);
      for (const i of shuffle([...Array(t.chunkCount).keys()], random)) rebuilder.add(i, t.head().exportChunk(i));
      const copy = rebuilder.finish(1);
      expect(toHex(copy.head().root)).toBe(roots[s]);
      for (let i = 1; i < 60 + s * 7; i += 3) {
        const v = copy.get(key(s * 1000 + i))!;
        expect(v.every((b) => b === ((s + i) & 0xff))).toBe(true);
      }
      copy.free();
      t.free();
    }
  });
});

describe('init', () => {
  it('is idempotent, and initSync is a no-op once loaded', async () => {
    const again = init();
    expect(again).toBe(init());
    await again;
    initSync(readFileSync(new URL('../pkg/bpavl_wasm_bg.wasm', import.meta.url)));
    expect(new Tree(2).capacity).toBe(2);
  });
});
