#!/usr/bin/env node
// The range flood of issue 13, against a real `bpavl serve` child process:
// many WebSocket connections each pipeline large RANGE requests (answers of
// about 7.7 MB on the standard workload) and never read. Prints the serving
// process's RSS before, its peak (VmHWM) during the flood, and its RSS once
// the attackers have left and the process has settled, from /proc (Linux).
//
//   node bench/flood.mjs [--connections 240] [--requests 64] [--limit 14000]
//                                [--flood-seconds 15] [--settle-seconds 15] [--bin PATH]
//
// --bin runs another CLI entry (e.g. an older checkout's packages/peer/bin/bpavl.mjs)
// to compare. JSON on the last line: {rss_idle_mb, rss_peak_mb, rss_settled_mb,
// settled_near_idle (settled ≤ 1.3 × idle), …}.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { encodeFrame, encodeRequest, Kind } from '@bpavl/light-client/wire';
import { WebSocket } from 'ws';

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '240' },
    requests: { type: 'string', default: '64' },
    limit: { type: 'string', default: '14000' },
    'flood-seconds': { type: 'string', default: '15' },
    'settle-seconds': { type: 'string', default: '15' },
    bin: { type: 'string', default: fileURLToPath(new URL('../packages/peer/bin/bpavl.mjs', import.meta.url)) },
    help: { type: 'boolean' },
  },
});
if (args.help) {
  process.stdout.write('usage: node bench/flood.mjs [--connections N] [--requests R] [--limit L] [--flood-seconds S] [--settle-seconds S] [--bin PATH]\n');
  process.exit(0);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** "Near its idle level": at most this much above the RSS before the flood. */
const SETTLED_MAX_OVER_IDLE = 1.3;

/** VmRSS and VmHWM of `pid`, in MB. */
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))[1]);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

const child = spawn(process.execPath, [args.bin, 'serve', '--json', '--libp2p-port', 'off', '--exit-on-stdin-end'], { stdio: ['pipe', 'pipe', 'inherit'] });
process.on('exit', () => child.kill('SIGKILL'));
const info = await new Promise((resolve, reject) => {
  let out = '';
  const t = setTimeout(() => reject(new Error('serve did not start in 120 s')), 120_000);
  child.stdout.on('data', (d) => {
    out += d;
    if (out.includes('\n')) {
      clearTimeout(t);
      resolve(JSON.parse(out.split('\n')[0]));
    }
  });
});
const root = Buffer.from(info.root, 'hex');
await sleep(2000);
const idle = memory(child.pid);

const sockets = [];
for (let i = 0; i < Number(args.connections); i++) {
  const ws = new WebSocket(info.ws, { perMessageDeflate: false });
  ws.on('error', () => {});
  const opened = await new Promise((resolve) => {
    ws.once('open', () => resolve(true));
    ws.once('close', () => resolve(false));
  });
  if (!opened) continue;
  ws.pause(); // never read: answers pile up in the server
  const frames = [];
  for (let id = 0; id < Number(args.requests); id++) {
    const start = Uint8Array.of((id * 4) & 0xff); // spread over the key space
    frames.push(encodeFrame(encodeRequest({ id, kind: Kind.Range, root, start, limit: Number(args.limit) })));
  }
  ws.send(Buffer.concat(frames));
  sockets.push(ws);
}
let peak = idle.rss;
const floodUntil = Date.now() + Number(args['flood-seconds']) * 1000;
while (Date.now() < floodUntil) {
  peak = Math.max(peak, memory(child.pid).rss);
  await sleep(200);
}
const hwm = memory(child.pid).hwm;
for (const ws of sockets) ws.terminate();
await sleep(Number(args['settle-seconds']) * 1000);
const settled = memory(child.pid);
child.stdin.end();
const result = {
  connections: sockets.length,
  requests_per_connection: Number(args.requests),
  limit: Number(args.limit),
  rss_idle_mb: Math.round(idle.rss),
  rss_peak_mb: Math.round(Math.max(peak, hwm)),
  rss_settled_mb: Math.round(settled.rss),
  // The target: memory returns near its idle level once the attack ends.
  settled_near_idle: settled.rss <= SETTLED_MAX_OVER_IDLE * idle.rss,
};
process.stderr.write(`target: settled ≤ ${SETTLED_MAX_OVER_IDLE} × idle (${Math.round(SETTLED_MAX_OVER_IDLE * idle.rss)} MB): ${result.settled_near_idle ? 'met' : 'MISSED'}\n`);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
