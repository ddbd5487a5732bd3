// Builds pages with Vite, as an app would be built: no config file, no
// plugins (tests/browser/app, and the benchmark pages under bench/pages). Also the prerequisites: the light client's
// dist/ (its package exports point there) and the WASM build (pkg/).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** Throws unless `npm run build -w @bpavl/wasm` has been run. */
export function checkWasmBuilt() {
  const wasm = new URL('../../packages/bpavl-wasm/pkg/bpavl_wasm_bg.wasm', import.meta.url);
  if (!existsSync(wasm)) {
    throw new Error(`${fileURLToPath(wasm)} is missing: run npm run build -w @bpavl/wasm first (npm test does)`);
  }
}

/** `npm run build -w @bpavl/light-client` (tsc into dist/; a few seconds). Output goes to stderr. */
export function buildLightClient() {
  execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/light-client'], {
    cwd: repoRoot,
    stdio: ['ignore', process.stderr, process.stderr],
  });
}

/**
 * `vite build` of the page in `pageDir` (its index.html) into `outDir`.
 * @param {URL} pageDir  e.g. `new URL('./app/', import.meta.url)`
 * @param {string} outDir
 */
export async function buildPage(pageDir, outDir) {
  await build({
    root: fileURLToPath(pageDir),
    configFile: false,
    envFile: false,
    logLevel: 'warn',
    build: {
      outDir,
      emptyOutDir: true,
      reportCompressedSize: false,
      // The vector JSON (~0.9 MB) is bundled into the page on purpose.
      chunkSizeWarningLimit: 4096,
    },
  });
}
