// State sync across the two packages: a tree built in WASM (@bpavl/wasm) is
// exported chunk by chunk; every envelope is verified by the pure-TS
// verifier (`@bpavl/light-client/verify`, from its source) against nothing
// but the root, and what TS reports (index, totals, key-height, entries) is
// checked against the WASM tree and against an independent recomputation of
// the root (node:crypto, spec/hashing.md + the stack algorithm of
// spec/chunk-format.md). The envelopes are then fed in shuffled order to a
// WASM Rebuilder, whose finished tree must be the same tree: same root,
// same answers, same envelopes, and the same root after the same later
// changes. Finally the opt-in WASM fast path of the TS `verifyChunk`
// (`{ wasm }`) must give identical results and identical codes.

import * as wasm from '@bpavl/wasm';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import * as ts from '../packages/light-client/src/verify.js';
import { concat, encodeVarint, equalBytes, nonCanonicalVarint, pairsHex, rng, shuffle, splitFields, toHex, utf8, type Rng } from './support.js';

await wasm.init();

// ---------------------------------------------------------------- an independent root

const sha = (...parts: Uint8Array[]): Uint8Array => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};
const u32 = (n: number) => Uint8Array.of(n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255);
const u64 = (n: number) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
};

function mth(d: Uint8Array[]): Uint8Array {
  if (d.length === 1) return d[0]!;
  let k = 1;
  while (k * 2 < d.length) k *= 2;
  return sha(Uint8Array.of(1), mth(d.slice(0, k)), mth(d.slice(k)));
}

interface Node {
  height: number;
  chunks: number;
  entries: number;
  hash?: Uint8Array;
  left?: Node;
  right?: Node;
}

/**
 * The root of a tree of capacity `c` from its chunks (entries and
 * key-heights, in index order), written from spec/hashing.md and the stack
 * algorithm of spec/chunk-format.md without any bpavl code. Throws if the
 * key-heights do not make an AVL tree.
 */
function independentRoot(c: number, chunks: { entries: [Uint8Array, Uint8Array][]; keyHeight: number }[]): Uint8Array {
  const leaf = (i: number): Node => {
    const es = chunks[i]!.entries;
    const root = mth(es.map(([k, v]) => sha(Uint8Array.of(0), u32(k.length), k, u32(v.length), v)));
    return { height: 0, chunks: 1, entries: es.length, hash: sha(Uint8Array.of(2), u32(es.length), root) };
  };
  let current = leaf(0);
  const stack: Node[] = [];
  for (let i = 1; i < chunks.length; i++) {
    const n: Node = { height: chunks[i]!.keyHeight, chunks: 0, entries: 0 };
    while (stack.length > 0 && stack[stack.length - 1]!.height < n.height) {
      const t = stack.pop()!;
      t.right = current;
      current = t;
    }
    n.left = current;
    stack.push(n);
    current = leaf(i);
  }
  while (stack.length > 0) {
    const t = stack.pop()!;
    t.right = current;
    current = t;
  }
  const hash = (n: Node): Node => {
    if (n.hash !== undefined) return n;
    const l = hash(n.left!);
    const r = hash(n.right!);
    if (n.height !== 1 + Math.max(l.height, r.height) || Math.abs(l.height - r.height) > 1)
      throw new Error(`key-heights do not make an AVL tree (node of height ${n.height} over ${l.height}, ${r.height})`);
    n.chunks = l.chunks + r.chunks;
    n.entries = l.entries + r.entries;
    n.hash = sha(Uint8Array.of(3), Uint8Array.of(n.height), u64(n.chunks), u64(n.entries), l.hash!, r.hash!);
    return n;
  };
  const top = hash(current);
  return sha(Uint8Array.of(4), u32(c), u64(top.chunks), u64(top.entries), top.hash!);
}

// ---------------------------------------------------------------- trees

type Model = Map<string, [Uint8Array, Uint8Array]>;

const genKey = (r: Rng) => (r.chance(0.5) ? r.bytes(r.range(1, 32)) : utf8(`account/${r.int(1_000_000)}`));
const genValue = (r: Rng) => (r.chance(0.02) ? r.bytes(r.range(200, 1500)) : r.bytes(r.int(80)));

