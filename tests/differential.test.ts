// Differential test of the two verifiers: the pure-TypeScript one
// (`@bpavl/light-client/verify`, imported from its source so that no build of
// the package is needed) and the WASM one (`@bpavl/wasm`, needs
// `npm run build -w @bpavl/wasm`).
//
// Random trees are built through @bpavl/wasm with fixed seeds; proofs and
// chunk envelopes are taken from them, mutated (single-byte and structural
// changes, swapped hashes, non-canonical / overflowing / out-of-range
// varints; a multiproof, which has no field layout, byte-level changes only)
// and verified with wrong roots, keys, values, queries and indices.
// For every case both verifiers must reach the same verdict: the same
// normalized result, or a typed ProofError with the same code. Anything else
// thrown for bad bytes (TypeError, RangeError, RuntimeError, ...) is a failure.
// Valid cases must also verify and match a model of the tree; a mutated
// proof that still verifies must give exactly the original result, and a
// multiproof that also answers another query must answer it as the model does.

import * as wasm from '@bpavl/wasm';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import * as ts from '../packages/light-client/src/verify.js';
import {
  asInput,
  capture,
  compareBytes,
  concat,
  encodeVarint,
  equalBytes,
  mutate,
  pairsHex,
  PROOF_CODES,
  rng,
  splitFields,
  toHex,
  utf8,
  type Field,
  type Rng,
} from './support.js';

await wasm.init();

// ------------------------------------------------------------------ cases

type Kind = 'existence' | 'absence' | 'range' | 'chunkProof' | 'envelope' | 'multiproof';

type Case =
  | { kind: 'existence'; root: Uint8Array; key: Uint8Array; value: Uint8Array; bytes: Uint8Array }
  | { kind: 'absence'; root: Uint8Array; key: Uint8Array; bytes: Uint8Array }
  | { kind: 'range'; root: Uint8Array; start: Uint8Array; end: Uint8Array | undefined; limit: number; bytes: Uint8Array }
  | { kind: 'chunkProof'; root: Uint8Array; bytes: Uint8Array }
  | { kind: 'envelope'; root: Uint8Array; index: number; bytes: Uint8Array }
  | { kind: 'multiproof'; root: Uint8Array; keys: Uint8Array[]; bytes: Uint8Array };

/** Which kind of case: counted separately in the summary. */
type Category = 'valid' | 'mutated' | 'wrong-input' | 'cross-kind' | 'garbage' | 'batched';

const tsTyped = (e: unknown) => e instanceof ts.ProofError && PROOF_CODES.has(e.code);
const wasmTyped = (e: unknown) =>
  e instanceof Error && e.name === 'ProofError' && PROOF_CODES.has((e as { code?: string }).code ?? '');

const opt = (b: Uint8Array | undefined | null) => (b == null ? null : toHex(b));
const rangeNorm = (r: { entries: [Uint8Array, Uint8Array][]; complete: boolean; resumeKey: Uint8Array | undefined }) =>
  JSON.stringify({ e: pairsHex(r.entries), c: r.complete, r: opt(r.resumeKey) });
type Side = { key: Uint8Array; value: Uint8Array; chunkIndex: number; position: number; chunkCount: number; entryCount: number };
const sideNorm = (n: Side | undefined) => n && [toHex(n.key), toHex(n.value), n.chunkIndex, n.position, n.chunkCount, n.entryCount];
const absenceNorm = (r: { left: Side | undefined; right: Side | undefined }) =>
  JSON.stringify({ l: sideNorm(r.left) ?? null, r: sideNorm(r.right) ?? null });
const multiNorm = (r: { values: (Uint8Array | undefined)[]; chunkCount: number; entryCount: number }) =>
  JSON.stringify([r.values.map(opt), r.chunkCount, r.entryCount]);

function runTs(c: Case): string {
  return capture(() => {
    switch (c.kind) {
      case 'existence': {
        const r = ts.verifyExistence(c.root, c.key, c.value, c.bytes);
        return `${r.chunkIndex},${r.position},${r.chunkCount},${r.entryCount}`;
      }
      case 'absence':
        return absenceNorm(ts.verifyAbsence(c.root, c.key, c.bytes));
      case 'range':
        return rangeNorm(ts.verifyRange(c.root, c.start, c.end, c.limit, c.bytes));
      case 'chunkProof': {
        const r = ts.verifyChunkProof(c.root, c.bytes);
        return `${r.index},${r.chunkCount},${r.entryCount},${r.keyHeight}`;
      }
      case 'envelope': {
        const r = ts.verifyChunk(c.root, c.index, c.bytes);
        return JSON.stringify([r.index, r.chunkCount, r.entryCount, r.capacity, r.keyHeight, pairsHex(r.entries)]);
      }
      case 'multiproof':
        return multiNorm(ts.verifyMultiproof(c.root, c.keys, c.bytes));
    }
  }, tsTyped);
}

function runWasm(c: Case): string {
  return capture(() => {
    switch (c.kind) {
      case 'existence': {
        const r = wasm.verifyExistence(c.root, c.key, c.value, c.bytes);
        return `${r.chunkIndex},${r.position},${r.chunkCount},${r.entryCount}`;
      }
      case 'absence':
        return absenceNorm(wasm.verifyAbsence(c.root, c.key, c.bytes));
      case 'range':
        return rangeNorm(wasm.verifyRange(c.root, c.start, c.end, c.limit, c.bytes));
      case 'chunkProof': {
        const r = wasm.verifyChunkProof(c.root, c.bytes);
        return `${r.index},${r.chunkCount},${r.entryCount},${r.keyHeight}`;
      }
      case 'envelope': {
        const v = wasm.verifyChunk(c.root, c.index, c.bytes);
        try {
          if (v.len !== v.entries.length) throw new Error(`VerifiedChunk.len ${v.len} != entries ${v.entries.length}`);
          if (!equalBytes(v.root, c.root)) throw new Error('VerifiedChunk.root differs from the root it verified against');
          return JSON.stringify([v.index, v.chunkCount, v.entryCount, v.capacity, v.keyHeight, pairsHex(v.entries)]);
        } finally {
          v.free();
        }
      }
      case 'multiproof':
        return multiNorm(wasm.verifyMultiproof(c.root, c.keys, c.bytes));
    }
  }, wasmTyped);
}

