#!/usr/bin/env node
// `npm run bench:query`: verified reads with the query client
// (@bpavl/light-client/client, WASM batch verification) from local
// `bpavl serve` peers over WebSocket, in Node and in headless Chromium,
// first from honest peers only, then with 2 of them lying (corrupt-proof,
// wrong-key; listed first, so that they are asked and banned). Every answer
// is verified while measured (tests/browser/query/measure.js).
//
//   npm run bench:query [-- --entries 100000 --chunk 256 --peers 8 --keys 50000 --no-browser]
//
// get_many_per_s: keys / seconds of `getMany` in batches of 10,000, after
// three warm-up passes over the keys (the client's and the peers' JIT and
// WebAssembly tiers); get_many_per_s_cold: the first of those passes;
// get_p50_ms, get_p99_ms: single `get`s, one at a time;
// range_mb_s: key and value bytes of a full range scan in pages of 1,000 /
// its seconds, MB = 10^6 bytes. `browser_` prefix: in Chromium;
// `_byzantine` suffix: with the 2 liars among the peers.
// get_many_per_s_single: the same getMany (Node, honest peers) with every
// MULTIPROOF answered BAD_REQUEST on the client's side, as by a peer from
// before MULTIPROOF: one PROOF request per key. bytes_per_key: wire bytes (whole frames)
// per key of 10,000 keys in key order, as PROOF requests and answers and as
// MULTIPROOF of `keys_per_request` keys. cpu_us_per_key: CPU time per key
// of getMany (honest peers), in the client and summed over the peers.
// Targets (issue 12): ≥ 50,000/s getMany in Node, p50 ≤ 1 ms, p99 ≤ 5 ms;
// with liars within 1.5× of honest. A benchmark, not a test: it exits 0
// when a target is missed (1 only when a run fails or an answer does not check).
// Progress on stderr; the result lines, then one JSON line last, on stdout.
import { chromium } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient } from '@bpavl/light-client/client';
import { connectWebSocket } from '@bpavl/light-client/sync';
import { decodeMultiproofPayload, encodeFrame, encodeProofPayload, encodeRequest, encodeResponse, Kind, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, Status } from '@bpavl/light-client/wire';
import * as wasm from '@bpavl/wasm';
import { readTreeFile } from '../packages/peer/src/treefile.ts';
import { workloadEntry } from '../packages/peer/src/workload.ts';
import { buildLightClient, buildPage } from '../tests/browser/build.mjs';
import { launchOptions } from '../tests/browser/chromium.mjs';
import { measure } from '../tests/browser/query/measure.js';
import { serve } from '../tests/browser/serve.mjs';
import { installCleanupHandlers, startPeers, stopPeers } from './sync/peers.mjs';

const { values: args } = parseArgs({
  options: {
    entries: { type: 'string', default: '100000' },
    chunk: { type: 'string', default: '256' },
    peers: { type: 'string', default: '8' },
    keys: { type: 'string', default: '50000' },
    'no-browser': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
  },
});
const entries = Number(args.entries);
const peerCount = Number(args.peers);
const keyCount = Math.min(Number(args.keys), entries);
const LIARS = ['corrupt-proof', 'wrong-key'];
const log = (m) => process.stderr.write(`${m}\n`);
const BPAVL = fileURLToPath(new URL('../packages/peer/bin/bpavl.mjs', import.meta.url));

installCleanupHandlers(log);
if (!args['no-build']) buildLightClient();
await wasm.init();

