#!/usr/bin/env node
// Size budget of `@bpavl/light-client/verify`: bundles the entry with its
// @noble/hashes dependency (esbuild, minified, ESM, browser platform), gzips
// the bundle (level 9) and fails above 12 KiB.
//
//   node packages/light-client/scripts/size.mjs [--json]
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const LIMIT = 12 * 1024;
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const entry = 'src/verify.ts';

const result = await build({
  absWorkingDir: pkgDir,
  entryPoints: [entry],
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  write: false,
  metafile: true,
  logLevel: 'error',
});
const code = result.outputFiles[0].contents;
const gz = gzipSync(code, { level: 9 }).length;
const inputs = Object.keys(result.metafile.inputs);
// Input paths are relative to the package: only its src and @noble/hashes may appear.
const foreign = inputs.filter((p) => !/^src\/|(^|\/)node_modules\/@noble\/hashes\//.test(p));

if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ entry: '@bpavl/light-client/verify', minified: code.length, gzip: gz, limit: LIMIT }));
} else {
  console.log(`@bpavl/light-client/verify: ${code.length} bytes minified, ${gz} bytes gzipped (limit ${LIMIT})`);
  console.log(`inputs: ${inputs.length} modules (${inputs.filter((p) => p.includes('@noble')).length} from @noble/hashes)`);
}
if (foreign.length > 0) {
  console.error(`unexpected modules in the verify bundle: ${foreign.join(', ')}`);
  process.exit(1);
}
if (gz > LIMIT) {
  console.error(`size budget exceeded: ${gz} > ${LIMIT} bytes gzipped`);
  process.exit(1);
}