/** A tree of `n` entries built in two commits, with removals and overwrites in between. */
function build(capacity: number, n: number, r: Rng): { tree: wasm.Tree; model: Model } {
  const tree = new wasm.Tree(capacity);
  const model: Model = new Map();
  const put = (k: Uint8Array, v: Uint8Array) => {
    tree.insert(k, v);
    model.set(toHex(k), [k, v]);
  };
  while (model.size < n * 0.9) put(genKey(r), genValue(r));
  tree.commit();
  const keys = [...model.values()].map(([k]) => k);
  for (let i = 0; i < n * 0.2; i++) {
    const k = r.pick(keys);
    tree.remove(k);
    model.delete(toHex(k));
  }
  for (let i = 0; i < n * 0.05; i++) {
    const k = r.pick(keys);
    if (model.has(toHex(k))) put(k, genValue(r));
  }
  while (model.size < n) put(genKey(r), genValue(r));
  tree.commit();
  expect(tree.len).toBe(n);
  return { tree, model };
}

const sortedEntries = (model: Model) =>
  [...model.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, kv]) => kv);

// ---------------------------------------------------------------- the round trip

const CONFIGS = [
  { name: '20,000 entries, C = 256', capacity: 256, n: 20_000, seed: 0x20000 },
  { name: '3,000 entries, C = 3', capacity: 3, n: 3_000, seed: 0x3000 },
  { name: '1,000 entries, C = 2', capacity: 2, n: 1_000, seed: 0x1000 },
];

describe.each(CONFIGS)('WASM tree → TS-verified chunks → WASM Rebuilder: $name', ({ capacity, n, seed }) => {
  const r = rng(seed);
  const { tree, model } = build(capacity, n, r);
  const root = tree.head().root;
  const version = tree.head().version;
  const chunkCount = tree.chunkCount;
  const envelopes = Array.from({ length: chunkCount }, (_, i) => tree.head().exportChunk(i));
  const verified: ts.VerifiedChunk[] = [];

  it('every envelope verifies in TS against the root alone, and says what the WASM tree holds', () => {
    const sorted = sortedEntries(model);
    let at = 0;
    for (let i = 0; i < chunkCount; i++) {
      const v = ts.verifyChunk(root, i, envelopes[i]!);
      verified.push(v);
      expect([v.index, v.chunkCount, v.entryCount, v.capacity]).toEqual([i, chunkCount, tree.len, capacity]);
      // The key-height: the same from the WASM verifier and from the chunk proof (TS).
      const w = wasm.verifyChunk(root, i, envelopes[i]!);
      expect(w.keyHeight).toBe(v.keyHeight);
      w.free();
      expect(ts.verifyChunkProof(root, tree.head().proveChunk(i))).toEqual({ index: i, chunkCount, entryCount: n, keyHeight: v.keyHeight });
      if (i === 0) expect(v.keyHeight).toBe(0);
      else expect(v.keyHeight).toBeGreaterThanOrEqual(1);
      // Fill: 1 … C entries, at least ⌈C/2⌉ in a multi-chunk tree.
      expect(v.entries.length).toBeLessThanOrEqual(capacity);
      expect(v.entries.length).toBeGreaterThanOrEqual(chunkCount > 1 ? Math.ceil(capacity / 2) : 1);
      // The entries: the tree's, in order, each answered by tree.get.
      for (const [k, val] of v.entries) {
        const expected = sorted[at++]!;
        if (!equalBytes(k, expected[0]) || !equalBytes(val, expected[1]))
          expect.fail(`chunk ${i}: entry ${toHex(k)} is not the model's ${toHex(expected[0])}`);
        const got = tree.get(k);
        if (got === undefined || !equalBytes(got, val)) expect.fail(`chunk ${i}: tree.get(${toHex(k)}) disagrees`);
      }
    }
    expect(at).toBe(n);
    // The key-heights TS reported make the AVL shape whose root is the trusted one.
    expect(toHex(independentRoot(capacity, verified))).toBe(toHex(root));
  });

  it('the chunks, shuffled, rebuild in a WASM Rebuilder into the identical tree', () => {
    expect(verified).toHaveLength(chunkCount);
    const order = shuffle([...Array(chunkCount).keys()], r);
    const rebuilder = new wasm.Rebuilder(root);
    expect([rebuilder.chunkCount, rebuilder.received, rebuilder.isComplete]).toEqual([undefined, 0, false]);
    for (const [at, i] of order.entries()) {
      // Half as raw envelopes (the rebuilder verifies again), half as WASM-verified chunks.
      if (at % 2 === 0) expect(rebuilder.add(i, envelopes[i]!)).toBe(true);
      else expect(rebuilder.addVerified(wasm.verifyChunk(root, i, envelopes[i]!))).toBe(true);
      if (at % 7 === 0) expect(rebuilder.add(i, envelopes[i]!)).toBe(false); // a duplicate from another peer
      expect(rebuilder.chunkCount).toBe(chunkCount);
      expect(rebuilder.received).toBe(at + 1);
      expect(rebuilder.missingCount()).toBe(chunkCount - at - 1);
    }
    expect(rebuilder.isComplete).toBe(true);
    expect(rebuilder.missing()).toEqual([]);
    const copy = rebuilder.finish(version + 10);
    try {
      expect([toHex(copy.head().root), copy.head().version, copy.len, copy.chunkCount, copy.capacity]).toEqual([
        toHex(root),
        version + 10,
        n,
        chunkCount,
        capacity,
      ]);
      // Same answers as the source.
      for (const [k, v] of model.values()) {
        const got = copy.get(k);
        if (got === undefined || !equalBytes(got, v)) expect.fail(`copy.get(${toHex(k)}) differs`);
      }
      for (let i = 0; i < 200; i++) {
        const k = genKey(r);
        expect(copy.get(k) === undefined).toBe(tree.get(k) === undefined);
      }
      // Same envelopes, byte for byte (same chunks, same shape).
      for (let i = 0; i < chunkCount; i++) {
        if (!equalBytes(copy.head().exportChunk(i), envelopes[i]!)) expect.fail(`copy.exportChunk(${i}) differs`);
      }
      // The same later changes on both commit to the same root.
      const keys = [...model.values()].map(([k]) => k);
      const ops = Array.from({ length: Math.ceil(n / 4) }, () =>
        r.chance(0.5) ? { k: r.pick(keys), v: undefined } : { k: r.chance(0.8) ? genKey(r) : r.pick(keys), v: genValue(r) },
      );
      for (const t of [tree, copy]) {
        for (const op of ops) {
          if (op.v === undefined) t.remove(op.k);
          else t.insert(op.k, op.v);
        }
      }
      const a = tree.commit();
      const b = copy.commit();
      expect(toHex(b.root)).toBe(toHex(a.root));
      expect(copy.len).toBe(tree.len);
      expect(copy.chunkCount).toBe(tree.chunkCount);
      // And the copy's proofs verify in TS against that root.
      for (let i = 0; i < 20; i++) {
        const op = r.pick(ops);
        const value = tree.get(op.k);
        if (value !== undefined) ts.verifyExistence(a.root, op.k, value, copy.head().proveExistence(op.k));
        else ts.verifyAbsence(a.root, op.k, copy.head().proveAbsence(op.k));
      }
    } finally {
      copy.free();
      tree.free();
    }
  });
});

