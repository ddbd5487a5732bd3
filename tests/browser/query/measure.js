// The measurements of `npm run bench:query` (bench/query.mjs), run
// the same way in Node and in the Chromium page (./main.js): every answer is
// verified while measured (the client checks each proof against the root),
// and each value is checked after the clock stops to start with u64be(i),
// the workload's index of its key (packages/peer/src/workload.ts).

/** Throws unless `value` is the workload value of entry `index`. */
function checkValue(value, index) {
  if (value === undefined) throw new Error(`entry ${index}: proven absent, but it is in the tree`);
  const got = new DataView(value.buffer, value.byteOffset, 8).getBigUint64(0);
  if (got !== BigInt(index)) throw new Error(`entry ${index}: the value of entry ${got}`);
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/**
 * Figures of one client: `getMany` throughput over `keys` (batches of
 * `batch`), warm and on the first pass (cold), single `get` latency over the first `singles` keys, and a full
 * range scan in pages of 1,000.
 *
 * @param {import('@bpavl/light-client/client').Client} client
 * @param {Uint8Array[]} keys  workload keys
 * @param {number[]} indexes  each key's workload index
 */
export async function measure(client, keys, indexes, { batch = 10_000, singles = 2000, entries, warmups = 3 }) {
  // getMany: warm-up passes (connections, and the JIT and WebAssembly tiers
  // of the client and of every peer), the first of them timed as the cold
  // rate; then the timed one.
  const c0 = performance.now();
  for (let at = 0; at < keys.length; at += batch) await client.getMany(keys.slice(at, at + batch));
  const coldSeconds = (performance.now() - c0) / 1000;
  for (let w = 1; w < warmups; w++) for (let at = 0; at < keys.length; at += batch) await client.getMany(keys.slice(at, at + batch));
  const values = [];
  const t0 = performance.now();
  for (let at = 0; at < keys.length; at += batch) values.push(...(await client.getMany(keys.slice(at, at + batch))));
  const getManySeconds = (performance.now() - t0) / 1000;
  values.forEach((v, i) => checkValue(v, indexes[i]));

  const latencies = [];
  for (let i = 0; i < Math.min(singles, keys.length); i++) {
    const s = performance.now();
    const v = await client.get(keys[i]);
    latencies.push(performance.now() - s);
    checkValue(v, indexes[i]);
  }
  latencies.sort((a, b) => a - b);

  let bytes = 0;
  let count = 0;
  let prev;
  const r0 = performance.now();
  for await (const page of client.range(new Uint8Array(0), undefined, { limit: 1000 })) {
    for (const [k, v] of page.entries) {
      bytes += k.length + v.length;
      count++;
      if (prev !== undefined && compare(prev, k) >= 0) throw new Error('range: keys out of order');
      prev = k;
    }
  }
  const rangeSeconds = (performance.now() - r0) / 1000;
  if (count !== entries) throw new Error(`range: ${count} entries, the tree has ${entries}`);

  return {
    get_many_per_s: Math.round(keys.length / getManySeconds),
    get_many_per_s_cold: Math.round(keys.length / coldSeconds),
    get_p50_ms: round(percentile(latencies, 50)),
    get_p99_ms: round(percentile(latencies, 99)),
    range_mb_s: round(bytes / 1e6 / rangeSeconds),
    banned: client.banned,
  };
}

function compare(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

const round = (x) => Math.round(x * 1000) / 1000;
