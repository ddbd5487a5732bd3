// WebAssembly throughput on the standard workload (packages/peer/src/workload.ts,
// the TypeScript twin of crates/bench/src/workload.rs), inserted in order.
//
//   npm run bench:wasm [-- --n 100000 --capacity 256]   (after npm run build -w @bpavl/wasm)
//
// Progress on stderr, one JSON line on stdout. Every measured call is checked
// (a verifier throws on failure). MB = 10^6 bytes of chunk envelopes.
// Rates are of the median timed pass.
import { parseArgs } from 'node:util';
import { init, Rebuilder, Tree, verifyChunk, verifyExistence } from '@bpavl/wasm';
import { workloadEntry } from '../packages/peer/src/workload.ts';

const { values: args } = parseArgs({
  options: { n: { type: 'string', default: '100000' }, capacity: { type: 'string', default: '256' } },
});
const n = Number(args.n);
const capacity = Number(args.capacity);

/**
 * Runs `pass` (doing `ops` operations) at least 5 times and for at least
 * `minSecs`; returns ops per second of the median pass (robust to a busy machine).
 */
function rate(ops, pass, minSecs = 2) {
  pass(); // warm-up
  const times = [];
  const t0 = performance.now();
  while (times.length < 5 || performance.now() - t0 < minSecs * 1e3) {
    const t = performance.now();
    pass();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return (ops * 1e3) / times[times.length >> 1];
}

await init();
console.error(`bench: n = ${n}, capacity = ${capacity}, node ${process.version}`);
const entries = Array.from({ length: n }, (_, i) => workloadEntry(0n, i));

let t0 = performance.now();
const tree = new Tree(capacity);
for (const [k, v] of entries) tree.insert(k, v);
const { root } = tree.commit();
const buildS = (performance.now() - t0) / 1e3;
const head = tree.head();
console.error(`  build (insert all + commit)  ${(buildS * 1e3).toFixed(1)} ms`);

const proved = entries.slice(0, Math.min(n, 10_000));
const proofs = proved.map(([k]) => head.proveExistence(k));
const verifyPerS = rate(proved.length, () => {
  for (let i = 0; i < proved.length; i++) verifyExistence(root, proved[i][0], proved[i][1], proofs[i]);
});
console.error(`  verify existence             ${verifyPerS.toFixed(0)} /s`);

const envelopes = Array.from({ length: tree.chunkCount }, (_, i) => head.exportChunk(i));
const stateBytes = envelopes.reduce((s, e) => s + e.length, 0);
const chunkPerS = rate(envelopes.length, () => {
  for (let i = 0; i < envelopes.length; i++) verifyChunk(root, i, envelopes[i]).free();
});
const chunkMbS = (chunkPerS * stateBytes) / envelopes.length / 1e6;
console.error(`  verify chunk envelopes       ${chunkMbS.toFixed(1)} MB/s (${chunkPerS.toFixed(0)} chunks/s)`);

t0 = performance.now();
const rebuilder = new Rebuilder(root);
for (let i = 0; i < envelopes.length; i++) rebuilder.add(i, envelopes[i]);
const copy = rebuilder.finish(1);
const importS = (performance.now() - t0) / 1e3;
if (Buffer.compare(copy.head().root, root) !== 0) throw new Error('rebuilt root differs');
console.error(`  import (verify + rebuild)    ${(importS * 1e3).toFixed(1)} ms`);

console.log(
  JSON.stringify({
    n,
    capacity,
    root_hex: Buffer.from(root).toString('hex'),
    wasm_build_s: buildS,
    wasm_verify_per_s: Math.round(verifyPerS),
    proof_bytes_avg: proofs.reduce((s, p) => s + p.length, 0) / proofs.length,
    wasm_chunk_mb_s: Number(chunkMbS.toFixed(1)),
    wasm_import_s: importS,
    state_bytes: stateBytes,
    chunks: envelopes.length,
  }),
);