// ---------------------------------------------------------------- rebuilder and TS agree on bad chunks

describe('a Rebuilder refuses what the TS verifier refuses, with the same code', () => {
  it('tampered, misplaced and foreign envelopes; finishing early', () => {
    const r = rng(0xbad);
    const { tree } = build(8, 400, r);
    const other = build(8, 400, rng(0xbad + 1)).tree;
    const root = tree.head().root;
    const rebuilder = new wasm.Rebuilder(root);
    const cases: [string, number, Uint8Array][] = [];
    const env = tree.head().exportChunk(5);
    const flipped = env.slice();
    flipped[env.length - 40]! ^= 1;
    cases.push(['a flipped byte', 5, flipped]);
    cases.push(['chunk 5 offered as chunk 6', 6, env]);
    cases.push(['a chunk of another tree', 5, other.head().exportChunk(5)]);
    cases.push(['truncated', 5, env.subarray(0, env.length - 1)]);
    cases.push(['a trailing byte', 5, concat(env, Uint8Array.of(0))]);
    for (const [label, index, bytes] of cases) {
      let tsCode: string | undefined;
      try {
        ts.verifyChunk(root, index, bytes);
      } catch (e) {
        expect(e).toBeInstanceOf(ts.ProofError);
        tsCode = (e as ts.ProofError).code;
      }
      expect(tsCode, label).toBeDefined();
      let thrown: unknown;
      try {
        rebuilder.add(index, bytes);
      } catch (e) {
        thrown = e;
      }
      expect(thrown, label).toBeInstanceOf(Error);
      expect([(thrown as Error).name, (thrown as { code?: string }).code], label).toEqual(['RebuildError', tsCode]);
    }
    expect(rebuilder.received).toBe(0);
    expect(rebuilder.add(5, env)).toBe(true);
    let early: unknown;
    try {
      rebuilder.finish(1);
    } catch (e) {
      early = e;
    }
    expect([(early as Error).name, (early as { code?: string }).code]).toEqual(['RebuildError', 'REBUILD_INCOMPLETE']);
    tree.free();
    other.free();
  });
});

// ---------------------------------------------------------------- the WASM fast path of the TS verifyChunk

