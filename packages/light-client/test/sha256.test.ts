// src/sha256.ts is noble's SHA-256 with its own block function: it must give
// noble's digests for every length (each padding case), for input fed in
// pieces, and after cloning, as the hashes of the spec require.
import { sha256 as noble } from '@noble/hashes/sha2.js';
import { describe, expect, it } from 'vitest';
import { Sha256 } from '../src/sha256.js';

const bytes = (len: number, seed: number) => Uint8Array.from({ length: len }, (_, i) => (i * 131 + seed * 17 + len) & 0xff);

describe('Sha256 (noble with an int32 block function)', () => {
  it('equals noble for every length 0 … 1,100', () => {
    for (let len = 0; len <= 1100; len++) {
      const m = bytes(len, 1);
      expect(new Sha256().update(m).digest()).toEqual(noble(m));
    }
  });

  it('equals noble for input fed in random pieces, and for NIST "abc"', () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) % n);
    for (let t = 0; t < 200; t++) {
      const m = bytes(rand(5000), t);
      const h = new Sha256();
      for (let at = 0; at < m.length; ) {
        const n = Math.min(m.length - at, rand(200));
        h.update(m.subarray(at, at + n));
        at += n;
      }
      expect(h.digest()).toEqual(noble(m));
    }
    const abc = new Sha256().update(Uint8Array.of(0x61, 0x62, 0x63)).digest();
    expect(Buffer.from(abc).toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('a clone of a fresh instance hashes like a new one (how hash.ts resets)', () => {
    const pristine = new Sha256();
    const work = new Sha256().update(bytes(100, 3));
    const m = bytes(777, 4);
    expect(pristine._cloneInto(work).update(m).digest()).toEqual(noble(m));
  });
});
