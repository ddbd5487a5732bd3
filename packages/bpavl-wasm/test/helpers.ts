// Shared by the @bpavl/wasm suites: vector loading and byte helpers.
import { readFileSync } from 'node:fs';

export const hex = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'hex'));
export const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.length).toString('hex');
export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

const vectors = new URL('../../../spec/vectors/', import.meta.url);

/** One file of spec/vectors (format: spec/vectors/README.md). */
export function loadVectors<T = any>(name: string): T {
  return JSON.parse(readFileSync(new URL(`${name}.json`, vectors), 'utf8')) as T;
}

/** Calls `f` and returns what it threw (fails the test if nothing). */
export function thrown(f: () => unknown): any {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

/** Deterministic xorshift32, for shuffles and random operations. */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

export function shuffle<T>(items: T[], random: () => number): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
