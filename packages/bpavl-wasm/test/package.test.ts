// The packed npm artifact, as users get it: `npm pack`, then a fresh Node
// ESM project and a fresh Vite project (no plugins) that import `@bpavl/wasm` and run a tree round trip.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'vite';
import { afterAll, describe, expect, it } from 'vitest';

const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'bpavl-wasm-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// What an app does with the package; prints/returns "ok <root hex>".
const APP = `
import { init, Tree, Rebuilder, verifyChunk, verifyExistence } from '@bpavl/wasm';
export async function run() {
  await init();
  const enc = new TextEncoder();
  const tree = new Tree(4);
  for (let i = 0; i < 200; i++) tree.insert(enc.encode('key' + i), enc.encode('value' + i));
  const { root } = tree.commit();
  const head = tree.head();
  verifyExistence(root, enc.encode('key7'), enc.encode('value7'), head.proveExistence(enc.encode('key7')));
  const rebuilder = new Rebuilder(root);
  for (let i = tree.chunkCount - 1; i >= 0; i--) rebuilder.addVerified(verifyChunk(root, i, head.exportChunk(i)));
  const copy = rebuilder.finish(1);
  return 'ok ' + Array.from(copy.head().root, (b) => b.toString(16).padStart(2, '0')).join('');
}
`;

/** `npm pack`s the package and unpacks it as `<app>/node_modules/@bpavl/wasm`. */
function packInto(app: string): string[] {
  const [info] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: pkgDir, encoding: 'utf8' }));
  const dest = join(app, 'node_modules', '@bpavl', 'wasm');
  mkdirSync(dest, { recursive: true });
  execFileSync('tar', ['xzf', join(work, info.filename), '-C', dest, '--strip-components=1']);
  return info.files.map((f: { path: string }) => f.path).sort();
}

describe('npm pack', () => {
  let files: string[] = [];
  const nodeApp = join(work, 'node-app');

  it('ships only the entry, its types, the wasm-pack output, the README and the license texts', () => {
    files = packInto(nodeApp);
    expect(files.filter((f) => !f.startsWith('pkg/snippets/'))).toEqual([
      'LICENSE-APACHE',
      'LICENSE-MIT',
      'README.md',
      'index.d.ts',
      'index.js',
      'package.json',
      'pkg/bpavl_wasm.d.ts',
      'pkg/bpavl_wasm.js',
      'pkg/bpavl_wasm_bg.wasm',
    ]);
    expect(files.filter((f) => f.startsWith('pkg/snippets/')).map((f) => f.split('/').pop())).toEqual(['convert.js']);
  });

  it('works in a fresh Node ESM project', () => {
    writeFileSync(join(nodeApp, 'package.json'), JSON.stringify({ name: 'node-app', private: true, type: 'module' }));
    writeFileSync(join(nodeApp, 'app.mjs'), `${APP}\nconsole.log(await run());\n`);
    const out = execFileSync(process.execPath, ['app.mjs'], { cwd: nodeApp, encoding: 'utf8' });
    expect(out).toMatch(/^ok [0-9a-f]{64}\n$/);
  });

  it('builds with Vite, no plugins, into a bundle that emits and loads the .wasm asset', async () => {
    const viteApp = join(work, 'vite-app');
    packInto(viteApp);
    writeFileSync(join(viteApp, 'package.json'), JSON.stringify({ name: 'vite-app', private: true, type: 'module' }));
    writeFileSync(join(viteApp, 'index.html'), '<!doctype html><script type="module" src="./main.js"></script>\n');
    writeFileSync(join(viteApp, 'main.js'), `${APP}\nglobalThis.bpavlResult = run();\n`);
    const warnings: string[] = [];
    await build({
      root: viteApp,
      configFile: false,
      // For running the bundle from disk in Node below: relative asset URLs,
      // and no modulepreload polyfill (it needs a DOM).
      base: './',
      build: { modulePreload: { polyfill: false } },
      logLevel: 'warn',
      customLogger: {
        info() {},
        warn: (m: string) => warnings.push(m),
        warnOnce: (m: string) => warnings.push(m),
        error: (m: string) => warnings.push(m),
        clearScreen() {},
        hasErrorLogged: () => false,
        hasWarned: false,
      },
    });
    expect(warnings).toEqual([]);
    const assets = join(viteApp, 'dist', 'assets');
    const wasm = readdirSync(assets).filter((f) => f.endsWith('.wasm'));
    expect(wasm).toHaveLength(1);
    expect(readFileSync(join(assets, wasm[0]!)).equals(readFileSync(join(pkgDir, 'pkg', 'bpavl_wasm_bg.wasm')))).toBe(true);
    const [js] = readdirSync(assets).filter((f) => f.endsWith('.js'));
    expect(readFileSync(join(assets, js!), 'utf8')).toContain(wasm[0]);
    // The bundle runs: from disk here (file: URL, so init reads the asset with node:fs).
    await import(pathToFileURL(join(assets, js!)).href);
    expect(await (globalThis as any).bpavlResult).toMatch(/^ok [0-9a-f]{64}$/);
  }, 60_000); // npm pack, then a Vite build: seconds, more on a loaded machine
});
