// The two packages as users get them, together: `npm pack` of @bpavl/wasm
// (after its build) and of @bpavl/light-client (after its tsc build), both
// tarballs installed into a fresh Node ESM project outside the repository,
// then (a) a Node script that verifies golden vectors from spec/vectors with
// `@bpavl/light-client/verify` and with `@bpavl/wasm` (and the TS verifier's
// WASM fast path), (b) a TypeScript consumer type-checked against the packed
// .d.ts files, and (c) a plugin-free `vite build` of the same app, whose
// bundle emits the .wasm asset and runs.
//
// packages/bpavl-wasm/test/package.test.ts covers @bpavl/wasm alone (its file
// list, a tree round trip, Vite); this is the combined user story.

import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('..', import.meta.url));
const wasmDir = join(repo, 'packages', 'bpavl-wasm');
const lcDir = join(repo, 'packages', 'light-client');
const work = mkdtempSync(join(tmpdir(), 'bpavl-packaging-'));
const app = join(work, 'app');
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The environment for child npm/node processes: without the npm_* variables of an enclosing `npm test`. */
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));

/** Runs a command; throws with its output unless it exits 0. Returns stdout (and stderr). */
function runBoth(cmd: string, args: string[], cwd: string): { stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) failed: ${r.error ?? `exit ${r.status}`}\n${r.stdout}\n${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

const run = (cmd: string, args: string[], cwd: string): string => runBoth(cmd, args, cwd).stdout;

function pack(dir: string): { filename: string; files: string[] } {
  const [info] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], dir));
  return { filename: info.filename, files: info.files.map((f: { path: string }) => f.path).sort() };
}

// ---------------------------------------------------------------- the app

const vectors = (name: string) => JSON.parse(readFileSync(join(repo, 'spec', 'vectors', `${name}.json`), 'utf8'));
const existence = vectors('existence');
const envelopes = vectors('chunk_envelope');
/** One valid existence vector of a multi-chunk tree, one invalid with ROOT_MISMATCH, one with a decoding code; one envelope. */
const V = {
  existenceValid: existence.valid.find((c: { chunk_count: number }) => c.chunk_count > 2) ?? existence.valid[0],
  existenceRootMismatch: existence.invalid.find((c: { code: string }) => c.code === 'ROOT_MISMATCH'),
  existenceDecoding: existence.invalid.find((c: { code: string }) => !['TRUNCATED', 'ROOT_MISMATCH'].includes(c.code)),
  envelopeValid: envelopes.valid.find((c: { index: number; chunk_count: number }) => c.index > 0 && c.chunk_count > 2),
  envelopeInvalid: envelopes.invalid.find((c: { code: string }) => c.code === 'CHUNK_INDEX_MISMATCH'),
};

/** What the app does with both packages; `run()` resolves to a JSON report. Plain JS: Node and Vite read it as is. */
const CHECK = `
import * as lc from '@bpavl/light-client/verify';
import * as wasm from '@bpavl/wasm';
import { V } from './vectors.js';

const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const failure = (fn) => {
  try {
    fn();
    return 'ok';
  } catch (e) {
    return { name: e.name, code: e.code, tsClass: e instanceof lc.ProofError };
  }
};
const position = (r) => ({ chunkIndex: r.chunkIndex, position: r.position, chunkCount: r.chunkCount, entryCount: r.entryCount });
const chunk = (r) => ({ index: r.index, chunkCount: r.chunkCount, entryCount: r.entryCount, capacity: r.capacity, keyHeight: r.keyHeight, entries: r.entries.map(([k, v]) => [toHex(k), toHex(v)]) });

export async function run() {
  await wasm.init();
  const ex = (impl, c) => impl.verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof));
  const e = V.envelopeValid;
  const bad = V.envelopeInvalid;
  return JSON.stringify({
    existence: { ts: position(ex(lc, V.existenceValid)), wasm: position(ex(wasm, V.existenceValid)) },
    rootMismatch: { ts: failure(() => ex(lc, V.existenceRootMismatch)), wasm: failure(() => ex(wasm, V.existenceRootMismatch)) },
    decoding: { ts: failure(() => ex(lc, V.existenceDecoding)), wasm: failure(() => ex(wasm, V.existenceDecoding)) },
    chunk: {
      pure: chunk(lc.verifyChunk(hex(e.root), e.index, hex(e.envelope))),
      fast: chunk(lc.verifyChunk(hex(e.root), e.index, hex(e.envelope), { wasm })),
    },
    chunkInvalid: {
      pure: failure(() => lc.verifyChunk(hex(bad.root), bad.index, hex(bad.envelope))),
      fast: failure(() => lc.verifyChunk(hex(bad.root), bad.index, hex(bad.envelope), { wasm })),
    },
  });
}
`;