// ------------------------------------------------------------------ bookkeeping

interface Failure {
  what: string;
  category: Category;
  label: string;
  ts: string;
  wasm: string;
  repro: Record<string, unknown>;
}

const counts = new Map<string, number>();
/** Outcomes both verifiers agreed on: `ok` or the error code. */
const outcomes = new Map<string, number>();
let total = 0;
let acceptedMutations = 0;
let incompleteRanges = 0;
const started = performance.now();

function bump(kind: Kind, category: Category): void {
  const k = `${kind}/${category}`;
  counts.set(k, (counts.get(k) ?? 0) + 1);
  total++;
}

const short = (b: Uint8Array) => (b.length <= 1500 ? toHex(b) : `${toHex(b.subarray(0, 1500))}… (${b.length} bytes)`);

function repro(c: Case): Record<string, unknown> {
  const r: Record<string, unknown> = { kind: c.kind, root: toHex(c.root), bytes: short(c.bytes) };
  if ('key' in c) r.key = short(c.key);
  if ('value' in c) r.value = short(c.value);
  if (c.kind === 'range') Object.assign(r, { start: short(c.start), end: opt(c.end), limit: c.limit });
  if (c.kind === 'envelope') r.index = c.index;
  if (c.kind === 'multiproof') r.keys = c.keys.map(short);
  return r;
}

/** Failures of the current test (reset by each test). */
let failures: Failure[] = [];

function fail(what: string, category: Category, label: string, c: Case, t: string, w: string): void {
  failures.push({ what, category, label, ts: t, wasm: w, repro: repro(c) });
}

/**
 * Runs `c` through both verifiers and checks that they agree, that only
 * typed errors are thrown and, when `expect` is given, the expectation:
 * `ok <result>` for a valid case, `error` for a case that must fail, or
 * `same-or-error` (a mutated case: if it verifies, the result must be the
 * unmutated one). Returns the common outcome.
 */
function check(c: Case, category: Category, label: string, expectation?: { ok: string } | 'error' | { sameOrError: string }): string {
  bump(c.kind, category);
  const t = runTs(c);
  const w = runWasm(c);
  const o = t === w ? (t.startsWith('ok') ? 'ok' : t.slice(4)) : 'DISAGREE';
  outcomes.set(o, (outcomes.get(o) ?? 0) + 1);
  if (c.kind === 'existence' && t === w) batchQueue.push({ c, want: w, category, label });
  if (t.startsWith('THROW') || w.startsWith('THROW')) fail('untyped throw', category, label, c, t, w);
  else if (t !== w) fail('disagreement', category, label, c, t, w);
  else if (expectation === 'error') {
    if (t.startsWith('ok')) fail('accepted, but must fail', category, label, c, t, w);
  } else if (expectation !== undefined && 'ok' in expectation) {
    if (t !== `ok ${expectation.ok}`) fail(`valid case, expected ok ${expectation.ok.slice(0, 300)}`, category, label, c, t, w);
  } else if (expectation !== undefined && t.startsWith('ok')) {
    acceptedMutations++;
    if (t !== `ok ${expectation.sameOrError}`) fail('mutated proof verified to a different result', category, label, c, t, w);
  }
  return t;
}

/** Existence cases checked one at a time, to be checked again through `verifyExistenceBatch`. */
let batchQueue: { c: Extract<Case, { kind: 'existence' }>; want: string; category: Category; label: string }[] = [];

/**
 * `wasm.verifyExistenceBatch` must give every queued case exactly the outcome
 * `verifyExistence` gave it (its lanes hash four proofs side by side), in
 * batches of mixed valid and invalid cases, one batch per root.
 */
function checkExistenceBatches(): void {
  const byRoot = new Map<string, typeof batchQueue>();
  for (const q of batchQueue) byRoot.set(toHex(q.c.root), [...(byRoot.get(toHex(q.c.root)) ?? []), q]);
  batchQueue = [];
  for (const queued of byRoot.values()) {
    const results = wasm.verifyExistenceBatch(
      queued[0].c.root,
      queued.map(({ c }) => ({ key: c.key, value: c.value, proof: c.bytes })),
    );
    if (results.length !== queued.length) expect.fail(`verifyExistenceBatch returned ${results.length} results for ${queued.length} items`);
    queued.forEach(({ c, want, category, label }, i) => {
      const r = results[i];
      const got = r instanceof Error ? (wasmTyped(r) ? `err ${(r as { code: string }).code}` : `THROW ${r.name}`) : `ok ${r.chunkIndex},${r.position},${r.chunkCount},${r.entryCount}`;
      if (got !== want) fail('verifyExistenceBatch differs from verifyExistence', category, label, c, want, got);
      bump('existence', 'batched');
    });
  }
}

function assertNoFailures(): void {
  checkExistenceBatches();
  const f = failures;
  failures = [];
  if (f.length > 0) {
    const byWhat = new Map<string, number>();
    for (const x of f) byWhat.set(`${x.what} (${x.repro.kind}/${x.category})`, (byWhat.get(`${x.what} (${x.repro.kind}/${x.category})`) ?? 0) + 1);
    const summary = [...byWhat].map(([k, n]) => `  ${n} × ${k}`).join('\n');
    const first = f.slice(0, 6).map((x) => JSON.stringify(x, null, 1)).join('\n');
    expect.fail(`${f.length} failing cases:\n${summary}\nfirst ones (repro: the inputs, then what each verifier did):\n${first}`);
  }
}

