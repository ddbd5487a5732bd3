/**
 * A tiny independent encoder/hasher for tests and benches, written from
 * spec/hashing.md and spec/chunk-format.md with node:crypto (not the code
 * under test): builds single-chunk-tree envelopes and their roots.
 */

import { createHash } from 'node:crypto';

export const sha = (...parts: Uint8Array[]): Uint8Array => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};

export const u32 = (n: number): Uint8Array => Uint8Array.of(n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255);
export const u64 = (n: number): Uint8Array => {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n));
  return out;
};

export function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

export const entryHash = (k: Uint8Array, v: Uint8Array): Uint8Array =>
  sha(Uint8Array.of(0), u32(k.length), k, u32(v.length), v);

/** mth(d[a..b]) exactly as spec/hashing.md writes it (recursive). */
export function mth(d: Uint8Array[]): Uint8Array {
  if (d.length === 1) return d[0]!;
  let k = 1;
  while (k * 2 < d.length) k *= 2;
  return sha(Uint8Array.of(1), mth(d.slice(0, k)), mth(d.slice(k)));
}

/** The spec's multiproof for leaves [lo, hi): hashes of maximal subtrees outside the range, in walk order. */
export function multiproof(d: Uint8Array[], lo: number, hi: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  const walk = (a: number, b: number): void => {
    if (b <= lo || a >= hi) {
      out.push(mth(d.slice(a, b)));
      return;
    }
    if (b - a === 1) return;
    let k = 1;
    while (k * 2 < b - a) k *= 2;
    walk(a, a + k);
    walk(a + k, b);
  };
  walk(0, d.length);
  return out;
}

export const rootHash = (c: number, chunks: number, entries: number, top: Uint8Array): Uint8Array =>
  sha(Uint8Array.of(4), u32(c), u64(chunks), u64(entries), top);

export const chunkHash = (m: number, chunkRoot: Uint8Array): Uint8Array => sha(Uint8Array.of(2), u32(m), chunkRoot);

/** The envelope of the only chunk of a single-chunk tree, and that tree's root. */
export function singleChunk(capacity: number, entries: [Uint8Array, Uint8Array][]): { root: Uint8Array; envelope: Uint8Array } {
  const bytes: number[] = [0x05, ...varint(capacity), 0, ...varint(entries.length)];
  for (const [k, v] of entries) bytes.push(...varint(k.length), ...k, ...varint(v.length), ...v);
  bytes.push(0); // empty path
  const top = chunkHash(entries.length, mth(entries.map(([k, v]) => entryHash(k, v))));
  return { root: rootHash(capacity, 1, entries.length, top), envelope: Uint8Array.from(bytes) };
}

/** `m` sorted entries with `keyLen`-byte keys and `valueLen`-byte values. */
export function syntheticEntries(m: number, keyLen = 32, valueLen = 512): [Uint8Array, Uint8Array][] {
  const out: [Uint8Array, Uint8Array][] = [];
  for (let i = 0; i < m; i++) {
    const k = new Uint8Array(keyLen);
    k[0] = i >> 8;
    k[1] = i & 255;
    for (let j = 2; j < keyLen; j++) k[j] = (i * 31 + j) & 255;
    const v = new Uint8Array(valueLen);
    for (let j = 0; j < valueLen; j++) v[j] = (i + j * 7) & 255;
    out.push([k, v]);
  }
  return out;
}
