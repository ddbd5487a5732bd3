/**
 * The commits of the store's SIGKILL test: version `v` applies `changes(v)`,
 * a function of `v` alone, so the parent replays the model of any version
 * the child reached.
 */

/** Keys from a bounded domain, so that puts update and deletes hit. */
const DOMAIN = 3000;
const CHANGES = 40;
/**
 * Every fifth version puts 1,500 values of 1,000 bytes: more than a piece
 * (1 MiB) beyond the child's cache of nothing, so that its commit writes
 * chunks ahead of its version record, and kills land there too.
 */
const LARGE_EVERY = 5;
const LARGE_CHANGES = 1500;
const LARGE_VALUE = 1000;

export const key = (k: number) => new Uint8Array([k >> 8, k & 0xff, 0x6b]);

/** Put (a value) or delete (`undefined`) of each key version `v` changes. */
export function changes(v: number): Array<readonly [Uint8Array, Uint8Array | undefined]> {
  let x = v * 0x9e3779b1 || 1;
  const next = (n: number) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
  if (v % LARGE_EVERY === 0) return Array.from({ length: LARGE_CHANGES }, () => [key(next(DOMAIN)), new Uint8Array(LARGE_VALUE).fill(v & 0xff)] as const);
  return Array.from({ length: CHANGES }, () => {
    const k = next(DOMAIN);
    return [key(k), next(4) === 0 ? undefined : new Uint8Array(1 + ((k + v) % 48)).fill(v & 0xff)] as const;
  });
}

/** The bulk load of the SIGKILL test: 12,000 entries of 600 bytes (about 7 MB, seven writes of 1 MiB), in key order. */
export function* bulkEntries(): Generator<[Uint8Array, Uint8Array]> {
  for (let i = 0; i < 12_000; i++) yield [new Uint8Array([i >> 8, i & 0xff, 0x62]), new Uint8Array(600).fill(i & 0xff)];
}
