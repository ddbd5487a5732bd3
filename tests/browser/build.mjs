// Builds the pages under tests/browser with Vite, as an app would be built:
// no config file, no plugins. Also the prerequisites: the light client's
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
 * `vite build` of the page in `tests/browser/<page>/` into `outDir`.
 * @param {string} page  `app` (the vector suite) or `bench`
 * @param {string} outDir
 */
export async function buildPage(page, outDir) {
  await build({
    root: fileURLToPath(new URL(`./${page}/`, import.meta.url)),
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