afterAll(() => {
  const secs = ((performance.now() - started) / 1000).toFixed(1);
  const lines = [...counts].sort().map(([k, n]) => `  ${k.padEnd(24)} ${n}`);
  console.log(
    `differential: ${total} cases compared between TS and WASM in ${secs} s ` +
      `(${acceptedMutations} mutated encodings or other multiproof queries still verified, each to the expected result; ` +
      `${incompleteRanges} of the valid range proofs are truncated by their limit)\n${lines.join('\n')}\n` +
      `common outcomes: ${[...outcomes].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ')}`,
  );
});

// ------------------------------------------------------------------ trees

interface Version {
  root: Uint8Array;
  snap: wasm.Snapshot;
  /** hex key → [key, value], and the keys in order. */
  model: Map<string, [Uint8Array, Uint8Array]>;
  sorted: [Uint8Array, Uint8Array][];
  /** hex key → [chunk index, position], from the chunk envelopes. */
  where: Map<string, [number, number]>;
  chunkSizes: number[];
  keyHeights: number[];
}

/** Set by the "limits" configuration: keys and values at their maximal lengths. */
let atLimits = false;

function genKey(r: Rng, model: Map<string, [Uint8Array, Uint8Array]>, keys: Uint8Array[]): Uint8Array {
  if (atLimits && r.chance(0.4)) return concat(r.bytes(4), new Uint8Array(1020).fill(r.int(256)));
  const k = r.int(10);
  if (k === 0 && r.chance(0.02)) return r.bytes(1024); // the longest key allowed
  if (k <= 2) return r.bytes(r.range(1, 24));
  if (k <= 4) return utf8(`user/${r.int(100000)}`);
  if (k <= 6) return utf8(`k${String(r.int(100000)).padStart(5, '0')}`);
  if (keys.length === 0) return Uint8Array.of(r.int(256));
  // Prefixes and extensions of existing keys: the "proper prefix first" order.
  const base = r.pick(keys);
  if (!model.has(toHex(base))) return r.bytes(r.range(1, 8));
  if (base.length > 1 && r.chance(0.5)) return base.slice(0, r.range(1, base.length - 1));
  return concat(base.subarray(0, 1023), Uint8Array.of(r.pick([0, 1, 0x7f, 0xff])));
}

function genValue(r: Rng): Uint8Array {
  if (atLimits && r.chance(0.4)) return new Uint8Array(65536).fill(r.int(256));
  const k = r.int(100);
  if (k < 4) return new Uint8Array(0);
  if (k < 5) return r.bytes(r.range(128, 2500)); // two-byte length varints
  return r.bytes(r.range(1, 40));
}

function snapshotVersion(tree: wasm.Tree, model: Map<string, [Uint8Array, Uint8Array]>): Version {
  const snap = tree.head();
  const root = snap.root;
  const sorted = [...model.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, kv]) => kv);
  expect(snap.len).toBe(model.size);
  const where = new Map<string, [number, number]>();
  const chunkSizes: number[] = [];
  const keyHeights: number[] = [];
  let n = 0;
  for (let i = 0; i < snap.chunkCount; i++) {
    const v = ts.verifyChunk(root, i, snap.exportChunk(i));
    chunkSizes.push(v.entries.length);
    keyHeights.push(v.keyHeight);
    v.entries.forEach(([k, val], p) => {
      const expected = sorted[n++];
      if (expected === undefined || !equalBytes(expected[0], k) || !equalBytes(expected[1], val))
        throw new Error(`chunk ${i} entry ${p} does not match the model`);
      where.set(toHex(k), [i, p]);
    });
  }
  expect(n).toBe(sorted.length);
  return { root, snap, model: new Map(model), sorted, where, chunkSizes, keyHeights };
}

/**
 * Builds a tree of capacity `c` through three commits (inserts; removals,
 * overwrites and inserts; removals and inserts up to `n`) and returns the
 * first and last committed versions.
 */
function buildTree(c: number, n: number, r: Rng, emptyAtEnd = false): { tree: wasm.Tree; versions: Version[] } {
  const tree = new wasm.Tree(c);
  const model = new Map<string, [Uint8Array, Uint8Array]>();
  const keys: Uint8Array[] = [];
  const insert = () => {
    const k = genKey(r, model, keys);
    const v = genValue(r);
    const isNew = tree.insert(k, v);
    const h = toHex(k);
    if (isNew === model.has(h)) throw new Error('insert returned the wrong "new" flag');
    if (isNew) keys.push(k);
    model.set(h, [k, v]);
  };
  const remove = (key?: Uint8Array) => {
    const k = key ?? (r.chance(0.9) && keys.length > 0 ? r.pick(keys) : r.bytes(5));
    const had = tree.remove(k);
    if (had !== model.delete(toHex(k))) throw new Error('remove returned the wrong flag');
  };
  while (model.size < Math.ceil(n * 0.8)) insert();
  tree.commit();
  const first = snapshotVersion(tree, model);
  for (let i = 0; i < n * 0.3; i++) remove();
  for (let i = 0; i < n * 0.1 && keys.length > 0; i++) {
    const k = r.pick(keys);
    if (model.has(toHex(k))) {
      const v = genValue(r);
      tree.insert(k, v);
      model.set(toHex(k), [k, v]);
    }
  }
  for (let i = 0; i < n * 0.3; i++) insert();
  tree.commit();
  for (let i = 0; i < n * 0.1; i++) remove();
  while (model.size < n) insert();
  if (emptyAtEnd) for (const [, [k]] of [...model]) remove(k);
  tree.commit();
  const last = snapshotVersion(tree, model);
  expect(equalBytes(first.root, last.root)).toBe(false);
  return { tree, versions: [last, first] };
}

// ------------------------------------------------------------------ case generation

const TOO_LONG_KEY = new Uint8Array(1025).fill(7);
const MAX_KEY = new Uint8Array(1024).fill(7);
const TOO_LONG_VALUE = new Uint8Array(65537);
const OTHER_ROOTS: Uint8Array[] = [];

