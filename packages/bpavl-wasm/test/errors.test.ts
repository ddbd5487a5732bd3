// Error mapping: a refused operation or failed check is an Error whose
// `name` is the Rust error type and whose `code` is the stable code of
// spec/errors.md; wrong argument types are TypeErrors, impossible argument
// values RangeErrors (noble's convention). Never asserts messages.
import { describe, expect, it } from 'vitest';
import {
  checkKey,
  encodeStoreRecord,
  init,
  Rebuilder,
  Tree,
  verifyAbsence,
  verifyChunk,
  verifyChunkProof,
  verifyExistence,
  verifyRange,
} from '../index.js';
import { thrown, utf8 } from './helpers.js';

await init();

function expectCoded(e: any, name: string, code: string): void {
  expect(e).toBeInstanceOf(Error);
  expect(e.name).toBe(name);
  expect(e.code).toBe(code);
  expect(typeof e.message).toBe('string');
}

/** A committed tree of capacity 4 with 20 entries k00 … k19. */
function sample() {
  const tree = new Tree(4);
  for (let i = 0; i < 20; i++) tree.insert(utf8(`k${String(i).padStart(2, '0')}`), utf8(`v${i}`));
  const { root } = tree.commit();
  return { tree, root };
}

describe('TreeError', () => {
  const { tree } = sample();
  it.each([
    ['CAPACITY_INVALID', () => new Tree(1)],
    ['CAPACITY_INVALID', () => new Tree(4097)],
    ['CAPACITY_INVALID', () => new Tree(2 ** 40)],
    ['CAPACITY_INVALID', () => encodeStoreRecord(1)],
    ['CAPACITY_INVALID', () => encodeStoreRecord(4097)],
    ['KEY_EMPTY', () => tree.insert(new Uint8Array(), utf8('v'))],
    ['KEY_TOO_LONG', () => tree.insert(new Uint8Array(1025), utf8('v'))],
    ['KEY_EMPTY', () => tree.get(new Uint8Array())],
    ['KEY_TOO_LONG', () => tree.get(new Uint8Array(1025))],
    ['KEY_EMPTY', () => tree.remove(new Uint8Array())],
    ['KEY_TOO_LONG', () => tree.head().get(new Uint8Array(1025))],
    ['KEY_EMPTY', () => checkKey(new Uint8Array())],
    ['KEY_TOO_LONG', () => checkKey(new Uint8Array(1025))],
    ['VALUE_TOO_LONG', () => tree.insert(utf8('k'), new Uint8Array(65537))],
    ['KEY_NOT_FOUND', () => tree.head().proveExistence(utf8('nope'))],
    ['KEY_EXISTS', () => tree.head().proveAbsence(utf8('k03'))],
    ['CHUNK_OUT_OF_RANGE', () => tree.head().exportChunk(tree.chunkCount)],
    ['CHUNK_OUT_OF_RANGE', () => tree.head().proveChunk(2 ** 53 - 1)],
    ['QUERY_INVALID', () => tree.head().proveRange(utf8('a'), undefined, 0)],
    ['QUERY_INVALID', () => tree.head().proveRange(utf8('a'), undefined, 65537)],
    ['QUERY_INVALID', () => tree.head().proveRange(utf8('a'), undefined, NaN)],
    ['QUERY_INVALID', () => tree.head().proveRange(utf8('a'), undefined, -1)],
    ['QUERY_INVALID', () => tree.head().proveRange(utf8('b'), utf8('a'), 10)],
    ['KEY_EMPTY', () => tree.head().proveRange(utf8('a'), new Uint8Array(), 10)],
  ])('%s', (code, f) => expectCoded(thrown(f), 'TreeError', code));

  it('leaves the tree unchanged', () => {
    const len = tree.len;
    thrown(() => tree.insert(new Uint8Array(1025), utf8('v')));
    expect(tree.len).toBe(len);
  });
});

describe('ProofError', () => {
  const { tree, root } = sample();
  const other = sample().tree;
  other.insert(utf8('extra'), utf8('x'));
  const otherRoot = other.commit().root;
  it.each([
    ['ROOT_MISMATCH', () => verifyExistence(root, utf8('k03'), utf8('wrong'), tree.head().proveExistence(utf8('k03')))],
    ['ROOT_MISMATCH', () => verifyExistence(otherRoot, utf8('k03'), utf8('v3'), tree.head().proveExistence(utf8('k03')))],
    ['TRUNCATED', () => verifyExistence(root, utf8('k03'), utf8('v3'), new Uint8Array())],
    ['TRAILING_BYTES', () => verifyExistence(root, utf8('k03'), utf8('v3'), new Uint8Array([...tree.head().proveExistence(utf8('k03')), 0]))],
    ['FORMAT_UNSUPPORTED', () => verifyExistence(root, utf8('k03'), utf8('v3'), tree.head().proveAbsence(utf8('k035')))],
    ['KEY_EMPTY', () => verifyAbsence(root, new Uint8Array(), tree.head().proveAbsence(utf8('k035')))],
    ['ROOT_MISMATCH', () => verifyAbsence(otherRoot, utf8('k035'), tree.head().proveAbsence(utf8('k035')))],
    ['QUERY_INVALID', () => verifyRange(root, utf8('a'), undefined, 0, tree.head().proveRange(utf8('a'), undefined, 1))],
    ['QUERY_INVALID', () => verifyRange(root, utf8('a'), undefined, 2 ** 40, tree.head().proveRange(utf8('a'), undefined, 1))],
    ['ROOT_MISMATCH', () => verifyChunkProof(otherRoot, tree.head().proveChunk(1))],
    ['CHUNK_INDEX_MISMATCH', () => verifyChunk(root, 2, tree.head().exportChunk(1))],
    ['CHUNK_INDEX_MISMATCH', () => verifyChunk(root, 2 ** 53 - 1, tree.head().exportChunk(1))],
    ['ROOT_MISMATCH', () => verifyChunk(otherRoot, 1, tree.head().exportChunk(1))],
  ])('%s', (code, f) => expectCoded(thrown(f), 'ProofError', code));
});

