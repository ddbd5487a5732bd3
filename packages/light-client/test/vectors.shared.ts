/**
 * The golden-vector suite of `spec/vectors/` (see its README for the JSON
 * shapes), written once and run against every implementation (noble's
 * PLATFORMS idea): `runVectorSuite('ts', tsImpl)` here, and later
 * `runVectorSuite('wasm', wasmImpl)` with an adapter over `@bpavl/wasm`.
 *
 * Implementations are adapted to one normalized shape ({@link VerifierImpl}):
 * entries as `[key, value]` pairs, numbers as JS numbers.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** Every code `spec/errors.md` lists for decoding and verification. */
export const SPEC_CODES = [
  'TRUNCATED', 'TRAILING_BYTES', 'FORMAT_UNSUPPORTED', 'VARINT_NON_CANONICAL', 'VARINT_OVERFLOW',
  'CAPACITY_INVALID', 'CHUNK_SIZE_INVALID', 'CHUNK_FILL', 'POSITION_INVALID', 'KEY_EMPTY',
  'KEY_TOO_LONG', 'VALUE_TOO_LONG', 'KEYS_NOT_SORTED', 'PATH_TOO_LONG', 'HEIGHT_INVALID',
  'COUNT_INVALID', 'FLAGS_INVALID', 'ROOT_MISMATCH', 'CHUNK_INDEX_MISMATCH', 'KEY_HEIGHT_MISMATCH',
  'ABSENCE_INVALID', 'RANGE_INVALID', 'QUERY_INVALID',
] as const;

export type Pair = [key: Uint8Array, value: Uint8Array];

/** One implementation of the verifiers, in the suite's normalized shape. */
export interface VerifierImpl {
  verifyExistence(
    root: Uint8Array, key: Uint8Array, value: Uint8Array, proof: Uint8Array,
  ): { chunkIndex: number; position: number; chunks: number; entries: number };
  /** Neighbour keys when the implementation reports them, else `undefined`. */
  verifyAbsence(
    root: Uint8Array, key: Uint8Array, proof: Uint8Array,
  ): { leftKey: Uint8Array | null; rightKey: Uint8Array | null } | undefined;
  verifyRange(
    root: Uint8Array, start: Uint8Array, end: Uint8Array | undefined, limit: number, proof: Uint8Array,
  ): { entries: Pair[]; complete: boolean; resumeKey: Uint8Array | undefined };
  verifyChunkProof(
    root: Uint8Array, proof: Uint8Array,
  ): { index: number; chunks: number; entries: number; keyHeight: number };
  verifyChunk(
    root: Uint8Array, index: number, envelope: Uint8Array,
  ): { index: number; chunkCount: number; totalEntries: number; capacity: number; keyHeight: number; entries: Pair[] };
}

export function hex(s: string): Uint8Array {
  return Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
}

export function toHex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// Any JSON shape; the suite reads fields by the README's names.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

export function loadVectors(name: string): Json {
  return JSON.parse(readFileSync(new URL(`../../../spec/vectors/${name}.json`, import.meta.url), 'utf8'));
}

const pairsHex = (ps: Pair[]): [string, string][] => ps.map(([k, v]) => [toHex(k), toHex(v)]);
const optHex = (b: Uint8Array | null | undefined): string | null => (b == null ? null : toHex(b));

/** Runs `fn` and returns the `code` of the ProofError it throws; fails the test on success or on any other throw. */
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
 * Registers the whole vector suite for `impl` under `describe(name)`:
 * valid cases verify with exactly the expected outputs, invalid cases fail
 * with exactly the expected code, and tampered valid cases only ever throw
 * ProofError.
 */
