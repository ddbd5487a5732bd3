#!/usr/bin/env node
// `npm run bench:ts-verifier`: quick speed numbers for the pure-TS verifier
// (@bpavl/light-client/verify) on synthetic proofs and envelopes and on the
// golden vectors, with no WASM and no workload to build. Not a test;
// bench:verify measures both verifiers on the standard workload.
//
//   npm run bench:ts-verifier [-- --no-build]
//
// Builds the light client's dist/ first (skip with --no-build). The result
// lines, then one JSON line last, on stdout.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { buildLightClient } from '../tests/browser/build.mjs';
import { chunkHash, entryHash, mth, multiproof, rootHash, sha, singleChunk, syntheticEntries, u64, varint } from '../packages/light-client/test/reference.ts';

const { values: args } = parseArgs({ options: { 'no-build': { type: 'boolean', default: false } } });
if (!args['no-build']) buildLightClient();
const { verifyChunk, verifyExistence } = await import('@bpavl/light-client/verify');

const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));

function rate(fn, ms = 1500) {
  for (let i = 0; i < 50; i++) fn();
  const t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < ms) {
    fn();
    n++;
  }
  return n / ((performance.now() - t0) / 1000);
}

/**
 * An existence proof shaped like one from a 100,000-entry tree with C = 256:
 * a full chunk of 256 entries (8 in-chunk hashes) and a 9-step chunk path.
 */
function syntheticExistence() {
  const C = 256, M = 256, pos = 77;
  const entries = syntheticEntries(M, 32, 32);
  const d = entries.map(([k, v]) => entryHash(k, v));
  const inchunk = multiproof(d, pos, pos + 1);
  let h = chunkHash(M, mth(d));
  let chunks = 1, total = M;
  const path = [9];
  for (let s = 0; s < 9; s++) {
    const left = s % 2 === 1;
    const sc = 2 ** s, se = sc * 200;
    const sib = sha(Uint8Array.of(s));
    chunks += sc;
    total += se;
    h = sha(Uint8Array.of(3, s + 1), u64(chunks), u64(total), left ? sib : h, left ? h : sib);
    path.push((left ? 0x80 : 0) | (s + 1), ...varint(sc), ...varint(se), ...sib);
  }
  const proof = Uint8Array.from([0x01, ...varint(C), ...varint(M), ...varint(pos), ...inchunk.flatMap((x) => [...x]), ...path]);
  return { root: rootHash(C, chunks, total, h), key: entries[pos][0], value: entries[pos][1], proof };
}

const ex = syntheticExistence();
verifyExistence(ex.root, ex.key, ex.value, ex.proof);
const exRate = rate(() => verifyExistence(ex.root, ex.key, ex.value, ex.proof));
console.log(`existence, 100k-like proof (${ex.proof.length} B): ${Math.round(exRate)} verifications/s`);

const vectors = JSON.parse(readFileSync(new URL('../spec/vectors/existence.json', import.meta.url), 'utf8')).valid.map((c) => [hex(c.root), hex(c.key), hex(c.value), hex(c.proof)]);
const vectorsRate = rate(() => { for (const v of vectors) verifyExistence(...v); }) * vectors.length;
console.log(`existence, the ${vectors.length} vector proofs in turn: ${Math.round(vectorsRate)} verifications/s`);

const big = singleChunk(256, syntheticEntries(256, 32, 512));
verifyChunk(big.root, 0, big.envelope);
const bigRate = rate(() => verifyChunk(big.root, 0, big.envelope));
console.log(`chunk, synthetic 256 × (32 B key, 512 B value) envelope (${big.envelope.length} B): ${((bigRate * big.envelope.length) / 1e6).toFixed(1)} MB/s (${Math.round(bigRate)} chunks/s)`);

const wide = JSON.parse(readFileSync(new URL('../spec/vectors/chunk_envelope.json', import.meta.url), 'utf8')).valid
  .filter((c) => c.tree === 'c256_wide').map((c) => [hex(c.root), c.index, hex(c.envelope)]);
const wideBytes = wide.reduce((a, [, , e]) => a + e.length, 0);
const wideRate = rate(() => { for (const w of wide) verifyChunk(...w); });
console.log(`chunk, the ${wide.length} c256_wide vector envelopes (${wideBytes} B, ~150 entries each): ${((wideRate * wideBytes) / 1e6).toFixed(1)} MB/s (${Math.round(wideRate * wide.length)} chunks/s)`);

console.log(
  JSON.stringify({
    ts_verify_synthetic_per_s: Math.round(exRate),
    ts_verify_vectors_per_s: Math.round(vectorsRate),
    ts_chunk_synthetic_mb_s: Number(((bigRate * big.envelope.length) / 1e6).toFixed(1)),
    ts_chunk_vectors_mb_s: Number(((wideRate * wideBytes) / 1e6).toFixed(1)),
  }),
);