describe('RebuildError', () => {
  const { tree, root } = sample();
  const other = sample().tree;
  other.insert(utf8('extra'), utf8('x'));
  const otherRoot = other.commit().root;
  it.each([
    ['REBUILD_INCOMPLETE', () => new Rebuilder(root).finish(1)],
    ['REBUILD_INCOMPLETE', () => {
      const r = new Rebuilder(root);
      r.add(0, tree.head().exportChunk(0));
      return r.finish(1);
    }],
    ['CHUNK_INDEX_MISMATCH', () => new Rebuilder(root).add(3, tree.head().exportChunk(2))],
    ['ROOT_MISMATCH', () => new Rebuilder(otherRoot).add(2, tree.head().exportChunk(2))],
    ['TRUNCATED', () => new Rebuilder(root).add(2, new Uint8Array())],
    ['ROOT_MISMATCH', () => new Rebuilder(otherRoot).addVerified(verifyChunk(root, 0, tree.head().exportChunk(0)))],
  ])('%s', (code, f) => expectCoded(thrown(f), 'RebuildError', code));
});

describe('argument errors', () => {
  const { tree, root } = sample();
  const proof = tree.head().proveExistence(utf8('k03'));
  it.each([
    ['key as a string', () => tree.insert('k' as any, utf8('v'))],
    ['value as an array', () => tree.insert(utf8('k'), [1, 2] as any)],
    ['missing key', () => (tree.get as any)()],
    ['key to check as a string', () => checkKey('k' as any)],
    ['proof as an ArrayBuffer', () => verifyExistence(root, utf8('k03'), utf8('v3'), proof.buffer as any)],
    ['root as a string', () => verifyExistence('00'.repeat(32) as any, utf8('k03'), utf8('v3'), proof)],
    ['end as a string', () => verifyRange(root, utf8('a'), 'z' as any, 10, proof)],
    ['capacity as a string', () => new Tree('4' as any)],
    ['index as a bigint', () => verifyChunk(root, 1n as any, tree.head().exportChunk(1))],
    ['limit as a string', () => tree.head().proveRange(utf8('a'), undefined, '10' as any)],
    ['version missing', () => new Rebuilder(root).finish(undefined as any)],
  ])('TypeError: %s', (_w, f) => expect(thrown(f)).toBeInstanceOf(TypeError));

  it.each([
    ['root of 31 bytes', () => verifyExistence(root.subarray(1), utf8('k03'), utf8('v3'), proof)],
    ['root of 33 bytes', () => new Rebuilder(new Uint8Array(33))],
    ['negative index', () => tree.head().exportChunk(-1)],
    ['fractional index', () => verifyChunk(root, 1.5, tree.head().exportChunk(1))],
    ['negative capacity', () => new Tree(-4)],
    ['index above 2^53 - 1', () => tree.head().proveChunk(2 ** 53)],
    ['infinite version', () => new Rebuilder(root).finish(Infinity)],
  ])('RangeError: %s', (_w, f) => expect(thrown(f)).toBeInstanceOf(RangeError));

  it('accepts Buffers and Uint8Array views at an offset', () => {
    const big = new Uint8Array(proof.length + 20);
    big.set(proof, 10);
    const view = big.subarray(10, 10 + proof.length);
    expect(verifyExistence(Buffer.from(root), Buffer.from('k03'), utf8('v3'), view).position).toBeTypeOf('number');
  });
});

describe('consumed handles', () => {
  it('finish and addVerified take their object over', () => {
    const { tree, root } = sample();
    const r = new Rebuilder(root);
    const chunk = verifyChunk(root, 0, tree.head().exportChunk(0));
    r.addVerified(chunk);
    expect(() => chunk.index).toThrow(Error);
    for (let i = 1; i < tree.chunkCount; i++) r.add(i, tree.head().exportChunk(i));
    r.finish(1).free();
    expect(() => r.received).toThrow(Error);
  });
});
