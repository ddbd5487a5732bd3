/**
 * The golden-vector suite of `spec/vectors/` as plain data and functions: no
 * test runner, no Node built-ins, so it runs unchanged under vitest
 * (`vectors.shared.ts` registers each case as an `it`) and in a browser page
 * (`tests/browser/app/main.ts` runs the cases in a loop).
 *
 * Every implementation runs through the one {@link Verifier} interface
 * (`tsVerifier`, `wasmVerifier(wasm)` from `@bpavl/light-client/verify`).
 */

import type { Verifier } from '../src/verifier.js';

/** Every code `spec/errors.md` lists for decoding and verification. */
export const SPEC_CODES = [
  'TRUNCATED', 'TRAILING_BYTES', 'FORMAT_UNSUPPORTED', 'VARINT_NON_CANONICAL', 'VARINT_OVERFLOW',
  'CAPACITY_INVALID', 'CHUNK_SIZE_INVALID', 'CHUNK_FILL', 'POSITION_INVALID', 'KEY_EMPTY',
  'KEY_TOO_LONG', 'VALUE_TOO_LONG', 'KEYS_NOT_SORTED', 'PATH_TOO_LONG', 'HEIGHT_INVALID',
  'COUNT_INVALID', 'FLAGS_INVALID', 'ROOT_MISMATCH', 'CHUNK_INDEX_MISMATCH', 'KEY_HEIGHT_MISMATCH',
  'ABSENCE_INVALID', 'RANGE_INVALID', 'QUERY_INVALID', 'MULTIPROOF_INVALID',
] as const;

export type Pair = [key: Uint8Array, value: Uint8Array];

/** The proof files of `spec/vectors/` the suite runs (trees.json is replayed by the tree suites). */
export const VECTOR_FILES = ['existence', 'absence', 'range', 'chunk_proof', 'chunk_envelope', 'multiproof'] as const;
export type VectorFile = (typeof VECTOR_FILES)[number];

// Any JSON shape; the suite reads fields by the README's names.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** The parsed JSON of every file in {@link VECTOR_FILES}. */
export type VectorSet = Record<VectorFile, Json>;

/**
 * An equality assertion: throws unless `actual` deep-equals `expected`
 * (vitest: `expect(actual).toEqual(expected)`; elsewhere {@link assertDeepEqual}).
 */
export type AssertEqual = (actual: unknown, expected: unknown) => void;

/** One test of the suite: `file` is the vector file, `name` the test title. */
export interface VectorCase {
  file: VectorFile;
  name: string;
  run(eq: AssertEqual): void;
}

export function hex(s: string): Uint8Array {
  return Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
}

export function toHex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

const pairsHex = (ps: Pair[]): [string, string][] => ps.map(([k, v]) => [toHex(k), toHex(v)]);
const optHex = (b: Uint8Array | null | undefined): string | null => (b == null ? null : toHex(b));

/** Runs `fn` and returns the `code` of the ProofError it throws; throws on success or on any other throw. */
export function proofErrorCode(fn: () => unknown): string {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  if (thrown === undefined) throw new Error('expected a ProofError, but verification succeeded');
  if (!(thrown instanceof Error) || thrown.name !== 'ProofError') {
    throw new Error(`expected a ProofError, got ${String(thrown)}`, { cause: thrown });
  }
  const code = (thrown as { code?: unknown }).code;
  if (typeof code !== 'string' || !(SPEC_CODES as readonly string[]).includes(code)) {
    throw new Error(`ProofError with unknown code ${String(code)}`);
  }
  return code;
}

/**
 * A runner-free `toEqual` for the suite's values (JSON-like data: numbers,
 * strings, booleans, null, arrays, plain objects; properties set to
 * `undefined` count as absent, as with `toEqual`). Throws with both values.
 */
