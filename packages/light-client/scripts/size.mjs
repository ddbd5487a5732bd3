#!/usr/bin/env node
// Size budgets of the light client's browser entries: each is bundled with
// its dependencies (esbuild, minified, ESM, browser platform, code splitting
// as an app bundler does it); the entry's chunk and the chunks it imports
// statically are gzipped (level 9) and summed.
//
// | entry | budget | what must stay out |
// |-------|--------|--------------------|
// | `/verify` | 12 KiB | anything but its src and @noble/hashes |
// | `/client` over WebSocket | 20 KB | libp2p (a lazily loaded chunk) and WASM (passed in by the app) |
//
//   node packages/light-client/scripts/size.mjs [--json]
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const ENTRIES = [
  { name: '@bpavl/light-client/verify', entry: 'src/verify.ts', limit: 12 * 1024 },
  { name: '@bpavl/light-client/client', entry: 'src/client/index.ts', limit: 20_000 },
];
// Input paths are relative to the package: only its src and @noble/hashes may be in an entry's first chunk.
const allowed = (p) => /^src\/|(^|\/)node_modules\/@noble\/hashes\//.test(p);

let failed = false;
const report = [];
for (const { name, entry, limit } of ENTRIES) {
  const result = await build({
    absWorkingDir: pkgDir,
    entryPoints: [entry],
    bundle: true,
    splitting: true,
    outdir: 'out',
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'error',
  });
  // The entry's chunk and the chunks it imports statically: what loads before the entry runs.
  const outputs = result.metafile.outputs;
  const loaded = new Set();
  const visit = (path) => {
    if (loaded.has(path)) return;
    loaded.add(path);
    for (const i of outputs[path].imports) if (i.kind === 'import-statement') visit(i.path);
  };
  visit(Object.keys(outputs).find((p) => outputs[p].entryPoint === entry));
  const files = [...loaded].map((p) => result.outputFiles.find((f) => f.path.endsWith(p)).contents);
  const code = Buffer.concat(files);
  const gz = files.reduce((n, f) => n + gzipSync(f, { level: 9 }).length, 0);
  const inputs = [...loaded].flatMap((p) => Object.keys(outputs[p].inputs));
  const foreign = inputs.filter((p) => !allowed(p));
  report.push({ entry: name, minified: code.length, gzip: gz, limit, modules: inputs.length });
  if (foreign.length > 0) {
    console.error(`${name}: unexpected modules in the entry chunk: ${foreign.join(', ')}`);
    failed = true;
  }
  if (gz > limit) {
    console.error(`${name}: size budget exceeded: ${gz} > ${limit} bytes gzipped`);
    failed = true;
  }
}
// --json: the /verify figures at the top level (as bench:verify reads them), every entry under `entries`.
if (process.argv.includes('--json')) console.log(JSON.stringify({ ...report[0], entries: report }));
else for (const r of report) console.log(`${r.entry}: ${r.minified} bytes minified, ${r.gzip} bytes gzipped (limit ${r.limit}), ${r.modules} modules`);
if (failed) process.exit(1);