describe('verifyChunk(root, i, bytes, { wasm }) is the pure TS verifyChunk, faster', () => {
  const r = rng(0xfa57);
  const { tree } = build(16, 1500, r);
  const root = tree.head().root;
  const chunkCount = tree.chunkCount;
  const envelopes = Array.from({ length: chunkCount }, (_, i) => tree.head().exportChunk(i));
  tree.free();

  const norm = (v: ts.VerifiedChunk) => [v.index, v.chunkCount, v.entryCount, v.capacity, v.keyHeight, pairsHex(v.entries)];

  it('gives identical results on every chunk', () => {
    for (let i = 0; i < chunkCount; i++) {
      const fast = ts.verifyChunk(root, i, envelopes[i]!, { wasm });
      expect(norm(fast)).toEqual(norm(ts.verifyChunk(root, i, envelopes[i]!)));
      // Entries are views into the envelope on both paths.
      expect(fast.entries[0]![0].buffer).toBe(envelopes[i]!.buffer);
    }
  });

  /** One tampered envelope per code the verifier can reach for a chunk. */
  function tampered(): [string, string, number, Uint8Array, Uint8Array][] {
    const i = 7;
    const env = envelopes[i]!;
    const f = splitFields(env);
    const field = (name: string) => f.find((x) => x.name === name)!;
    const replace = (name: string, bytes: Uint8Array) => {
      const x = field(name);
      return concat(env.subarray(0, x.off), bytes, env.subarray(x.off + x.len));
    };
    const flip = (off: number) => {
      const b = env.slice();
      b[off]! ^= 0x10;
      return b;
    };
    const kh = field('key_height').value!;
    const key0 = field('key0');
    const key1 = field('key1');
    const value0 = field('value0');
    return [
      ['a flipped value byte', 'ROOT_MISMATCH', i, root, value0.len > 0 ? flip(value0.off) : flip(key0.off)],
      ['a flipped sibling hash', 'ROOT_MISMATCH', i, root, flip(field('step0.hash').off)],
      ['another root', 'ROOT_MISMATCH', i, r.bytes(32), env],
      ['the wrong index', 'CHUNK_INDEX_MISMATCH', i + 1, root, env],
      ['another key-height', 'KEY_HEIGHT_MISMATCH', i, root, replace('key_height', Uint8Array.of(kh === 1 ? 2 : kh - 1))],
      ['key-height 49', 'HEIGHT_INVALID', i, root, replace('key_height', Uint8Array.of(49))],
      ['the format byte of a chunk proof', 'FORMAT_UNSUPPORTED', i, root, replace('format', Uint8Array.of(4))],
      ['a non-canonical capacity', 'VARINT_NON_CANONICAL', i, root, replace('capacity', nonCanonicalVarint(16))],
      ['capacity 4097', 'CAPACITY_INVALID', i, root, replace('capacity', encodeVarint(4097))],
      ['M = 0', 'CHUNK_SIZE_INVALID', i, root, replace('M', encodeVarint(0))],
      ['the first key repeated', 'KEYS_NOT_SORTED', i, root, concat(env.subarray(0, key1.off - 1), env.subarray(key0.off - 1, key0.off + key0.len), env.subarray(key1.off + key1.len))],
      ['truncated by one byte', 'TRUNCATED', i, root, env.subarray(0, env.length - 1)],
      ['empty', 'TRUNCATED', i, root, new Uint8Array(0)],
      ['a trailing byte', 'TRAILING_BYTES', i, root, concat(env, Uint8Array.of(0))],
    ];
  }

  it.each(tampered())('%s: both paths throw ProofError %s', (_label, code, index, rt, bytes) => {
    const codeOf = (fn: () => unknown): string => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(ts.ProofError); // the fast path re-throws WASM's error as this package's class
        return (e as ts.ProofError).code;
      }
      return 'ok';
    };
    const pure = codeOf(() => ts.verifyChunk(rt, index, bytes));
    const fast = codeOf(() => ts.verifyChunk(rt, index, bytes, { wasm }));
    expect({ pure, fast }).toEqual({ pure: code, fast: code });
  });

  it('wrong argument types and values throw the same TypeError / RangeError on both paths', () => {
    const env = envelopes[0]!;
    const args: [unknown, unknown, unknown][] = [
      ['root', 0, env],
      [new Uint8Array(31), 0, env],
      [root, -1, env],
      [root, 0.5, env],
      [root, '0', env],
      [root, 0, 'envelope'],
      [root, 0, env.buffer],
    ];
    for (const [rt, index, bytes] of args) {
      const kind = (opts?: ts.VerifyChunkOptions) => {
        try {
          ts.verifyChunk(rt as Uint8Array, index as number, bytes as Uint8Array, opts);
          return 'ok';
        } catch (e) {
          return (e as Error).constructor.name;
        }
      };
      expect(kind({ wasm }), String(index)).toBe(kind());
      expect(['TypeError', 'RangeError']).toContain(kind());
    }
  });
});
