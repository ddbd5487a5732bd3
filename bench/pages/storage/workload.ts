// The browser's share of `npm run bench:storage -- --browser`: the bulk and
// update shapes of bench/storage.mjs, smaller, and the same record
// values (numbered, so that a misplaced value is caught on reading back).
export const BLOB = 140_000;
export const BLOBS = 400;
export const TXN_BLOBS = 64;
export const SMALL = 600;
export const LIST = 8192;
export const UPDATE_SMALL = 10_000;
export const UPDATE_LISTS = 9_000;

const base = new Uint8Array(BLOB);
for (let i = 0, x = 0x9e3779b9; i < BLOB; i++) base[i] = (x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i) | 0) >>> 24;

export function value(i: number, size: number): Uint8Array {
  const v = base.slice(0, size);
  new DataView(v.buffer).setUint32(0, i);
  return v;
}

export function key(kind: number, i: number): Uint8Array {
  return Uint8Array.of(kind, i >>> 24, (i >>> 16) & 0xff, (i >>> 8) & 0xff, i & 0xff);
}

export function same(a: Uint8Array | undefined, b: Uint8Array): boolean {
  if (!a || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** 0 … n − 1 in a fixed random order. */
export function shuffled(n: number): number[] {
  const order = [...Array(n).keys()];
  for (let i = n - 1, x = 12345; i > 0; i--) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const j = x % (i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

export interface EngineResult {
  bulk_mb_s: number;
  update_commit_s: number;
  blob_reads_per_s: number;
}