export function runVectorSuite(name: string, impl: VerifierImpl): void {
  describe(`vectors: ${name}`, () => {
    describe('existence.json', () => {
      const v = loadVectors('existence');
      it.each<Json>(v.valid)('valid: $description', (c) => {
        const r = impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof));
        expect(r).toEqual({ chunkIndex: c.chunk_index, position: c.position, chunks: c.chunks, entries: c.entries });
      });
      it.each<Json>(v.invalid)('invalid $code: $why', (c) => {
        expect(proofErrorCode(() => impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof)))).toBe(c.code);
      });
      it('tampered proofs only throw ProofError', () => {
        for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
          tamperAll(hex(c.proof), (p) => impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), p));
        }
      });
    });

    describe('absence.json', () => {
      const v = loadVectors('absence');
      it.each<Json>(v.valid)('valid: $description', (c) => {
        const r = impl.verifyAbsence(hex(c.root), hex(c.key), hex(c.proof));
        if (r !== undefined) {
          expect({ left: optHex(r.leftKey), right: optHex(r.rightKey) }).toEqual({ left: c.left_key, right: c.right_key });
        }
      });
      it.each<Json>(v.invalid)('invalid $code: $why', (c) => {
        expect(proofErrorCode(() => impl.verifyAbsence(hex(c.root), hex(c.key), hex(c.proof)))).toBe(c.code);
      });
      it('tampered proofs only throw ProofError', () => {
        for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
          tamperAll(hex(c.proof), (p) => impl.verifyAbsence(hex(c.root), hex(c.key), p));
        }
      });
    });

    describe('range.json', () => {
      const v = loadVectors('range');
      const end = (c: Json): Uint8Array | undefined => (c.end === null ? undefined : hex(c.end));
      it.each<Json>(v.valid)('valid: $description', (c) => {
        const r = impl.verifyRange(hex(c.root), hex(c.start), end(c), c.limit, hex(c.proof));
        expect({ results: pairsHex(r.entries), complete: r.complete, resume_key: optHex(r.resumeKey) }).toEqual({
          results: c.results,
          complete: c.complete,
          resume_key: c.resume_key,
        });
      });
      it.each<Json>(v.invalid)('invalid $code: $why', (c) => {
        expect(proofErrorCode(() => impl.verifyRange(hex(c.root), hex(c.start), end(c), c.limit, hex(c.proof)))).toBe(c.code);
      });
      it('tampered proofs only throw ProofError', () => {
        for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
          tamperAll(hex(c.proof), (p) => impl.verifyRange(hex(c.root), hex(c.start), end(c), c.limit, p));
        }
      });
    });

    describe('chunk_proof.json', () => {
      const v = loadVectors('chunk_proof');
      it.each<Json>(v.valid)('valid: $tree #$index', (c) => {
        const r = impl.verifyChunkProof(hex(c.root), hex(c.proof));
        expect(r).toEqual({ index: c.index, chunks: c.chunks, entries: c.entries, keyHeight: c.key_height });
      });
      it.each<Json>(v.invalid)('invalid $code: $why', (c) => {
        expect(proofErrorCode(() => impl.verifyChunkProof(hex(c.root), hex(c.proof)))).toBe(c.code);
      });
      it('tampered proofs only throw ProofError', () => {
        for (const c of pick(v.valid as Json[], (c) => c.proof.length)) {
          tamperAll(hex(c.proof), (p) => impl.verifyChunkProof(hex(c.root), p));
        }
      });
    });

    describe('chunk_envelope.json', () => {
      const v = loadVectors('chunk_envelope');
      it.each<Json>(v.valid)('valid: $tree #$index', (c) => {
        const r = impl.verifyChunk(hex(c.root), c.index, hex(c.envelope));
        expect({
          index: r.index,
          chunkCount: r.chunkCount,
          totalEntries: r.totalEntries,
          capacity: r.capacity,
          keyHeight: r.keyHeight,
          entries: pairsHex(r.entries),
        }).toEqual({
          index: c.index,
          chunkCount: c.chunks,
          totalEntries: c.entries,
          capacity: c.capacity,
          keyHeight: c.key_height,
          entries: c.chunk_entries,
        });
      });
      it.each<Json>(v.invalid)('invalid $code: $why', (c) => {
        expect(proofErrorCode(() => impl.verifyChunk(hex(c.root), c.index, hex(c.envelope)))).toBe(c.code);
      });
      it('tampered envelopes only throw ProofError', () => {
        for (const c of pick(v.valid as Json[], (c) => c.envelope.length)) {
          tamperAll(hex(c.envelope), (e) => impl.verifyChunk(hex(c.root), c.index, e));
        }
      });
    });
  });
}
