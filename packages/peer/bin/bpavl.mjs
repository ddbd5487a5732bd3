#!/usr/bin/env node
// The `bpavl` command (packages/peer/src/cli.ts).
//
// Where Node strips TypeScript types itself (22.18+, 23.6+, 24) and this file
// is not inside node_modules, the CLI runs from src/ directly, so there is
// nothing to rebuild after an edit. Elsewhere it runs the compiled dist/
// (`npm run build -w @bpavl/peer`). Either way @bpavl/wasm and
// @bpavl/light-client must be built (see packages/peer/README.md).
import { existsSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = realpathSync(fileURLToPath(import.meta.url));
const src = new URL('../src/cli.ts', import.meta.url);
const dist = new URL('../dist/cli.js', import.meta.url);
const canStrip = Boolean(process.features?.typescript) && !here.split(/[\\/]/).includes('node_modules');

let entry;
if (canStrip && existsSync(src)) entry = src;
else if (existsSync(dist)) entry = dist;
else {
  process.stderr.write('bpavl: this Node cannot run TypeScript sources and dist/ is missing: run `npm run build -w @bpavl/peer`\n');
  process.exit(1);
}

const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
// A served peer resolves only once it has stopped; exit even if a library left a handle open.
setTimeout(() => process.exit(), 200).unref();