/** A key not in the version: a random one, or the successor (key ‖ 0x00) of a present key. */
function absentKey(v: Version, r: Rng): Uint8Array {
  for (;;) {
    const k =
      v.sorted.length > 0 && r.chance(0.6)
        ? concat(r.pick(v.sorted)[0], Uint8Array.of(r.pick([0, 0, 1, 0xff])))
        : r.chance(0.1)
          ? r.pick([Uint8Array.of(0), new Uint8Array(40).fill(0xff), Uint8Array.of(0, 0)])
          : r.bytes(r.range(1, 12));
    if (k.length <= 1024 && !v.model.has(toHex(k))) return k;
  }
}

function wrongRoots(v: Version, other: Version | undefined, r: Rng): [string, Uint8Array][] {
  const out: [string, Uint8Array][] = [['random root', r.bytes(32)]];
  const flipped = v.root.slice();
  flipped[r.int(32)]! ^= 1 << r.int(8);
  out.push(['root with one bit flipped', flipped]);
  if (other !== undefined) out.push(['root of the other version', other.root]);
  if (OTHER_ROOTS.length > 0) out.push(['root of another tree', r.pick(OTHER_ROOTS)]);
  return out;
}

/**
 * Mutates `bytes` `k` times at random and checks each. A quarter of them are
 * also verified with other arguments from `perturb` (another index, key,
 * value or query): several semantic checks failing at once pin their order.
 */
function mutations(base: Case, okResult: string, k: number, r: Rng, perturb?: () => [string, Partial<Case>]): void {
  let fields: Field[] = []; // a multiproof has no field layout: byte-level mutations only
  try {
    if (base.kind !== 'multiproof') fields = splitFields(base.bytes);
  } catch (e) {
    throw new Error(`the field splitter cannot read a valid ${base.kind} encoding: ${String(e)}`);
  }
  for (let i = 0; i < k; i++) {
    const m = mutate(base.bytes, fields, r);
    if (perturb !== undefined && r.chance(0.25)) {
      const [label, args] = perturb();
      check({ ...base, ...args, bytes: asInput(m.bytes, r) } as Case, 'mutated', `${m.name} with ${label}`);
    } else {
      check({ ...base, bytes: asInput(m.bytes, r) } as Case, 'mutated', m.name, { sameOrError: okResult });
    }
  }
  // The envelope's key-height changed (a check after the hashes) together with a wrong index.
  if (base.kind === 'envelope') {
    const kh = fields.find((f) => f.name === 'key_height')!;
    const b = base.bytes.slice();
    b[kh.off] = (kh.value! + 1) % 49;
    check({ ...base, bytes: b }, 'mutated', 'another key-height', 'error');
    check({ ...base, bytes: b, index: base.index + 1 }, 'mutated', 'another key-height and the next index', 'error');
  }
}

interface Budget {
  existence: number;
  absence: number;
  range: number;
  chunks: number;
  mutations: number;
}

function existenceCases(v: Version, other: Version | undefined, b: Budget, r: Rng): void {
  if (v.sorted.length === 0) return;
  for (let i = 0; i < b.existence; i++) {
    const [key, value] = r.pick(v.sorted);
    const proof = v.snap.proveExistence(key);
    const [ci, pos] = v.where.get(toHex(key))!;
    const ok = `${ci},${pos},${v.chunkSizes.length},${v.sorted.length}`;
    const base: Case = { kind: 'existence', root: v.root, key, value, bytes: proof };
    check({ ...base, bytes: asInput(proof, r) }, 'valid', 'proveExistence', { ok });
    mutations(base, ok, b.mutations, r, () => {
      const [k2, v2] = r.pick(v.sorted);
      return r.chance(0.5) ? ['another value', { value: v2 }] : ['another entry', { key: k2, value: v2 }];
    });
    for (const [label, root] of wrongRoots(v, other, r)) check({ ...base, root }, 'wrong-input', label, 'error');
    const [otherKey, otherValue] = r.pick(v.sorted);
    if (!equalBytes(otherKey, key)) {
      check({ ...base, key: otherKey }, 'wrong-input', 'key of another entry', 'error');
      check({ ...base, key: otherKey, value: otherValue }, 'wrong-input', 'key and value of another entry', 'error');
    }
    if (!equalBytes(otherValue, value)) check({ ...base, value: otherValue }, 'wrong-input', 'value of another entry', 'error');
    check({ ...base, key: absentKey(v, r) }, 'wrong-input', 'absent key', 'error');
    check({ ...base, value: concat(value, Uint8Array.of(0)) }, 'wrong-input', 'value with an extra byte', 'error');
    check({ ...base, key: new Uint8Array(0) }, 'wrong-input', 'empty key', 'error');
    check({ ...base, key: r.pick([TOO_LONG_KEY, MAX_KEY]) }, 'wrong-input', 'key of 1025 / 1024 bytes', 'error');
    if (i % 16 === 0) {
      check({ ...base, value: TOO_LONG_VALUE }, 'wrong-input', 'value of 65537 bytes', 'error');
      check({ ...base, key: new Uint8Array(0), bytes: new Uint8Array(0) }, 'wrong-input', 'empty key and empty proof', 'error');
      check({ ...base, value: TOO_LONG_VALUE, bytes: Uint8Array.of(9) }, 'wrong-input', 'long value and bad proof', 'error');
    }
  }
}