/** A TypeScript consumer: must type-check against the packed declarations (and fail where it should). */
const TYPES = `
import { verifyExistence, verifyChunk, ProofError, type VerifiedChunk } from '@bpavl/light-client/verify';
import * as wasm from '@bpavl/wasm';
import { init, Tree, Rebuilder, type BpavlError } from '@bpavl/wasm';

export async function check(root: Uint8Array, key: Uint8Array, value: Uint8Array, proof: Uint8Array, envelope: Uint8Array): Promise<number> {
  await init();
  const a: { chunkIndex: number; position: number } = verifyExistence(root, key, value, proof);
  const b: { chunkIndex: number; position: number } = wasm.verifyExistence(root, key, value, proof);
  const c: VerifiedChunk = verifyChunk(root, 0, envelope, { wasm });
  const tree = new Tree(16);
  tree.insert(key, value);
  const rebuilder = new Rebuilder(tree.commit().root);
  rebuilder.add(0, tree.head().exportChunk(0));
  const copy: Tree = rebuilder.finish(1);
  try {
    verifyExistence(root, key, value, proof);
  } catch (err) {
    if (err instanceof ProofError) {
      const code: 'ROOT_MISMATCH' | string = err.code;
      void code;
    }
    const e = err as BpavlError;
    void e.code;
  }
  // @ts-expect-error: bytes, not a string
  verifyExistence(root, 'key', value, proof);
  // @ts-expect-error: bytes, not a string
  wasm.verifyExistence(root, key, value, 'proof');
  // @ts-expect-error: the index is a number
  verifyChunk(root, '0', envelope);
  return a.chunkIndex + b.position + c.entries.length + copy.len;
}
`;

// ---------------------------------------------------------------- the tests

