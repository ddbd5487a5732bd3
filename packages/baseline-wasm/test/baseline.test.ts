// @bpavl/baseline-wasm against crates/baseline's contract: build, export,
// import in order, the root compared only at the end; coded errors. Skipped
// until `npm run build -w @bpavl/baseline-wasm` has produced pkg/.

import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { workloadEntry } from '../../peer/src/workload.ts';

const built = existsSync(fileURLToPath(new URL('../pkg/bpavl_baseline_wasm_bg.wasm', import.meta.url)));

const sha = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};

type Module = typeof import('../index.js');
let BaselineTree: Module['BaselineTree'];
let Importer: Module['Importer'];
let defaultChunkBytes: Module['defaultChunkBytes'];

describe.skipIf(!built)('@bpavl/baseline-wasm', () => {
  beforeAll(async () => {
    // Loaded here, not at the top: without pkg/ the suite is skipped, not failed.
    const mod = await import('../index.js');
    await mod.init();
    ({ BaselineTree, Importer, defaultChunkBytes } = mod);
  });

  it('round-trips a tree through chunks; only the final root tells a corruption', () => {
    const tree = new BaselineTree();
    for (let i = 0; i < 3000; i++) {
      const [k, v] = workloadEntry(0n, i);
      expect(tree.insert(k, v)).toBe(true);
    }
    const [k0, v0] = workloadEntry(0n, 0);
    expect(tree.insert(k0, v0)).toBe(false); // replaced
    expect(tree.len).toBe(3000);
    expect(tree.get(k0)).toEqual(v0);
    const root = tree.commit();
    expect(root.length).toBe(32);
    expect(defaultChunkBytes()).toBe(102400);
    const chunks = tree.exportChunks(20_000);
    expect(chunks.length).toBeGreaterThan(50);
    expect(chunks.every((c) => c.length <= 20_000)).toBe(true);

    const honest = new Importer();
    for (const c of chunks) honest.addChunk(c);
    expect(honest.chunks).toBe(chunks.length);
    expect(honest.finish()).toEqual(root);

    // A flipped value bit in the middle of the stream imports fine: only the root differs.
    const bad = chunks.map((c) => c.slice());
    bad[7]![bad[7]!.length >> 1]! ^= 0x01;
    const importer = new Importer();
    let failed: unknown;
    try {
      for (const c of bad) importer.addChunk(c);
      expect(importer.finish()).not.toEqual(root);
    } catch (e) {
      failed = e; // the bit may also land in a length or a key: a structural code
    }
    if (failed !== undefined) expect(failed).toMatchObject({ name: 'BaselineError' });
    tree.free();
  });

  it('errors carry name BaselineError and the crate code', () => {
    expect(() => new BaselineTree().insert(new Uint8Array(0), new Uint8Array(1))).toThrow(expect.objectContaining({ name: 'BaselineError', code: 'KEY_EMPTY' }));
    expect(new Importer().finish()).toEqual(sha(new Uint8Array(0))); // nothing imported: the empty tree, H("")
    const two = new Importer();
    two.addChunk(Uint8Array.of(0, 1, 1, 0, 0, 1, 2, 0)); // two leaves and no parent
    expect(() => two.finish()).toThrow(expect.objectContaining({ code: 'REBUILD_INCOMPLETE' }));
    const importer = new Importer();
    expect(() => importer.addChunk(new Uint8Array(0))).toThrow(expect.objectContaining({ code: 'TRUNCATED' }));
    expect(() => importer.addChunk(Uint8Array.of(0, 1, 1, 0))).toThrow(expect.objectContaining({ code: 'TRUNCATED' })); // sticky
    expect(() => new BaselineTree().exportChunks(0)).toThrow(RangeError);
    expect(new BaselineTree().exportChunks(100)).toEqual([]);
  });
});