function absenceCases(v: Version, other: Version | undefined, b: Budget, r: Rng): void {
  for (let i = 0; i < b.absence; i++) {
    const key = absentKey(v, r);
    const proof = v.snap.proveAbsence(key);
    const base: Case = { kind: 'absence', root: v.root, key, bytes: proof };
    // Both verifiers report the neighbours: check the TS ones against the model, then that WASM agrees.
    const proven = ts.verifyAbsence(v.root, key, proof);
    const { left, right } = proven;
    const below = v.sorted.filter(([k]) => compareBytes(k, key) < 0);
    const l = below[below.length - 1];
    const rr = v.sorted[below.length];
    if (opt(left?.key) !== opt(l?.[0]) || opt(right?.key) !== opt(rr?.[0]))
      fail('absence neighbours differ from the model', 'valid', 'verifyAbsence', base, `${opt(left?.key)} ${opt(right?.key)}`, '');
    check({ ...base, bytes: asInput(proof, r) }, 'valid', 'proveAbsence', { ok: absenceNorm(proven) });
    mutations(base, absenceNorm(proven), b.mutations, r, () =>
      r.chance(0.5) && v.sorted.length > 0 ? ['a present key', { key: r.pick(v.sorted)[0] }] : ['another absent key', { key: absentKey(v, r) }],
    );
    for (const [label, root] of wrongRoots(v, other, r)) check({ ...base, root }, 'wrong-input', label, 'error');
    if (v.sorted.length > 0) {
      check({ ...base, key: r.pick(v.sorted)[0] }, 'wrong-input', 'a present key', 'error');
      if (l) check({ ...base, key: l[0] }, 'wrong-input', 'the left neighbour itself', 'error');
      if (rr) check({ ...base, key: rr[0] }, 'wrong-input', 'the right neighbour itself', 'error');
    }
    check({ ...base, key: absentKey(v, r) }, 'wrong-input', 'another absent key (ok if in the same gap)');
    check({ ...base, key: new Uint8Array(0) }, 'wrong-input', 'empty key', 'error');
    check({ ...base, key: TOO_LONG_KEY }, 'wrong-input', 'key of 1025 bytes', 'error');
  }
}

function rangeQuery(v: Version, r: Rng): { start: Uint8Array; end: Uint8Array | undefined; limit: number } {
  const s = v.sorted;
  const pickKey = (): Uint8Array => {
    const k = r.int(6);
    if (k === 0 || s.length === 0) return absentKey(v, r);
    if (k === 1) return Uint8Array.of(0);
    return r.pick(s)[0];
  };
  const start = r.chance(0.15) ? new Uint8Array(0) : pickKey();
  let end: Uint8Array | undefined;
  if (r.chance(0.6)) {
    const from = s.findIndex(([k]) => compareBytes(k, start) >= 0);
    const j = from < 0 ? s.length : from + r.int(r.chance(0.5) ? 8 : 400);
    end = j < s.length && r.chance(0.7) ? s[j]![0] : concat(start, Uint8Array.of(r.int(256)), r.bytes(r.int(3)));
    if (r.chance(0.15)) end = absentKey(v, r);
    if (compareBytes(end, start) <= 0 || end.length > 1024) end = undefined;
  }
  const inRange = s.filter(([k]) => compareBytes(k, start) >= 0 && (end === undefined || compareBytes(k, end) < 0)).length;
  const limit = r.pick([1, 2, 3, r.range(1, 20), r.range(1, 300), Math.max(1, inRange), Math.max(1, inRange - 1), inRange + 1, 65536]);
  return { start, end, limit: Math.min(limit, 65536) };
}

function rangeCases(v: Version, other: Version | undefined, b: Budget, r: Rng): void {
  for (let i = 0; i < b.range; i++) {
    const { start, end, limit } = rangeQuery(v, r);
    const proof = v.snap.proveRange(start, end, limit);
    const all = v.sorted.filter(([k]) => compareBytes(k, start) >= 0 && (end === undefined || compareBytes(k, end) < 0));
    const ok = rangeNorm({ entries: all.slice(0, limit), complete: all.length <= limit, resumeKey: all[limit]?.[0] });
    if (all.length > limit) incompleteRanges++;
    const base: Case = { kind: 'range', root: v.root, start, end, limit, bytes: proof };
    check({ ...base, bytes: asInput(proof, r) }, 'valid', 'proveRange', { ok });
    mutations(base, ok, b.mutations, r, () => {
      const q = rangeQuery(v, r);
      return r.chance(0.5) ? [`limit ${limit + 1}`, { limit: Math.min(limit + 1, 65536) }] : ['another query', q];
    });
    for (const [label, root] of wrongRoots(v, other, r)) check({ ...base, root }, 'wrong-input', label, 'error');
    // Other queries against the same proof: ok or not, both must agree.
    check({ ...base, limit: limit + 1 > 65536 ? 1 : limit + 1 }, 'wrong-input', 'limit + 1');
    if (limit > 1) check({ ...base, limit: limit - 1 }, 'wrong-input', 'limit − 1');
    check({ ...base, limit: r.pick([0, 65537, 2 ** 32, 2 ** 32 + 1, 2 ** 53 - 1]) }, 'wrong-input', 'limit outside 1 … 65536', 'error');
    check({ ...base, end: undefined }, 'wrong-input', 'unbounded end');
    const shifted = r.chance(0.5) && v.sorted.length > 0 ? r.pick(v.sorted)[0] : absentKey(v, r);
    if (end === undefined || compareBytes(end, shifted) > 0) check({ ...base, start: shifted }, 'wrong-input', 'other start');
    if (compareBytes(shifted, start) > 0) check({ ...base, end: shifted }, 'wrong-input', 'other end');
    check({ ...base, start: new Uint8Array(0) }, 'wrong-input', 'empty start');
    check({ ...base, end: start.length > 0 ? start : Uint8Array.of(0) }, 'wrong-input', 'end = start (or empty start, end 0x00)');
    check({ ...base, end: new Uint8Array(0) }, 'wrong-input', 'empty end', 'error');
    check({ ...base, start: TOO_LONG_KEY, limit: 0 }, 'wrong-input', 'start of 1025 bytes and limit 0', 'error');
    check({ ...base, end: TOO_LONG_KEY }, 'wrong-input', 'end of 1025 bytes');
    if (i % 8 === 0) check({ ...base, start: MAX_KEY, end: undefined }, 'wrong-input', 'start of 1024 bytes');
  }
}

