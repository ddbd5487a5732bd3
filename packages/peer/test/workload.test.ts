// The standard workload in TypeScript (src/workload.ts) is the one of
// crates/bench/src/workload.rs: the same check values, and the same SHA-256
// over the first 10,000 entries as the Rust test pins (which also pins 100,000).

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { headWrites, workloadEntry } from '../src/workload.ts';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** SHA-256 over `key_0 ‖ value_0 ‖ key_1 ‖ value_1 ‖ …` (the Rust `Workload::sha256`). */
function workloadSha256(seed: bigint, entries: number): string {
  const h = createHash('sha256');
  for (let i = 0; i < entries; i++) {
    const [k, v] = workloadEntry(seed, i);
    h.update(k).update(v);
  }
  return h.digest('hex');
}

describe('workload', () => {
  it('seed 0 is the standard workload (the check values of crates/bench/src/workload.rs)', () => {
    const [k0, v0] = workloadEntry(0n, 0);
    expect(hex(k0)).toMatch(/^af5570f5.*e83dfc$/);
    expect(v0.length).toBe(512);
    expect(createHash('sha256').update(v0).digest('hex')).toMatch(/^94c8c3c3.*364fdda6$/);
    expect(workloadSha256(0n, 10_000)).toBe('d6b575d7b8eba603e94780e8242d3285d44e68cb4a4838368cad86b13077df6b');
  });

  it('another seed changes the keys; values follow the same rule', () => {
    const [k, v] = workloadEntry(5n, 3);
    const seed = Buffer.alloc(8);
    seed.writeBigUInt64BE(5n);
    const idx = Buffer.alloc(8);
    idx.writeBigUInt64BE(3n);
    expect(hex(k)).toBe(createHash('sha256').update(seed).update(idx).digest('hex'));
    expect(hex(v.subarray(0, 8))).toBe(hex(idx));
    expect(hex(v.subarray(8, 40))).toBe(createHash('sha256').update(k).update(Uint8Array.of(0)).digest('hex'));
  });
});

describe('headWrites', () => {
  it('is one seeded stream: the same batch twice, another for another step or seed; puts carry their step', () => {
    const a = headWrites(0n, 1000, 3, 200);
    expect(headWrites(0n, 1000, 3, 200)).toEqual(a);
    expect(headWrites(0n, 1000, 4, 200)).not.toEqual(a);
    expect(headWrites(1n, 1000, 3, 200)).not.toEqual(a);
    const deletes = a.filter((w) => w.value === undefined).length;
    // 1 in 10 deletes, at the stream's odds: far from none and from all.
    expect(deletes).toBeGreaterThan(5);
    expect(deletes).toBeLessThan(40);
    for (const w of a) if (w.value) expect(Buffer.from(w.value.subarray(0, 8)).readBigUInt64BE()).toBe(3n);
    expect(() => headWrites(0n, 1000, 0, 1)).toThrow(RangeError);
  });

  it('keeps a head that moves for ever bounded: the keys it adds are at most a tenth of the workload', () => {
    const workload = new Set(Array.from({ length: 1000 }, (_, i) => Buffer.from(workloadEntry(0n, i)[0]).toString('hex')));
    const added = new Set<string>();
    let puts = 0;
    for (let step = 1; step <= 300; step++) {
      for (const w of headWrites(0n, 1000, step, 100)) {
        const k = Buffer.from(w.key).toString('hex');
        if (w.value !== undefined && !workload.has(k)) {
          puts++;
          added.add(k);
        }
      }
    }
    // About 3,000 puts of keys outside the workload, all among its 100 extra keys.
    expect(puts).toBeGreaterThan(2000);
    expect(added.size).toBeLessThanOrEqual(100);
    expect(added.size).toBeGreaterThan(90);
  });
});
