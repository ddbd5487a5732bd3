import { describe, expect, it } from 'vitest';
import { cacheKey, MAX_CHAIN, ValueCache } from '../src/value-cache.ts';

/** Every key shares one hash: the cache's map is by hash, and these keys all land in one chain. */
const oneHash = () => 7;
const k = (i: number) => new Uint8Array([i, i, i]);

describe('ValueCache', () => {
  const root = new Uint8Array(32).fill(1);
  const next = new Uint8Array(32).fill(2);
  const [a, b] = [k(1), k(2)];
  const [va, vb] = [new Uint8Array([1, 2, 3]), new Uint8Array([4, 5])];

  it('peeks at a present value without counting a read: absent keys, other roots and misses give undefined', () => {
    const cache = new ValueCache(1 << 20, oneHash);
    cache.set(root, root, a, va);
    cache.set(root, root, b, null);
    expect(cache.peek(root, a)).toEqual(va);
    expect(cache.peek(root, b)).toBeUndefined();
    expect(cache.peek(next, a)).toBeUndefined();
    expect(cache.peek(root, k(3))).toBeUndefined();
    expect([cache.hits, cache.misses]).toEqual([0, 0]);
  });

  it('keeps keys that share a hash apart: each answers its own value, and each goes alone', () => {
    const cache = new ValueCache(1 << 20, oneHash);
    cache.set(root, root, a, va);
    expect(cache.get(root, b)).toBeUndefined();
    cache.set(root, root, b, null);
    expect(cache.get(root, a)).toEqual(va);
    expect(cache.get(root, b)).toBeNull();
    expect(cache.count).toBe(2);
    // Set again: replaced, not added.
    cache.set(root, root, b, vb);
    expect(cache.count).toBe(2);
    expect(cache.get(root, b)).toEqual(vb);
    // A commit that wrote `a` drops its answer only (the chain's tail, then its head).
    const bytes = cache.bytes;
    cache.advance(root, next, [cacheKey(a)]);
    expect(cache.get(next, a)).toBeUndefined();
    expect(cache.get(next, b)).toEqual(vb);
    expect(cache.count).toBe(1);
    expect(cache.bytes).toBeLessThan(bytes);
    cache.set(next, next, a, va);
    cache.advance(next, root, [cacheKey(b)]);
    expect(cache.get(root, b)).toBeUndefined();
    expect(cache.get(root, a)).toEqual(va);
    cache.advance(root, next, [cacheKey(a)]);
    expect([cache.count, cache.bytes]).toEqual([0, 0]);
  });

  it(`holds at most ${MAX_CHAIN} answers a hash, so that a read compares at most that many keys`, () => {
    const cache = new ValueCache(1 << 20, oneHash);
    for (let i = 0; i < 3 * MAX_CHAIN; i++) cache.set(root, root, k(i), va);
    expect(cache.count).toBe(MAX_CHAIN);
    for (let i = 0; i < 3 * MAX_CHAIN; i++) expect(cache.get(root, k(i))).toEqual(i < MAX_CHAIN ? va : undefined);
    // An answer replaced in a full chain stays.
    cache.set(root, root, k(0), vb);
    expect(cache.get(root, k(0))).toEqual(vb);
  });

  it('evicts a chain whole once no answer of it was read since the sweep passed, and counts what it holds', () => {
    const hash = (key: Uint8Array) => (key[0]! < 3 ? 7 : key[0]!); // `a` and `b` share 7; each other key its own
    const one = new ValueCache(1 << 20);
    one.set(root, root, a, va);
    const answer = one.bytes;
    // Room for three answers: the chain of `a` and `b`, and one more key.
    const cache = new ValueCache(3 * answer + 2, hash);
    cache.set(root, root, a, va);
    cache.set(root, root, b, va);
    cache.set(root, root, k(19), va);
    expect(cache.count).toBe(3);
    cache.get(root, b); // the chain was read: it goes to the back once, unflagged, and `k(19)` goes
    cache.set(root, root, k(18), va);
    expect(cache.get(root, k(19))).toBeUndefined();
    expect(cache.count).toBe(3);
    expect(cache.bytes).toBe(3 * answer);
    // The chain went behind `k(18)`, which goes next; then, nothing of it read since, the chain: both answers.
    cache.set(root, root, k(17), va);
    expect(cache.get(root, k(18))).toBeUndefined();
    cache.set(root, root, k(16), va);
    expect(cache.count).toBe(2);
    expect(cache.bytes).toBe(2 * answer);
    expect(cache.get(root, a)).toBeUndefined();
    expect(cache.get(root, b)).toBeUndefined();
    expect(cache.get(root, k(17))).toEqual(va);
    expect(cache.get(root, k(16))).toEqual(va);
  });

  it('answers nothing at another root', () => {
    const cache = new ValueCache(1 << 20);
    cache.set(root, root, a, va);
    expect(cache.get(next, a)).toBeUndefined();
    cache.set(next, undefined, b, vb); // not the head's root: not kept
    expect(cache.get(next, b)).toBeUndefined();
    expect(cache.get(root, a)).toEqual(va);
  });
});