function chunkCases(v: Version, other: Version | undefined, b: Budget, r: Rng): void {
  const n = v.chunkSizes.length;
  if (n === 0) return;
  // Every chunk when there are few, else the edges and a random sample.
  const indices = n <= b.chunks ? [...Array(n).keys()] : [0, n - 1, ...Array.from({ length: b.chunks - 2 }, () => r.int(n))];
  for (const i of indices) {
    const totals = `${n},${v.sorted.length}`;
    // Chunk proof.
    const proof = v.snap.proveChunk(i);
    const okProof = `${i},${totals},${v.keyHeights[i]}`;
    const pbase: Case = { kind: 'chunkProof', root: v.root, bytes: proof };
    check({ ...pbase, bytes: asInput(proof, r) }, 'valid', 'proveChunk', { ok: okProof });
    mutations(pbase, okProof, b.mutations, r, () => ['another root', { root: r.pick(wrongRoots(v, other, r))[1] }]);
    for (const [label, root] of wrongRoots(v, other, r)) check({ ...pbase, root }, 'wrong-input', label, 'error');
    // Chunk envelope.
    const env = v.snap.exportChunk(i);
    const before = v.chunkSizes.slice(0, i).reduce((a, x) => a + x, 0);
    const entries = v.sorted.slice(before, before + v.chunkSizes[i]!);
    const capacity = v.snap.capacity;
    const okEnv = JSON.stringify([i, n, v.sorted.length, capacity, v.keyHeights[i], pairsHex(entries)]);
    const ebase: Case = { kind: 'envelope', root: v.root, index: i, bytes: env };
    check({ ...ebase, bytes: asInput(env, r) }, 'valid', 'exportChunk', { ok: okEnv });
    mutations(ebase, okEnv, b.mutations, r, () =>
      r.chance(0.7) ? [`index ${i + 1}`, { index: i + 1 }] : ['another root', { root: r.pick(wrongRoots(v, other, r))[1] }],
    );
    for (const [label, root] of wrongRoots(v, other, r)) check({ ...ebase, root }, 'wrong-input', label, 'error');
    for (const index of new Set([i + 1, i - 1, n, n + 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + i, 2 ** 53 - 1])) {
      if (index >= 0 && index !== i) check({ ...ebase, index }, 'wrong-input', `index ${index}`, 'error');
    }
  }
}

/** Strictly increasing, distinct. */
const sortedKeys = (keys: Uint8Array[]) => keys.sort(compareBytes).filter((k, i, all) => i === 0 || compareBytes(all[i - 1]!, k) !== 0);

function multiproofCases(v: Version, other: Version | undefined, b: Budget, r: Rng): void {
  for (let i = 0; i < b.absence; i++) {
    const n = r.chance(0.3) ? 1 : r.range(2, 24);
    const keys = sortedKeys(Array.from({ length: n }, () => (v.sorted.length > 0 && r.chance(0.5) ? r.pick(v.sorted)[0] : absentKey(v, r))));
    const payload = v.snap.proveMulti(keys, 8 << 20);
    const bytes = payload.subarray(encodeVarint(keys.length).length); // the k varint in front (every key fits)
    // The model's answer to a query: what any proof that verifies must give.
    const answerTo = (ks: Uint8Array[]) => JSON.stringify([ks.map((k) => opt(v.model.get(toHex(k))?.[1])), v.chunkSizes.length, v.sorted.length]);
    const ok = answerTo(keys);
    const base: Case = { kind: 'multiproof', root: v.root, keys, bytes };
    check({ ...base, bytes: asInput(bytes, r) }, 'valid', 'proveMulti', { ok });
    mutations(base, ok, b.mutations, r, () => {
      const k = absentKey(v, r);
      return r.chance(0.5) ? ['one more key', { keys: sortedKeys([...keys, k]) }] : ['the keys reversed', { keys: [...keys].reverse() }];
    });
    for (const [label, root] of wrongRoots(v, other, r)) check({ ...base, root }, 'wrong-input', label, 'error');
    // Another query: a proof may still answer it (the entries it reveals can
    // prove it too), but then exactly as the model does.
    const another = (ks: Uint8Array[], label: string) => check({ ...base, keys: ks }, 'wrong-input', label, { sameOrError: answerTo(ks) });
    if (keys.length > 1) {
      another(keys.slice(1), 'the first key left out');
      check({ ...base, keys: [keys[1]!, keys[0]!, ...keys.slice(2)] }, 'wrong-input', 'two keys swapped', 'error');
    }
    another(sortedKeys([...keys, absentKey(v, r)]), 'an absent key added');
    check({ ...base, keys: [] }, 'wrong-input', 'no key', 'error');
    check({ ...base, keys: [new Uint8Array(0), ...keys] }, 'wrong-input', 'an empty key', 'error');
    check({ ...base, keys: [...keys, TOO_LONG_KEY] }, 'wrong-input', 'a key of 1025 bytes', 'error');
  }
}

/** Every base proof given to the verifiers of the other kinds. */
function crossKind(v: Version, r: Rng): void {
  const samples: Uint8Array[] = [];
  if (v.sorted.length > 0) samples.push(v.snap.proveExistence(r.pick(v.sorted)[0]));
  samples.push(v.snap.proveAbsence(absentKey(v, r)));
  samples.push(v.snap.proveRange(new Uint8Array(0), undefined, 5));
  if (v.chunkSizes.length > 0) samples.push(v.snap.proveChunk(0), v.snap.exportChunk(0));
  samples.push(v.snap.proveMulti([absentKey(v, r)], 8 << 20).subarray(1));
  const [key, value] = v.sorted[0] ?? [Uint8Array.of(1), Uint8Array.of(2)];
  for (const bytes of samples) {
    check({ kind: 'existence', root: v.root, key, value, bytes }, 'cross-kind', `format ${bytes[0]}`);
    check({ kind: 'absence', root: v.root, key: absentKey(v, r), bytes }, 'cross-kind', `format ${bytes[0]}`);
    check({ kind: 'range', root: v.root, start: new Uint8Array(0), end: undefined, limit: 5, bytes }, 'cross-kind', `format ${bytes[0]}`);
    check({ kind: 'chunkProof', root: v.root, bytes }, 'cross-kind', `format ${bytes[0]}`);
    check({ kind: 'envelope', root: v.root, index: 0, bytes }, 'cross-kind', `format ${bytes[0]}`);
    check({ kind: 'multiproof', root: v.root, keys: [key], bytes }, 'cross-kind', `format ${bytes[0]}`);
  }
}