const dir = mkdtempSync(join(tmpdir(), 'bpavl-bench-query-'));
const file = join(dir, 'state.bpavl');
let peers = [];
let server;
let browser;
try {
  log(`generating ${entries} entries (chunk ${args.chunk}) …`);
  execFileSync(process.execPath, [BPAVL, 'generate', '--entries', String(entries), '--chunk', args.chunk, '--seed', '0', '--out', file], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  log(`starting ${peerCount} honest and ${LIARS.length} lying peers …`);
  peers = await startPeers(
    [
      ...LIARS.map((mode) => ({ args: ['--file', file, '--byzantine', mode], label: `liar ${mode}` })),
      ...Array.from({ length: peerCount }, (_, i) => ({ args: ['--file', file], label: `honest ${i + 1}` })),
    ],
    { concurrency: 2, timeoutMs: 120_000, log },
  );
  const root = peers[0].info.root;
  const liars = peers.slice(0, LIARS.length).map((p) => p.info.ws);
  const honest = peers.slice(LIARS.length).map((p) => p.info.ws);
  // The byzantine runs keep the peer count: the liars replace two honest peers.
  const runs = { '': honest, _byzantine: [...liars, ...honest.slice(0, peerCount - liars.length)] };

  // Random workload keys (a fixed stride through the indexes), and each one's index.
  const indexes = Array.from({ length: keyCount }, (_, i) => (i * 7919) % entries);
  const keys = indexes.map((i) => workloadEntry(0n, i)[0]);
  const hex = (b) => Buffer.from(b).toString('hex');

  const result = { entries, peers: peerCount, keys: keyCount };
  for (const [suffix, list] of Object.entries(runs)) {
    log(`Node${suffix ? ', with 2 liars' : ''} …`);
    const client = createClient({ root: Buffer.from(root, 'hex'), peers: list, wasm });
    const r = await measure(client, keys, indexes, { entries });
    client.close();
    if (suffix && r.banned.length !== liars.length) throw new Error(`expected both liars banned, got ${JSON.stringify(r.banned)}`);
    for (const f of ['get_many_per_s', 'get_many_per_s_cold', 'get_p50_ms', 'get_p99_ms', 'range_mb_s']) result[`${f}${suffix}`] = r[f];
  }

  // Against single proofs: the same getMany from the honest peers with every
  // MULTIPROOF answered BAD_REQUEST on the client's side, as a peer from
  // before MULTIPROOF does, so the client asks one PROOF per key.
  log('Node, one PROOF per key …');
  const beforeMultiproof = async (address, signal) => {
    const conn = await connectWebSocket(address, signal);
    return Object.assign(Object.create(conn), {
      request: (req, o) => (req.kind === Kind.Multiproof ? Promise.resolve({ id: 0, kind: req.kind, status: Status.BadRequest, payload: new Uint8Array(0) }) : conn.request(req, o)),
    });
  };
  const single = createClient({ root: Buffer.from(root, 'hex'), peers: honest, wasm, connect: beforeMultiproof });
  result.get_many_per_s_single = await getManyRate(single, keys, indexes);
  single.close();
  result.bytes_per_key = await bytesPerKey(file, keys.slice(0, 10_000));
  result.cpu_us_per_key = await cpuPerKey(Buffer.from(root, 'hex'), honest, peers.slice(LIARS.length), keys, indexes);

  if (!args['no-browser']) {
    const out = join(dir, 'page');
    await buildPage(new URL('../tests/browser/query/', import.meta.url), out);
    server = await serve(out);
    browser = await chromium.launch(launchOptions);
    const page = await browser.newPage();
    await page.goto(server.url);
    await page.waitForSelector('#status[data-state="ready"]', { timeout: 30_000 });
    for (const [suffix, list] of Object.entries(runs)) {
      log(`Chromium${suffix ? ', with 2 liars' : ''} …`);
      const r = await page.evaluate((a) => window.__queryBench(a), { root, peers: list, keys: keys.map(hex), indexes, entries });
      if (suffix && r.banned.length !== liars.length) throw new Error(`browser: expected both liars banned, got ${JSON.stringify(r.banned)}`);
      for (const f of ['get_many_per_s', 'get_many_per_s_cold', 'get_p50_ms', 'get_p99_ms', 'range_mb_s']) result[`browser_${f}${suffix}`] = r[f];
    }
  }

  const ratio = result.get_many_per_s / result.get_many_per_s_byzantine;
  const b = result.bytes_per_key;
  console.log(
    `getMany one PROOF per key (Node): ${result.get_many_per_s_single}/s; bytes per key: requests ${b.proof_request} (PROOF) / ${b.multiproof_request} (MULTIPROOF), answers ${b.proof_answer} / ${b.multiproof_answer}; CPU per key: client ${result.cpu_us_per_key.client} µs, peers ${result.cpu_us_per_key.peers} µs`,
  );
  console.log(`getMany (Node): ${result.get_many_per_s}/s honest, ${result.get_many_per_s_byzantine}/s with 2 liars (target ≥ 50000/s, within 1.5×: ${ratio.toFixed(2)}×); first pass (cold) ${result.get_many_per_s_cold}/s`);
  console.log(`get latency (Node): p50 ${result.get_p50_ms} ms, p99 ${result.get_p99_ms} ms (targets ≤ 1 ms, ≤ 5 ms)`);
  console.log(`range scan (Node): ${result.range_mb_s} MB/s`);
  if (result.browser_get_many_per_s !== undefined) {
    console.log(`Chromium: getMany ${result.browser_get_many_per_s}/s (${result.browser_get_many_per_s_byzantine}/s with liars), get p50 ${result.browser_get_p50_ms} ms, p99 ${result.browser_get_p99_ms} ms, range ${result.browser_range_mb_s} MB/s`);
  }
  console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await server?.close();
  await stopPeers(peers);
  rmSync(dir, { recursive: true, force: true });
}

/** Verified `getMany` reads per second over `keys` in batches of 10,000, after one untimed pass; every value checked. */
async function getManyRate(client, keys, indexes) {
  for (let at = 0; at < keys.length; at += 10_000) await client.getMany(keys.slice(at, at + 10_000));
  const values = [];
  const t0 = performance.now();
  for (let at = 0; at < keys.length; at += 10_000) values.push(...(await client.getMany(keys.slice(at, at + 10_000))));
  const seconds = (performance.now() - t0) / 1000;
  values.forEach((v, i) => {
    if (v === undefined || new DataView(v.buffer, v.byteOffset, 8).getBigUint64(0) !== BigInt(indexes[i])) throw new Error(`one PROOF per key: entry ${indexes[i]} read wrong`);
  });
  return Math.round(keys.length / seconds);
}

/**
 * CPU time per key of `getMany` (honest peers, after the timed runs): the
 * client process's, and the serving peers' summed (/proc/PID/stat, Linux),
 * over one pass of `keys`, every value checked.
 */
async function cpuPerKey(root, addresses, servers, keys, indexes) {
  const peersCpu = () => servers.reduce((us, p) => {
    const f = readFileSync(`/proc/${p.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return us + ((Number(f[11]) + Number(f[12])) * 1e6) / 100; // utime + stime, in clock ticks of 10 ms
  }, 0);
  const client = createClient({ root, peers: addresses, wasm });
  await getManyRate(client, keys, indexes); // connections open and warm
  const c0 = process.cpuUsage();
  const p0 = peersCpu();
  await getManyRate(client, keys, indexes);
  const c1 = process.cpuUsage(c0);
  const p1 = peersCpu();
  client.close();
  // getManyRate runs every key twice.
  const per = (us) => Number((us / (2 * keys.length)).toFixed(1));
  return { client: per(c1.user + c1.system), peers: per(p1 - p0) };
}

/**
 * Wire bytes per key (frames whole) for `keys` in key order from the served
 * tree: one PROOF request and answer per key, against MULTIPROOF of as many
 * keys as the client packs into a request.
 */
async function bytesPerKey(file, keys) {
  const { tree } = await readTreeFile(file);
  const head = tree.head();
  const sorted = [...keys].sort(Buffer.compare);
  const frame = (body) => encodeFrame(body).length;
  const id = 100_000; // a 3-byte id, as a client's ids grow
  let proofRequest = 0;
  let proofAnswer = 0;
  for (const key of sorted) {
    proofRequest += frame(encodeRequest({ id, kind: Kind.Proof, root: head.root, key }));
    proofAnswer += frame(encodeResponse({ id, kind: Kind.Proof, status: Status.Ok }, encodeProofPayload({ present: true, value: head.get(key), proof: head.proveExistence(key) })));
  }
  let multiRequest = 0;
  let multiAnswer = 0;
  const perRequest = Math.floor((MAX_REQUEST_BYTES - 44) / (sorted[0].length + 2)); // the client's packing (client.ts)
  for (let at = 0; at < sorted.length; at += perRequest) {
    const group = sorted.slice(at, at + perRequest);
    multiRequest += frame(encodeRequest({ id, kind: Kind.Multiproof, root: head.root, keys: group }));
    const payload = head.proveMulti(group, MAX_RESPONSE_BYTES - 11);
    // Counted only as a whole answer that verifies with every key present.
    const { count, proof } = decodeMultiproofPayload(payload, group.length);
    const { values } = wasm.verifyMultiproof(head.root, group, proof);
    if (count !== group.length || values.some((v) => v === undefined)) throw new Error('bytes_per_key: a MULTIPROOF answer did not verify whole');
    multiAnswer += frame(encodeResponse({ id, kind: Kind.Multiproof, status: Status.Ok }, payload));
  }
  tree.free();
  const per = (n) => Number((n / sorted.length).toFixed(1));
  return { keys_per_request: perRequest, proof_request: per(proofRequest), proof_answer: per(proofAnswer), multiproof_request: per(multiRequest), multiproof_answer: per(multiAnswer) };
}
