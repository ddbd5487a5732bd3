// Argument validation in noble's convention: TypeError for a wrong type,
// RangeError for a wrong value that is not a proof-format issue; spec limits
// are ProofErrors with the spec's codes, exactly as the Rust verifier reports them.
import { describe, expect, it } from 'vitest';
import {
  decodeChunkEnvelope,
  emptyRoot,
  entryHash,
  verifyAbsence,
  verifyChunk,
  verifyChunkProof,
  verifyExistence,
  verifyRange,
} from '../src/verify.js';
import { proofErrorCode } from './vectors.shared.js';

const root = new Uint8Array(32);
const b = (n: number) => new Uint8Array(n);
const proof = Uint8Array.of(0x01);
const any = (x: unknown) => x as Uint8Array;

describe('TypeError for wrong types', () => {
  it.each([
    ['root as array', () => verifyExistence(any([0]), b(1), b(0), proof)],
    ['root as string', () => verifyChunkProof(any('00'.repeat(32)), proof)],
    ['key as string', () => verifyExistence(root, any('k'), b(0), proof)],
    ['value as undefined', () => verifyExistence(root, b(1), any(undefined), proof)],
    ['proof as ArrayBuffer', () => verifyAbsence(root, b(1), any(new ArrayBuffer(3)))],
    ['proof as number[]', () => verifyChunkProof(root, any([4]))],
    ['start as null', () => verifyRange(root, any(null), undefined, 1, proof)],
    ['end as string', () => verifyRange(root, b(0), any('z'), 1, proof)],
    ['limit as string', () => verifyRange(root, b(0), undefined, '10' as unknown as number, proof)],
    ['limit as bigint', () => verifyRange(root, b(0), undefined, 10n as unknown as number, proof)],
    ['index as string', () => verifyChunk(root, '0' as unknown as number, proof)],
    ['index as bigint', () => verifyChunk(root, 0n as unknown as number, proof)],
    ['envelope as Uint16Array', () => verifyChunk(root, 0, any(new Uint16Array(2)))],
    ['decodeChunkEnvelope(string)', () => decodeChunkEnvelope(any('05'))],
    ['emptyRoot(string)', () => emptyRoot('2' as unknown as number)],
    ['entryHash(string, bytes)', () => entryHash(any('k'), b(0))],
  ])('%s', (_name, fn) => {
    expect(fn).toThrow(TypeError);
  });
});

describe('RangeError for wrong values that are not format issues', () => {
  it.each([
    ['root of 31 bytes', () => verifyExistence(b(31), b(1), b(0), proof)],
    ['root of 33 bytes', () => verifyAbsence(b(33), b(1), proof)],
    ['empty root', () => verifyChunkProof(b(0), proof)],
    ['root of 31 bytes (range)', () => verifyRange(b(31), b(0), undefined, 1, proof)],
    ['root of 31 bytes (chunk)', () => verifyChunk(b(31), 0, proof)],
    ['index −1', () => verifyChunk(root, -1, proof)],
    ['index 1.5', () => verifyChunk(root, 1.5, proof)],
    ['index 2^53', () => verifyChunk(root, 2 ** 53, proof)],
    ['index NaN', () => verifyChunk(root, NaN, proof)],
    ['index Infinity', () => verifyChunk(root, Infinity, proof)],
    ['emptyRoot(1)', () => emptyRoot(1)],
    ['emptyRoot(4097)', () => emptyRoot(4097)],
  ])('%s', (_name, fn) => {
    expect(fn).toThrow(RangeError);
  });

  it('argument errors come before the spec checks (a bad root with an empty key is a RangeError)', () => {
    expect(() => verifyExistence(b(31), b(0), b(0), b(0))).toThrow(RangeError);
  });
});

describe('spec limits are ProofErrors, checked before decoding', () => {
  it.each([
    ['existence: empty key', 'KEY_EMPTY', () => verifyExistence(root, b(0), b(0), b(0))],
    ['existence: 1025-byte key', 'KEY_TOO_LONG', () => verifyExistence(root, b(1025), b(0), b(0))],
    ['existence: 65537-byte value', 'VALUE_TOO_LONG', () => verifyExistence(root, b(1), b(65537), b(0))],
    ['existence: key before value', 'KEY_EMPTY', () => verifyExistence(root, b(0), b(65537), b(0))],
    ['absence: empty key', 'KEY_EMPTY', () => verifyAbsence(root, b(0), b(0))],
    ['absence: 1025-byte key', 'KEY_TOO_LONG', () => verifyAbsence(root, b(1025), b(0))],
    ['range: 1025-byte start', 'KEY_TOO_LONG', () => verifyRange(root, b(1025), undefined, 1, b(0))],
    ['range: empty end', 'KEY_EMPTY', () => verifyRange(root, b(0), b(0), 1, b(0))],
    ['range: 1025-byte end', 'KEY_TOO_LONG', () => verifyRange(root, b(0), b(1025), 1, b(0))],
    ['range: limit 0', 'QUERY_INVALID', () => verifyRange(root, b(0), undefined, 0, b(0))],
    ['range: limit −1', 'QUERY_INVALID', () => verifyRange(root, b(0), undefined, -1, b(0))],
    ['range: limit 65537', 'QUERY_INVALID', () => verifyRange(root, b(0), undefined, 65537, b(0))],
    ['range: limit 2^60', 'QUERY_INVALID', () => verifyRange(root, b(0), undefined, 2 ** 60, b(0))],
    ['range: limit 1.5', 'QUERY_INVALID', () => verifyRange(root, b(0), undefined, 1.5, b(0))],
    ['range: limit NaN', 'QUERY_INVALID', () => verifyRange(root, b(0), undefined, NaN, b(0))],
    ['range: end = start', 'QUERY_INVALID', () => verifyRange(root, b(1), b(1), 1, b(0))],
    ['range: end < start', 'QUERY_INVALID', () => verifyRange(root, Uint8Array.of(2), Uint8Array.of(1), 1, b(0))],
    ['range: start too long before a bad limit', 'KEY_TOO_LONG', () => verifyRange(root, b(1025), undefined, 0, b(0))],
  ])('%s → %s', (_name, code, fn) => {
    expect(proofErrorCode(fn)).toBe(code);
  });

  it('accepts limits at the bounds, and null as an unbounded end', () => {
    // These pass the query checks and fail only on the (empty) proof.
    expect(proofErrorCode(() => verifyRange(root, b(0), null, 1, b(0)))).toBe('TRUNCATED');
    expect(proofErrorCode(() => verifyRange(root, b(1024), undefined, 65536, b(0)))).toBe('TRUNCATED');
  });
});
