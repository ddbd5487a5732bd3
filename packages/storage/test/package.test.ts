// Packaging rules: the browser entries (the port with memory, and IndexedDB)
// bundle for a browser with no node: module, and the Node entry is the only
// one that loads node:sqlite. Bundled with esbuild for the browser platform,
// where a node: import fails the build.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isStorageError, StorageError, STORAGE_ERROR_CODES } from '../src/errors.ts';

const bundle = (entry: string) =>
  build({ entryPoints: [new URL(entry, import.meta.url).pathname], bundle: true, write: false, platform: 'browser', format: 'esm', logLevel: 'silent' });

describe('package rules', () => {
  it.each(['../src/index.ts', '../src/indexeddb.ts'])('%s bundles for a browser without node: modules', async (entry) => {
    const result = await bundle(entry);
    expect(result.errors).toEqual([]);
    expect(result.outputFiles[0].text).not.toMatch(/["']node:/);
  });

  it('the Node entry does need node: (so the check above can fail)', async () => {
    await expect(bundle('../src/node/index.ts')).rejects.toThrow(/node:/);
  });

  it('every export map entry names a source module that exists', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    for (const [subpath, target] of Object.entries<{ import?: string }>(pkg.exports)) {
      if (!target.import) continue;
      const source = target.import.replace('./dist/', '../src/').replace(/\.js$/, '.ts');
      expect(() => readFileSync(new URL(source, import.meta.url)), subpath).not.toThrow();
    }
  });

  it('StorageError has name and code, and isStorageError works across copies', () => {
    const e = new StorageError('STORE_LOCKED');
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('StorageError');
    expect(e.code).toBe('STORE_LOCKED');
    expect(isStorageError(e)).toBe(true);
    expect(isStorageError(Object.assign(new Error('x'), { name: 'StorageError', code: 'STORE_IO' }))).toBe(true);
    expect(isStorageError(Object.assign(new Error('x'), { name: 'StorageError', code: 'NOPE' }))).toBe(false);
    expect(isStorageError(new RangeError('x'))).toBe(false);
  });

  it('the codes are the ones spec/errors.md lists under Storage', () => {
    const spec = readFileSync(new URL('../../../spec/errors.md', import.meta.url), 'utf8');
    const from = spec.indexOf('## Storage');
    // Up to the next section: the state store's section lists some of the same codes.
    const to = spec.indexOf('\n## ', from + 1);
    const section = spec.slice(from, to === -1 ? undefined : to);
    const codes = [...section.matchAll(/^\| `(STORE_[A-Z_]+)` \|/gm)].map((m) => m[1]);
    expect(codes).toEqual(STORAGE_ERROR_CODES);
  });
});