describe('@bpavl/wasm + @bpavl/light-client, packed and installed like a user would', () => {
  let wasmPack: { filename: string; files: string[] };
  let lcPack: { filename: string; files: string[] };

  beforeAll(() => {
    // @bpavl/wasm's build (wasm-pack) is part of `npm test` before vitest; build it here only if it is missing.
    if (!existsSync(join(wasmDir, 'pkg', 'bpavl_wasm_bg.wasm'))) run('npm', ['run', 'build', '-w', '@bpavl/wasm'], repo);
    // @bpavl/light-client publishes dist/, built by tsc (package.json "build"); nothing else builds it.
    run('npm', ['run', 'build', '-w', '@bpavl/light-client'], repo);
    wasmPack = pack(wasmDir);
    lcPack = pack(lcDir);
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({
        name: 'bpavl-user-app',
        private: true,
        type: 'module',
        dependencies: {
          '@bpavl/wasm': `file:../${wasmPack.filename}`,
          '@bpavl/light-client': `file:../${lcPack.filename}`,
        },
      }),
    );
    // Both tarballs in one install; the registry dependencies (@noble/hashes, ...) come from the npm cache when they are there.
    run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', '--loglevel=error'], app);
    writeFileSync(join(app, 'vectors.js'), `export const V = ${JSON.stringify(V)};\n`);
    writeFileSync(join(app, 'check.js'), CHECK);
  }, 180_000);

  it('the light-client tarball ships its built entries and no tests', () => {
    for (const f of ['package.json', 'README.md', 'LICENSE-MIT', 'LICENSE-APACHE', 'dist/verify.js', 'dist/verify.d.ts', 'dist/index.js', 'dist/index.d.ts'])
      expect(lcPack.files).toContain(f);
    expect(lcPack.files.filter((f) => f.startsWith('test/') || f.includes('.test.'))).toEqual([]);
    expect(wasmPack.files).toContain('pkg/bpavl_wasm_bg.wasm');
  });

  it('installs as real copies from the tarballs, with the verifier dependency', () => {
    for (const name of ['@bpavl/wasm', '@bpavl/light-client']) {
      const dir = join(app, 'node_modules', ...name.split('/'));
      expect(lstatSync(dir).isSymbolicLink(), `${name} must not link into the repository`).toBe(false);
      expect(realpathSync(dir).startsWith(realpathSync(work))).toBe(true);
    }
    expect(existsSync(join(app, 'node_modules', '@noble', 'hashes', 'package.json'))).toBe(true);
    expect(existsSync(join(app, 'node_modules', '@bpavl', 'wasm', 'pkg', 'bpavl_wasm_bg.wasm'))).toBe(true);
  });

  const expected = () => {
    const position = { chunkIndex: V.existenceValid.chunk_index, position: V.existenceValid.position, chunkCount: V.existenceValid.chunk_count, entryCount: V.existenceValid.entry_count };
    const chunk = {
      index: V.envelopeValid.index,
      chunkCount: V.envelopeValid.chunk_count,
      entryCount: V.envelopeValid.entry_count,
      capacity: V.envelopeValid.capacity,
      keyHeight: V.envelopeValid.key_height,
      entries: V.envelopeValid.chunk_entries,
    };
    return {
      existence: { ts: position, wasm: position },
      rootMismatch: {
        ts: { name: 'ProofError', code: 'ROOT_MISMATCH', tsClass: true },
        wasm: { name: 'ProofError', code: 'ROOT_MISMATCH', tsClass: false },
      },
      decoding: {
        ts: { name: 'ProofError', code: V.existenceDecoding.code, tsClass: true },
        wasm: { name: 'ProofError', code: V.existenceDecoding.code, tsClass: false },
      },
      chunk: { pure: chunk, fast: chunk },
      chunkInvalid: {
        pure: { name: 'ProofError', code: 'CHUNK_INDEX_MISMATCH', tsClass: true },
        fast: { name: 'ProofError', code: 'CHUNK_INDEX_MISMATCH', tsClass: true },
      },
    };
  };

  it('(a) a Node ESM script verifies the golden vectors with both packages', () => {
    writeFileSync(
      join(app, 'node-app.mjs'),
      `import { run } from './check.js';\n` +
        `const resolved = [import.meta.resolve('@bpavl/light-client/verify'), import.meta.resolve('@bpavl/wasm')];\n` +
        `console.log(JSON.stringify({ resolved, report: JSON.parse(await run()) }));\n`,
    );
    const out = JSON.parse(run(process.execPath, ['node-app.mjs'], app));
    // The packages resolve to the installed copies, not to the repository.
    for (const url of out.resolved) expect(fileURLToPath(url).startsWith(join(app, 'node_modules'))).toBe(true);
    expect(out.report).toEqual(expected());
  });

  it('(b) a TypeScript consumer type-checks against the packed declarations', () => {
    writeFileSync(join(app, 'consumer.ts'), TYPES);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2022', 'DOM'],
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        files: ['consumer.ts'],
      }),
    );
    run(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], app);
  });

  it('(c) `vite build` with no plugins bundles both, emits the .wasm asset, and the bundle runs', () => {
    writeFileSync(join(app, 'index.html'), '<!doctype html><script type="module" src="./main.js"></script>\n');
    writeFileSync(join(app, 'main.js'), `import { run } from './check.js';\nglobalThis.bpavlReport = run();\n`);
    // No plugins. Relative asset URLs and no modulepreload polyfill (it needs a DOM) only so that Node can run the bundle from disk below.
    writeFileSync(
      join(app, 'vite.config.mjs'),
      `export default { base: './', logLevel: 'warn', build: { modulePreload: { polyfill: false } } };\n`,
    );
    const log = runBoth(process.execPath, [join(repo, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--config', 'vite.config.mjs'], app);
    expect(`${log.stdout}${log.stderr}`.trim(), 'vite build printed warnings').toBe('');
    const assets = join(app, 'dist', 'assets');
    const files = readdirSync(assets);
    const wasmFiles = files.filter((f) => f.endsWith('.wasm'));
    expect(wasmFiles).toHaveLength(1);
    expect(readFileSync(join(assets, wasmFiles[0]!)).equals(readFileSync(join(wasmDir, 'pkg', 'bpavl_wasm_bg.wasm')))).toBe(true);
    const js = files.filter((f) => f.endsWith('.js'));
    expect(js).toHaveLength(1);
    const bundle = readFileSync(join(assets, js[0]!), 'utf8');
    expect(bundle).toContain(wasmFiles[0]);
    // The bundle runs (in Node, from disk: init() reads the emitted asset with node:fs).
    const out = run(
      process.execPath,
      ['--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(join(assets, js[0]!)).href)}); console.log(await globalThis.bpavlReport);`],
      app,
    );
    expect(JSON.parse(out)).toEqual(expected());
  });

  it('(d) an app that imports only `@bpavl/light-client/verify` bundles no WASM and no network code', () => {
    const dir = join(app, 'verify-only');
    mkdirSync(dir);
    writeFileSync(join(dir, 'index.html'), '<!doctype html><script type="module" src="./main.js"></script>\n');
    writeFileSync(
      join(dir, 'main.js'),
      `import { verifyExistence } from '@bpavl/light-client/verify';\n` +
        `import { V } from '../vectors.js';\n` +
        `const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));\n` +
        `const c = V.existenceValid;\n` +
        `globalThis.bpavlReport = JSON.stringify(verifyExistence(hex(c.root), hex(c.key), hex(c.value), hex(c.proof)));\n`,
    );
    writeFileSync(
      join(app, 'vite.verify.mjs'),
      `export default { root: 'verify-only', base: './', logLevel: 'warn', build: { outDir: '../dist-verify', emptyOutDir: true, modulePreload: { polyfill: false } } };\n`,
    );
    const log = runBoth(process.execPath, [join(repo, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--config', 'vite.verify.mjs'], app);
    expect(`${log.stdout}${log.stderr}`.trim(), 'vite build printed warnings').toBe('');
    const assets = join(app, 'dist-verify', 'assets');
    const files = readdirSync(assets);
    expect(files.filter((f) => !f.endsWith('.js'))).toEqual([]);
    expect(files).toHaveLength(1);
    const bundle = readFileSync(join(assets, files[0]!), 'utf8');
    expect(bundle).not.toMatch(/\.wasm|WebAssembly|libp2p|WebSocket/);
    const out = run(
      process.execPath,
      ['--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(join(assets, files[0]!)).href)}); console.log(globalThis.bpavlReport);`],
      app,
    );
    const e = V.existenceValid;
    expect(JSON.parse(out)).toEqual({ chunkIndex: e.chunk_index, position: e.position, chunkCount: e.chunk_count, entryCount: e.entry_count });
  });
});