export function assertDeepEqual(actual: unknown, expected: unknown): void {
  if (!deepEqual(actual, expected)) {
    throw new Error(`expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => deepEqual(x, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const keys = (o: Record<string, unknown>) => Object.keys(o).filter((k) => o[k] !== undefined).sort();
  const ak = keys(ao);
  const bk = keys(bo);
  return ak.length === bk.length && ak.every((k, i) => k === bk[i] && deepEqual(ao[k], bo[k]));
}

/** Flips every byte (xor 0xff and xor 0x01) and truncates at every length: each must be a ProofError. */
function tamperAll(bytes: Uint8Array, verify: (b: Uint8Array) => unknown): number {
  let n = 0;
  for (let i = 0; i < bytes.length; i++) {
    for (const mask of [0xff, 0x01]) {
      const t = bytes.slice();
      t[i]! ^= mask;
      proofErrorCode(() => verify(t));
      n++;
    }
  }
  for (let len = 0; len < bytes.length; len++) {
    proofErrorCode(() => verify(bytes.subarray(0, len)));
    n++;
  }
  const extended = new Uint8Array(bytes.length + 1);
  extended.set(bytes);
  proofErrorCode(() => verify(extended));
  return n + 1;
}

/**
 * A few valid cases to tamper with: the first, the last and the largest of at
 * most 2 KiB (every byte of a 24 KiB range proof would take half a minute).
 */
function pick<T>(cases: T[], hexSize: (c: T) => number): T[] {
  const small = cases.filter((c) => hexSize(c) <= 4096);
  const largest = small.reduce((a, b) => (hexSize(b) > hexSize(a) ? b : a));
  return [...new Set([cases[0]!, cases[cases.length - 1]!, largest])].filter((c) => hexSize(c) <= 4096);
}

/**
 * Every test of the vector suite for `impl`, in file order: valid cases
 * verify with exactly the expected outputs, invalid cases fail with exactly
 * the expected code, and (one test per file) tampered valid cases only ever
 * throw ProofError. Per file: `valid.length + invalid.length + 1` tests, and one
 * more for existence: every invalid case through `verifyExistenceBatch`.
 */
export function vectorCases(vectors: VectorSet, impl: Verifier): VectorCase[] {
  const out: VectorCase[] = [];
  const add = (file: VectorFile, name: string, run: (eq: AssertEqual) => void) => out.push({ file, name, run });
  const code = (eq: AssertEqual, fn: () => unknown, expected: string) => eq(proofErrorCode(fn), expected);

  {
    const f = 'existence';
    const v = vectors[f];
    for (const c of v.valid as Json[]) {
      add(f, `valid: ${c.description}`, (eq) => {
        const r = impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof));
        eq(r, { chunkIndex: c.chunk_index, position: c.position, chunkCount: c.chunk_count, entryCount: c.entry_count });
        eq(impl.verifyExistenceBatch(hex(c.root), [{ key: hex(c.key), value: hex(c.value), proof: hex(c.proof) }]), [r]);
      });
    }
    for (const c of v.invalid as Json[]) {
      add(f, `invalid ${c.code}: ${c.why}`, (eq) =>
        code(eq, () => impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof)), c.code));
    }
    add(f, 'a batch returns each invalid case\'s error in its place', (eq) => {
      for (const c of v.invalid as Json[]) {
        const [r] = impl.verifyExistenceBatch(hex(c.root), [{ key: hex(c.key), value: hex(c.value), proof: hex(c.proof) }]);
        eq(proofErrorCode(() => { throw r; }), c.code);
      }
    });
    add(f, 'tampered proofs only throw ProofError', () => {
      for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
        tamperAll(hex(c.proof), (p) => impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), p));
      }
    });
  }

  {
    const f = 'absence';
    const v = vectors[f];
    for (const c of v.valid as Json[]) {
      add(f, `valid: ${c.description}`, (eq) => {
        const { left, right } = impl.verifyAbsence(hex(c.root), hex(c.key), hex(c.proof));
        eq({ left: optHex(left?.key), right: optHex(right?.key) }, { left: c.left_key, right: c.right_key });
      });
    }
    for (const c of v.invalid as Json[]) {
      add(f, `invalid ${c.code}: ${c.why}`, (eq) =>
        code(eq, () => impl.verifyAbsence(hex(c.root), hex(c.key), hex(c.proof)), c.code));
    }
    add(f, 'tampered proofs only throw ProofError', () => {
      for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
        tamperAll(hex(c.proof), (p) => impl.verifyAbsence(hex(c.root), hex(c.key), p));
      }
    });
  }

  {
    const f = 'multiproof';
    const v = vectors[f];
    const keys = (c: Json): Uint8Array[] => (c.keys as string[]).map(hex);
    for (const c of v.valid as Json[]) {
      add(f, `valid: ${c.description}`, (eq) => {
        const r = impl.verifyMultiproof(hex(c.root), keys(c), hex(c.proof));
        eq({ values: r.values.map(optHex), chunkCount: r.chunkCount, entryCount: r.entryCount }, { values: c.values, chunkCount: c.chunk_count, entryCount: c.entry_count });
      });
    }
    for (const c of v.invalid as Json[]) {
      add(f, `invalid ${c.code}: ${c.why}`, (eq) => code(eq, () => impl.verifyMultiproof(hex(c.root), keys(c), hex(c.proof)), c.code));
    }
    add(f, 'tampered proofs only throw ProofError', () => {
      for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
        tamperAll(hex(c.proof), (p) => impl.verifyMultiproof(hex(c.root), keys(c), p));
      }
    });
  }

  {
    const f = 'range';
    const v = vectors[f];
    const end = (c: Json): Uint8Array | undefined => (c.end === null ? undefined : hex(c.end));
    for (const c of v.valid as Json[]) {
      add(f, `valid: ${c.description}`, (eq) => {
        const r = impl.verifyRange(hex(c.root), hex(c.start), end(c), c.limit, hex(c.proof));
        eq(
          { results: pairsHex(r.entries), complete: r.complete, resume_key: optHex(r.resumeKey) },
          { results: c.results, complete: c.complete, resume_key: c.resume_key },
        );
      });
    }
    for (const c of v.invalid as Json[]) {
      add(f, `invalid ${c.code}: ${c.why}`, (eq) =>
        code(eq, () => impl.verifyRange(hex(c.root), hex(c.start), end(c), c.limit, hex(c.proof)), c.code));
    }
    add(f, 'tampered proofs only throw ProofError', () => {
      for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
        tamperAll(hex(c.proof), (p) => impl.verifyRange(hex(c.root), hex(c.start), end(c), c.limit, p));
      }
    });
  }

  {
    const f = 'chunk_proof';
    const v = vectors[f];
    for (const c of v.valid as Json[]) {
      add(f, `valid: ${c.tree} #${c.index}`, (eq) => {
        const r = impl.verifyChunkProof(hex(c.root), hex(c.proof));
        eq(r, { index: c.index, chunkCount: c.chunk_count, entryCount: c.entry_count, keyHeight: c.key_height });
      });
    }
    for (const c of v.invalid as Json[]) {
      add(f, `invalid ${c.code}: ${c.why}`, (eq) =>
        code(eq, () => impl.verifyChunkProof(hex(c.root), hex(c.proof)), c.code));
    }
    add(f, 'tampered proofs only throw ProofError', () => {
      for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
        tamperAll(hex(c.proof), (p) => impl.verifyChunkProof(hex(c.root), p));
      }
    });
  }

  {
    const f = 'chunk_envelope';
    const v = vectors[f];
    for (const c of v.valid as Json[]) {
      add(f, `valid: ${c.tree} #${c.index}`, (eq) => {
        const r = impl.verifyChunk(hex(c.root), c.index, hex(c.envelope));
        eq(
          {
            index: r.index,
            chunkCount: r.chunkCount,
            entryCount: r.entryCount,
            capacity: r.capacity,
            keyHeight: r.keyHeight,
            entries: pairsHex(r.entries),
          },
          {
            index: c.index,
            chunkCount: c.chunk_count,
            entryCount: c.entry_count,
            capacity: c.capacity,
            keyHeight: c.key_height,
            entries: c.chunk_entries,
          },
        );
      });
    }
    for (const c of v.invalid as Json[]) {
      add(f, `invalid ${c.code}: ${c.why}`, (eq) =>
        code(eq, () => impl.verifyChunk(hex(c.root), c.index, hex(c.envelope)), c.code));
    }
    add(f, 'tampered envelopes only throw ProofError', () => {
      for (const c of pick(v.valid as Json[], (c) => c.envelope.length)) {
        tamperAll(hex(c.envelope), (e) => impl.verifyChunk(hex(c.root), c.index, e));
      }
    });
  }

  return out;
}
