import { describe, expect, it } from 'vitest';
import { HASH_LEN } from '../src/constants.js';
import { chunkRootInPlace, inchunkParent, leftSize, multiproofLen, multiproofRoot } from '../src/inchunk.js';
import { entryHash as refEntryHash, mth, multiproof } from './reference.js';

const leaves = (m: number) => Array.from({ length: m }, (_, i) => refEntryHash(Uint8Array.of(i + 1), Uint8Array.of(0x76)));
const flat = (hs: Uint8Array[]) => {
  const out = new Uint8Array(hs.length * HASH_LEN);
  hs.forEach((h, i) => out.set(h, i * HASH_LEN));
  return out;
};

describe('in-chunk tree (spec/hashing.md)', () => {
  it('leftSize is the largest power of two strictly below n', () => {
    expect([2, 3, 4, 5, 8, 9, 4096].map(leftSize)).toEqual([1, 2, 2, 4, 4, 8, 2048]);
  });

  it('the bottom-up in-place build equals the recursive mth for M = 1 … 70 and a few large M', () => {
    for (const m of [...Array.from({ length: 70 }, (_, i) => i + 1), 127, 128, 129, 255, 256, 257, 1000]) {
      const d = leaves(m);
      const level = flat(d);
      chunkRootInPlace(level, m);
      expect(Buffer.from(level.subarray(0, 32)).toString('hex'), `M = ${m}`).toBe(Buffer.from(mth(d)).toString('hex'));
    }
  });

  it('the multiproof walk reproduces the root for every range of M ≤ 17', () => {
    for (let m = 1; m <= 17; m++) {
      const d = leaves(m);
      const root = mth(d);
      for (let lo = 0; lo < m; lo++) {
        for (let hi = lo + 1; hi <= m; hi++) {
          const proof = multiproof(d, lo, hi);
          expect(multiproofLen(m, lo, hi)).toBe(proof.length);
          expect(multiproofRoot(m, lo, flat(d.slice(lo, hi)), flat(proof))).toEqual(root);
        }
      }
    }
  });

  it('worked example: M = 5, lo = 2, hi = 3 needs H(d0,d1), d3, d4', () => {
    const d = leaves(5);
    expect(multiproofLen(5, 2, 3)).toBe(3);
    expect(multiproof(d, 2, 3)).toEqual([inchunkParent(d[0]!, d[1]!), d[3], d[4]]);
  });
});
