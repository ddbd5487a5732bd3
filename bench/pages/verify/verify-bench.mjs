// The measured loops of `npm run bench:verify` (bench/verify.mjs),
// shared verbatim by Node and by the Chromium page in this folder, plus the
// binary payload both of them read: the trusted root, the existence proofs
// (with their keys, values and expected positions) and every chunk envelope.
//
// Every measured call is checked: a verifier throws on a bad proof, and the
// loops also compare what it returns with what is expected.

/** Each rate loop runs at least this long (and at least MIN_PASSES passes). */
export const MIN_SECONDS = 0.3;
export const MIN_PASSES = 3;

const MAGIC = 0x42505642; // "BPVB"

/**
 * Encodes the payload: u32 LE fields, byte strings as u32 length ‖ bytes.
 * @param {{ n: number, root: Uint8Array, proved: { key: Uint8Array, value: Uint8Array, proof: Uint8Array, chunkIndex: number, position: number }[], envelopes: Uint8Array[] }} p
 * @returns {Uint8Array}
 */
export function encodePayload({ n, root, proved, envelopes }) {
  let size = 4 * 3 + 32 + 4;
  for (const e of proved) size += 12 + e.key.length + e.value.length + e.proof.length + 8;
  size += 4;
  for (const e of envelopes) size += 4 + e.length;
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  let o = 0;
  const u32 = (x) => {
    dv.setUint32(o, x, true);
    o += 4;
  };
  const bytes = (b) => {
    u32(b.length);
    out.set(b, o);
    o += b.length;
  };
  u32(MAGIC);
  u32(1);
  u32(n);
  out.set(root, o);
  o += 32;
  u32(proved.length);
  for (const e of proved) {
    bytes(e.key);
    bytes(e.value);
    bytes(e.proof);
    u32(e.chunkIndex);
    u32(e.position);
  }
  u32(envelopes.length);
  for (const e of envelopes) bytes(e);
  if (o !== size) throw new Error('payload size mismatch');
  return out;
}

/**
 * Decodes {@link encodePayload}'s bytes; byte strings are views into `buf`.
 * @param {Uint8Array} buf
 */
export function decodePayload(buf) {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  const u32 = () => {
    const x = dv.getUint32(o, true);
    o += 4;
    return x;
  };
  const bytes = () => {
    const len = u32();
    const b = buf.subarray(o, o + len);
    if (b.length !== len) throw new Error('payload truncated');
    o += len;
    return b;
  };
  if (u32() !== MAGIC || u32() !== 1) throw new Error('not a bench:verify payload');
  const n = u32();
  const root = buf.subarray(o, o + 32);
  o += 32;
  const count = u32();
  const keys = [];
  const values = [];
  const proofs = [];
  const chunkIndex = new Uint32Array(count);
  const position = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    keys.push(bytes());
    values.push(bytes());
    proofs.push(bytes());
    chunkIndex[i] = u32();
    position[i] = u32();
  }
  const envelopes = [];
  for (let i = u32(); i > 0; i--) envelopes.push(bytes());
  if (o !== buf.length) throw new Error('payload has trailing bytes');
  const envelopeBytes = envelopes.reduce((s, e) => s + e.length, 0);
  return { n, root, keys, values, proofs, chunkIndex, position, envelopes, envelopeBytes };
}

/**
 * Runs `pass` (doing `ops` operations) once to warm up, then until it has run
 * at least MIN_PASSES times and MIN_SECONDS in total; returns operations per
 * second of the median pass (robust to a busy machine), and the loop's totals.
 */
function rate(ops, pass) {
  pass();
  const times = [];
  const t0 = performance.now();
  while (times.length < MIN_PASSES || performance.now() - t0 < MIN_SECONDS * 1e3) {
    const t = performance.now();
    pass();
    times.push(performance.now() - t);
  }
  const total = (performance.now() - t0) / 1e3;
  times.sort((a, b) => a - b);
  return { perS: (ops * 1e3) / times[times.length >> 1], passes: times.length, seconds: total };
}

/** Lets the event loop run between measurements (a browser page stays responsive). */
const yieldNow = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * The measurements, with `lc` = `@bpavl/light-client/verify` and `wasm`
 * = `@bpavl/wasm` (initialized), on a decoded payload. Existence: decode +
 * verify of each proof (TS and `wasm_verify_single`: one call a proof;
 * `wasm_verify`: all of them in one `verifyExistenceBatch` call), every result
 * compared with the expected chunk index and position. Chunks: every envelope verified, its index and entry
 * count checked, MB = 10^6 bytes of envelope.
 */
export async function measure(lc, wasm, d) {
  const { n, root, keys, values, proofs, chunkIndex, position, envelopes, envelopeBytes } = d;
  const m = proofs.length;
  const checkEntry = (r, i) => {
    if (r.chunkIndex !== chunkIndex[i] || r.position !== position[i]) {
      throw new Error(`proof ${i}: verified at chunk ${r.chunkIndex} position ${r.position}, expected ${chunkIndex[i]}/${position[i]}`);
    }
  };
  const checkCount = (seen) => {
    if (seen !== n) throw new Error(`chunks held ${seen} entries, expected ${n}`);
  };

  const loops = {};
  loops.ts_verify = rate(m, () => {
    for (let i = 0; i < m; i++) checkEntry(lc.verifyExistence(root, keys[i], values[i], proofs[i]), i);
  });
  await yieldNow();
  loops.wasm_verify_single = rate(m, () => {
    for (let i = 0; i < m; i++) checkEntry(wasm.verifyExistence(root, keys[i], values[i], proofs[i]), i);
  });
  await yieldNow();
  const items = proofs.map((proof, i) => ({ key: keys[i], value: values[i], proof }));
  loops.wasm_verify = rate(m, () => {
    const results = wasm.verifyExistenceBatch(root, items);
    for (let i = 0; i < m; i++) checkEntry(results[i], i);
  });
  await yieldNow();
  loops.ts_chunk = rate(envelopes.length, () => {
    let seen = 0;
    for (let i = 0; i < envelopes.length; i++) {
      const c = lc.verifyChunk(root, i, envelopes[i]);
      if (c.index !== i) throw new Error(`chunk ${i}: index ${c.index}`);
      seen += c.entries.length;
    }
    checkCount(seen);
  });
  await yieldNow();
  loops.wasm_chunk = rate(envelopes.length, () => {
    let seen = 0;
    for (let i = 0; i < envelopes.length; i++) {
      const c = wasm.verifyChunk(root, i, envelopes[i]);
      try {
        if (c.index !== i) throw new Error(`chunk ${i}: index ${c.index}`);
        seen += c.len;
      } finally {
        c.free();
      }
    }
    checkCount(seen);
  });

  const mbS = (perS) => (perS * envelopeBytes) / envelopes.length / 1e6;
  return {
    ts_verify_per_s: Math.round(loops.ts_verify.perS),
    wasm_verify_per_s: Math.round(loops.wasm_verify.perS),
    wasm_verify_single_per_s: Math.round(loops.wasm_verify_single.perS),
    ts_chunk_mb_s: Number(mbS(loops.ts_chunk.perS).toFixed(1)),
    wasm_chunk_mb_s: Number(mbS(loops.wasm_chunk.perS).toFixed(1)),
    loops: Object.fromEntries(Object.entries(loops).map(([k, v]) => [k, { passes: v.passes, seconds: Number(v.seconds.toFixed(3)) }])),
  };
}
