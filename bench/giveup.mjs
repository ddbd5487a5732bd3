#!/usr/bin/env node
// How long `bpavl sync` takes to fail against peers that never help
// (spec/wire.md, "Giving up"), with the default deadlines: a peer that
// answers only BUSY, one that never completes the WebSocket handshake, one
// that never answers, each alone and after a lying peer is banned.
//
//   node bench/giveup.mjs [--entries 20000]
//
// JSON on the last line: {"runs": [{peers, seconds, error, outcomes}]}.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { listenMute } from '../packages/testnet/src/mute.ts';

const { values: args } = parseArgs({ options: { entries: { type: 'string', default: '20000' }, help: { type: 'boolean' } } });
if (args.help) {
  process.stdout.write('usage: node bench/giveup.mjs [--entries N]\n');
  process.exit(0);
}
const TESTNET = fileURLToPath(new URL('../packages/testnet/bin/bpavl-testnet.mjs', import.meta.url));
const children = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

/** Starts `bpavl-testnet serve --byzantine MODE` and resolves with its JSON line. */
function serve(mode) {
  const child = spawn(process.execPath, [TESTNET, 'serve', '--json', '--entries', args.entries, '--libp2p-port', 'off', '--byzantine', mode, '--exit-on-stdin-end'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]));
    });
  });
}

/** Runs `bpavl sync --json` with the default deadlines; resolves with its wall time and JSON. */
function sync(root, peers) {
  const t0 = performance.now();
  const child = spawn(process.execPath, [TESTNET, 'sync', '--json', '--root', root, ...peers.flatMap((p) => ['--peer', p])], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const kill = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) => {
    child.on('exit', () => {
      clearTimeout(kill);
      resolve({ seconds: Number(((performance.now() - t0) / 1000).toFixed(1)), out: JSON.parse(out.trim().split('\n').at(-1) ?? '{}') });
    });
  });
}

const [busy, silent, liar] = await Promise.all([serve('busy'), serve('silent'), serve('corrupt-value')]);
const mute = await listenMute();
const cases = [
  ['busy', [busy.ws]],
  ['never handshakes', [mute.url]],
  ['never answers', [silent.ws]],
  ['liar, then busy', [liar.ws, busy.ws]],
  ['liar, then never handshakes', [liar.ws, mute.url]],
  ['liar, then never answers', [liar.ws, silent.ws]],
];
const runs = [];
for (const [name, peers] of cases) {
  const { seconds, out } = await sync(busy.root, peers);
  const outcomes = (out.peers ?? []).map((p) => `${p.outcome} ${p.code}`);
  process.stderr.write(`${name.padEnd(30)} ${seconds} s  ${out.error}  ${outcomes.join(', ')}\n`);
  runs.push({ peers: name, seconds, error: out.error, outcomes });
}
await mute.close();
process.stdout.write(`${JSON.stringify({ runs })}\n`);
process.exit(0);
