// The shared adapter suite (adapter-suite.ts) on the memory backend and the
// Node backend (with and without a memory map), each case on a fresh place:
// a new MemoryDatabase, a new directory under the system temp dir (deleted
// afterwards).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { MemoryDatabase, openMemoryBackend } from '../src/memory.ts';
import { openNodeBackend } from '../src/node/index.ts';
import { adapterCases, type Place } from './adapter-suite.ts';

const backends: Record<string, () => { place: Place; cleanup(): void }> = {
  memory: () => {
    const database = new MemoryDatabase();
    return { place: { open: async (options) => openMemoryBackend({ ...options, database }) }, cleanup() {} };
  },
  node: () => {
    const path = mkdtempSync(join(tmpdir(), 'backends-suite-'));
    return { place: { open: (options) => openNodeBackend({ ...options, path }) }, cleanup: () => rmSync(path, { recursive: true, force: true }) };
  },
  // Reads through SQLite's memory map instead of copies (`mmapBytes`).
  'node, mapped': () => {
    const path = mkdtempSync(join(tmpdir(), 'backends-suite-'));
    return { place: { open: (options) => openNodeBackend({ ...options, path, mmapBytes: 1 << 26 }) }, cleanup: () => rmSync(path, { recursive: true, force: true }) };
  },
};

for (const [name, fresh] of Object.entries(backends)) {
  describe(`${name} backend`, () => {
    for (const c of adapterCases) {
      it(c.name, async () => {
        const { place, cleanup } = fresh();
        try {
          await c.run(place);
        } finally {
          cleanup();
        }
      });
    }
  });
}