// ------------------------------------------------------------------ the suite

interface Config {
  name: string;
  capacity: number;
  n: number;
  seed: number;
  budget: Budget;
  emptyAtEnd?: boolean;
  /** Keys of 1024 bytes and values of 65536 bytes, often. */
  limits?: boolean;
}

const full = (existence: number, absence: number, range: number, chunks: number, mut: number): Budget => ({
  existence,
  absence,
  range,
  chunks,
  mutations: mut,
});

const CONFIGS: Config[] = [
  { name: 'C=2, 700 entries', capacity: 2, n: 700, seed: 0x0201, budget: full(100, 50, 50, 30, 20) },
  { name: 'C=3, 1200 entries', capacity: 3, n: 1200, seed: 0x0301, budget: full(100, 50, 50, 30, 20) },
  { name: 'C=4, 2000 entries', capacity: 4, n: 2000, seed: 0x0401, budget: full(100, 50, 50, 30, 20) },
  { name: 'C=16, 3000 entries', capacity: 16, n: 3000, seed: 0x1601, budget: full(100, 50, 50, 30, 20) },
  { name: 'C=64, 3000 entries', capacity: 64, n: 3000, seed: 0x6401, budget: full(100, 50, 50, 30, 20) },
  { name: 'C=256, 4000 entries', capacity: 256, n: 4000, seed: 0x25601, budget: full(80, 40, 40, 20, 16) },
  { name: 'C=4096, 5000 entries', capacity: 4096, n: 5000, seed: 0x409601, budget: full(40, 20, 20, 3, 12) },
  { name: 'C=4, 40 entries, 1024-byte keys and 65536-byte values', capacity: 4, n: 40, seed: 0x4096, budget: full(30, 20, 20, 8, 12), limits: true },
  // Edge shapes: one entry, one full chunk, two chunks, and a tree emptied by removals.
  { name: 'C=256, 1 entry', capacity: 256, n: 1, seed: 0x25602, budget: full(10, 20, 20, 4, 20) },
  { name: 'C=64, one full chunk', capacity: 64, n: 64, seed: 0x6402, budget: full(30, 20, 20, 4, 20) },
  { name: 'C=4, 5 entries (two chunks)', capacity: 4, n: 5, seed: 0x0402, budget: full(20, 20, 20, 4, 20) },
  { name: 'C=16, emptied by removals', capacity: 16, n: 40, seed: 0x1602, budget: full(0, 40, 40, 0, 20), emptyAtEnd: true },
];

// Every test here is synchronous CPU work; together they run for about a
// minute. Yielding to the event loop after each test lets the worker answer
// vitest's RPC, whose calls time out after 60 s without a turn of the loop.
afterEach(() => new Promise<void>((resolve) => setImmediate(resolve)));

describe('TS and WASM verifiers agree on random trees, proofs and mutations', () => {
  for (const cfg of CONFIGS) {
    it(cfg.name, () => {
      const r = rng(cfg.seed);
      atLimits = cfg.limits === true;
      const { tree, versions } = buildTree(cfg.capacity, cfg.n, r, cfg.emptyAtEnd);
      atLimits = false;
      const [last, first] = versions as [Version, Version];
      if (cfg.emptyAtEnd) expect(last.sorted.length).toBe(0);
      // The last version fully, the first one (an older snapshot, still valid) with a quarter of the budget.
      const quarter: Budget = {
        existence: Math.ceil(cfg.budget.existence / 4),
        absence: Math.ceil(cfg.budget.absence / 4),
        range: Math.ceil(cfg.budget.range / 4),
        chunks: Math.max(2, Math.ceil(cfg.budget.chunks / 4)),
        mutations: cfg.budget.mutations,
      };
      for (const [v, other, b] of [
        [last, first, cfg.budget],
        [first, last, quarter],
      ] as const) {
        existenceCases(v, other, b, r);
        absenceCases(v, other, b, r);
        rangeCases(v, other, b, r);
        chunkCases(v, other, b, r);
        multiproofCases(v, other, b, r);
        crossKind(v, r);
      }
      OTHER_ROOTS.push(last.root);
      first.snap.free();
      last.snap.free();
      tree.free();
      assertNoFailures();
    }, 60_000);
  }
});

