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
import { nodeFlagsFor, tunedEnv } from './tuning.mjs';

const here = realpathSync(fileURLToPath(import.meta.url));

// Older Node fails later with a raw module error (the store's exports are TypeScript; package.json "engines").
if (Number(process.versions.node.split('.')[0]) < 22) {
  process.stderr.write(`bpavl: needs Node 22 or later; this is Node ${process.versions.node}\n`);
  process.exit(1);
}

// The commands that work through a whole state start again, once, in this
// same process (`process.execve`: same PID, same stdio), with a small V8
// young generation (a sync also with its old one collected sooner), and
// glibc's allocator held to one arena and giving large blocks back
// (bin/tuning.mjs).
// A 1M sync from 3 peers peaked at 323–336 MiB of RSS without these
// settings; from 9 peers it peaks at 205–213 MiB with them (docs/store.md,
// "Where the syncing process's memory goes").
// All of them are fixed when a process starts. The user's own Node flags and
// MALLOC_ settings win.
// BPAVL_NODE_TUNED=1 skips this. Windows, and a Node without
// `process.execve` (before 22.15), run untuned.
const LONG_COMMANDS = new Set(['sync', 'generate', 'import', 'check', 'prune']);
const canExec = typeof process.execve === 'function' && process.platform !== 'win32';
if (LONG_COMMANDS.has(process.argv[2]) && !process.env.BPAVL_NODE_TUNED && canExec) {
  process.execve(process.execPath, [process.execPath, ...nodeFlagsFor(process.argv[2]), ...process.execArgv, here, ...process.argv.slice(2)], tunedEnv(process.env));
}

// The commands that report an interruption (src/interrupt.ts: exit 130, the
// ABORTED line with --json) install their handlers once loaded, a few hundred
// ms from now; a SIGINT or SIGTERM meanwhile would kill the process with no
// word. Until then, one is reported here, before anything is opened
// (interruptible() removes this handler, marked for it).
const argv = process.argv.slice(2);
if (['sync', 'import', 'prune', 'rollback', 'check'].includes(argv[0]) || (argv[0] === 'generate' && argv.some((a) => a === '--db' || a.startsWith('--db=')))) {
  const early = () => {
    const message = 'interrupted before it started';
    if (argv.includes('--json')) process.stdout.write(`${JSON.stringify({ error: 'ABORTED', message, ...(argv[0] === 'sync' && { peers: [] }) })}\n`);
    else process.stderr.write(`bpavl ${argv[0]}: ${message}\n`);
    process.exit(130);
  };
  early[Symbol.for('bpavl.early-interrupt')] = true;
  process.on('SIGINT', early);
  process.on('SIGTERM', early);
}

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