describe('random garbage only ever throws the typed error', () => {
  const FORMAT: Record<Kind, number> = { existence: 1, absence: 2, range: 3, chunkProof: 4, envelope: 5, multiproof: 0x0d };

  /** Random bytes; a third with a random first byte, a third with the right format byte, a third also with a plausible header. */
  function garbage(kind: Kind, r: Rng): Uint8Array {
    const len = r.chance(0.5) ? r.int(65) : r.int(5001);
    const b = r.bytes(len);
    const mode = r.int(3);
    if (len === 0 || mode === 0) return b;
    b[0] = FORMAT[kind];
    if (mode === 1) return b;
    // capacity, then the next small fields, as small canonical varints.
    const head = [FORMAT[kind], ...encodeVarint(r.pick([2, 3, 4, 16, 64, 256, 4096, r.range(2, 4096)]))];
    if (kind === 'envelope') head.push(r.int(8), ...encodeVarint(r.range(1, 4)));
    else if (kind === 'absence') head.push(r.int(4));
    else if (kind === 'range') head.push(...encodeVarint(r.int(3)), ...encodeVarint(r.range(1, 4)), 0, 1);
    else if (kind === 'multiproof') head.push(r.int(4), r.range(1, 4));
    else head.push(...encodeVarint(r.range(1, 4)), 0);
    const out = concat(Uint8Array.from(head), b.subarray(1));
    // Some with valid-looking short keys so that decoding goes deeper.
    if (kind === 'envelope' && r.chance(0.5) && out.length > head.length + 4) out.set([1, 0x41, 0], head.length);
    return out;
  }

  it('4,800 random byte strings of 0 … 5,000 bytes, to each verifier', () => {
    const r = rng(0x9a7ba9e);
    const root = r.bytes(32);
    const key = utf8('some key');
    let n = 0;
    for (let i = 0; i < 800; i++) {
      for (const kind of ['existence', 'absence', 'range', 'chunkProof', 'envelope', 'multiproof'] as const) {
        const bytes = asInput(garbage(kind, r), r);
        const rt = r.chance(0.5) || OTHER_ROOTS.length === 0 ? root : r.pick(OTHER_ROOTS);
        const c: Case =
          kind === 'existence'
            ? { kind, root: rt, key, value: r.bytes(r.int(10)), bytes }
            : kind === 'absence'
              ? { kind, root: rt, key, bytes }
              : kind === 'range'
                ? { kind, root: rt, start: new Uint8Array(0), end: r.chance(0.5) ? undefined : Uint8Array.of(0xff), limit: r.range(1, 100), bytes }
                : kind === 'chunkProof'
                  ? { kind, root: rt, bytes }
                  : kind === 'multiproof'
                    ? { kind, root: rt, keys: [key], bytes }
                    : { kind, root: rt, index: r.int(4), bytes };
        // Garbage must be rejected, by both, with a typed error and the same code.
        check(c, 'garbage', `garbage ${bytes.length} bytes`, 'error');
        n++;
      }
    }
    expect(n).toBe(4800);
    assertNoFailures();
  }, 60_000);
});

describe('argument edge cases: both verifiers reject with the same error class, or the same code', () => {
  // Not bytes but arguments: both packages document TypeError for a wrong
  // type and RangeError for an impossible value, and a ProofError with the
  // spec's code for everything the spec checks (the limit range 1 … 65536 is
  // such a check: `QUERY_INVALID`, spec/proof-format.md).
  const kindOf = (fn: () => unknown, typed: (e: unknown) => boolean): string => {
    try {
      fn();
      return 'ok';
    } catch (e) {
      if (typed(e)) return `ProofError ${(e as { code: string }).code}`;
      if (e instanceof TypeError) return 'TypeError';
      if (e instanceof RangeError) return 'RangeError';
      return `untyped: ${String(e)}`;
    }
  };

  const r = rng(0xa59);
  const tree = new wasm.Tree(4);
  for (let i = 0; i < 50; i++) tree.insert(utf8(`key${String(i).padStart(2, '0')}`), utf8(`v${i}`));
  const { root } = tree.commit();
  const key = utf8('key07');
  const value = utf8('v7');
  const existence = tree.head().proveExistence(key);
  const range = tree.head().proveRange(utf8('key10'), undefined, 5);
  const envelope = tree.head().exportChunk(3);
  tree.free();

  type Row = [label: string, call: (impl: typeof ts | typeof wasm) => unknown];
  const rows: Row[] = [];
  const num = (x: number) => (Object.is(x, -0) ? '-0' : String(x));
  for (const limit of [5, 0, -0, -1, 65537, 2 ** 32 + 5, 2 ** 53 - 1, 2 ** 53, 1.5, NaN, Infinity, -Infinity]) {
    rows.push([`verifyRange limit ${num(limit)}`, (impl) => impl.verifyRange(root, utf8('key10'), undefined, limit, range)]);
  }
  for (const limit of ['5', 5n, null, undefined] as unknown[]) {
    rows.push([`verifyRange limit ${typeof limit} ${String(limit)}`, (impl) => impl.verifyRange(root, utf8('key10'), undefined, limit as number, range)]);
  }
  rows.push(['verifyRange end null (unbounded)', (impl) => impl.verifyRange(root, utf8('key10'), null, 5, range)]);
  for (const index of [3, -0, -1, 1.5, NaN, Infinity, 2 ** 53, 2 ** 53 - 1, 2 ** 32 + 3]) {
    rows.push([`verifyChunk index ${num(index)}`, (impl) => impl.verifyChunk(root, index, envelope)]);
  }
  for (const index of ['3', 3n, null, undefined] as unknown[]) {
    rows.push([`verifyChunk index ${typeof index} ${String(index)}`, (impl) => impl.verifyChunk(root, index as number, envelope)]);
  }
  for (const len of [0, 31, 33]) {
    rows.push([`verifyExistence root of ${len} bytes`, (impl) => impl.verifyExistence(r.bytes(len), key, value, existence)]);
  }
  for (const bad of ['0102', new ArrayBuffer(4), [1, 2], null, undefined, new Uint16Array(2), new DataView(new ArrayBuffer(2))] as unknown[]) {
    const what = bad === null ? 'null' : Array.isArray(bad) ? 'number[]' : typeof bad === 'object' ? (bad as object).constructor.name : typeof bad;
    rows.push([`verifyExistence proof as ${what}`, (impl) => impl.verifyExistence(root, key, value, bad as Uint8Array)]);
    rows.push([`verifyExistence key as ${what}`, (impl) => impl.verifyExistence(root, bad as Uint8Array, value, existence)]);
  }

  it.each(rows)('%s', (label, call) => {
    const t = kindOf(() => call(ts), tsTyped);
    const w = kindOf(() => {
      const res = call(wasm) as { free?: () => void } | undefined;
      res?.free?.();
    }, wasmTyped);
    bump(label.startsWith('verifyChunk') ? 'envelope' : label.startsWith('verifyRange') ? 'range' : 'existence', 'wrong-input');
    expect(t, `TS: ${t}, WASM: ${w}`).not.toMatch(/^untyped/);
    expect(w, `TS: ${t}, WASM: ${w}`).toBe(t);
});
});
