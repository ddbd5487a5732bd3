#!/usr/bin/env node
// `npm run bench:store`: the state store (@bpavl/store on the Node backend)
// on the standard workload, at N = 1,000,000 and 10,000,000 (issue #10's
// table; docs/store.md records the figures). A benchmark, not a test: it
// prints the targets next to the figures, exits 0 when they are missed and
// 1 when a check fails.
//
//   npm run bench:store [-- --n 1000000,10000000 --gets 100000 --proofs 100000 --versions 100 --keep 10 --cache-mib 64 --value-cache-mib 96 --batch-mib 1024 --mmap-mib 0]
//
// Per N, each phase in its own child process (so that its peak RSS is its
// own), on a directory under /tmp/bpavl-bench-store-*, deleted afterwards:
// 1. bulk: the CLI's path (`bpavl import` into an empty state), in a
//    child with the CLI's memory settings (packages/peer/bin/bpavl.mjs):
//    the standard workload's N entries, generated in index order into an
//    input file first (`bulk_generate_s`, 17 SHA-256 calls an entry), read
//    back, sorted on disk (`@bpavl/store/sort`) and bulk-loaded as one
//    version (`State.bulkLoad`; `bulk_import_s`, of which `bulk_sort_s`
//    until the first sorted entry). Its root must equal the one recomputed
//    beforehand from a sort of the same file with the light client's
//    TypeScript hashing (bench/packed-root.mjs, `bulk_check_s`), which also
//    checks that the sorted entries ascend and number N. Neither the input
//    nor the check runs during the load: on its thread they would hide the
//    sort's worker, which runs beside it;
// 2. every10k: the entries in index order, handed to `putMany` 16,384 at a
//    time with a commit every 10,000 entries, into a second directory
//    (`import_commit_every_10k_s`); it must hold N entries, and the values
//    of the reads' keys must be the bulk state's;
// 3. disk: bytes of every file of the bulk directory per entry;
// 4. reads, after dropping the directory's files from the page cache
//    (`dd iflag=nocache`): `open_s`, the open to the first verified get;
//    --gets random gets (keys: SplitMix64 seed 1, index = next() mod N),
//    cold (first pass) then the same keys warm; --proofs existence proofs
//    (seed 1 again), every one verified against the root; then, in another
//    child after dropping the page cache again, the same keys read with
//    `getMany`, GET_MANY_BATCH at a time, cold then warm
//    (`get_many_per_s_cold`, `get_many_per_s_warm`: no target of their own;
//    a batch reads its keys in key order, so a chunk is loaded once for
//    the keys of a batch it holds);
// 5. updates: --versions commits of 10,000 random updates each (keys: seed
//    2; a new value is a SHA-256 chain started from the old value, 512
//    bytes), `update10k_commit_s` the median of the puts plus the commit;
//    after each, updated keys read back their new values and prove them;
// 6. prune: down to the last --keep versions (`prune_s`, disk before and
//    after, `prune_disk_after_unpacked`), then the same prune with `vacuum`,
//    which has nothing left to delete and packs the database
//    (`prune_vacuum_s`; `prune_disk_after` is the packed size); the kept
//    versions still read.
// Each phase's `peak_rss_mib` is its child's own (getrusage); the parent
// samples the child's /proc every 50 ms for the largest anonymous and
// file-backed parts (`rss_anon_file_mib_by_phase`: the file-backed part is
// mostly SQLite's memory map of the database, which the kernel can drop).
// Values read are compared with the workload's; the bulk root is
// recomputed; every proof is verified. Progress on stderr; one JSON
// line last: {"runs": [{"n": …, "bulk_import_s": …, …}, …]}.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RunReader, writeRecords } from '../packages/store/src/sort-records.node.ts';
import { diskBytes, dropCache, runSampled, splitmix } from './files.mjs';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '1000000,10000000' },
    gets: { type: 'string', default: '100000' },
    proofs: { type: 'string', default: '100000' },
    versions: { type: 'string', default: '100' },
    keep: { type: 'string', default: '10' },
    'cache-mib': { type: 'string', default: '64' },
    'value-cache-mib': { type: 'string', default: '96' },
    // A pending batch's bound (`batchBytes`); the store's default.
    'batch-mib': { type: 'string', default: '1024' },
    // Bytes of SQLite's file read through a memory map (the Node backend's `mmapBytes`).
    'mmap-mib': { type: 'string', default: '0' },
    child: { type: 'string' },
    dir: { type: 'string' },
    batch: { type: 'string' },
    // The bulk child's input file: generated there if missing, and then kept
    // (repeated loads of 10M skip the 6 minutes of generating it). Child only.
    input: { type: 'string' },
  },
});

const TARGETS_10M = {
  bulk_import_s: '≤ 120',
  disk_bytes_per_entry: '≤ 700',
  open_s: '≤ 0.1',
  get_per_s_cold: '≥ 20k',
  get_per_s_warm: '≥ 500k',
  prove_per_s: '≥ 150k',
  update10k_commit_s: '≤ 0.5',
  prune_s: '≤ 60 (after ≤ 1.2× one version)',
  peak_rss_mib: '≤ 256',
};

const VALUE_LEN = 512;
const UPDATES_PER_VERSION = 10_000;
/**
 * Keys handed to `getMany` at a time in the batched reads: all of the
 * default --gets in one call. At 1M a call of 1,000 or 10,000 random keys
 * meets nearly as many chunks as keys, and reads no faster than single gets.
 */
const GET_MANY_BATCH = 100_000;

/** Entries handed to `putMany` at a time, as `bpavl generate` does. */
const IMPORT_SLICE = 16_384;

/** Bytes the bulk phase's input file is read in at a time. */
const ENTRY_FILE_BUFFER = 4 << 20;

function fail(message) {
  throw new Error(`check failed: ${message}`);
}

/**
 * Compared in place, by memcmp (`Buffer.compare`): the checks of the read loops should cost little next
 * to the reads they check (a loop in JS took 0.85 µs for a 512-byte value, a tenth of a warm get).
 */
function sameBytes(a, b) {
  return a !== undefined && b !== undefined && Buffer.compare(a, b) === 0;
}
const hex = (b) => Buffer.from(b).toString('hex');
const seconds = (t0) => (performance.now() - t0) / 1000;
const peakRssMib = () => Math.round(process.resourceUsage().maxRSS / 1024);

/** An updated value: a SHA-256 chain started from the old value, 512 bytes long. */
function updated(old) {
  const out = Buffer.alloc(VALUE_LEN);
  let block = createHash('sha256').update(old).digest();
  for (let at = 0; at < VALUE_LEN; at += 32) {
    block.copy(out, at);
    block = createHash('sha256').update(block).digest();
  }
  return new Uint8Array(out);
}

/** `count` workload indexes, as the peers pick them. */
function picks(seed, count, n) {
  const next = splitmix(seed);
  return Array.from({ length: count }, () => Number(next() % BigInt(n)));
}

/**
 * The workload's entries at `indexes`, as views on one buffer: the reads'
 * expected values without a pair of arrays each, which with the garbage of
 * generating them held about 270 MiB of the read phase's RSS for 100,000
 * entries (about 90 MiB this way).
 */
function expectedEntries(workloadEntry, indexes) {
  const [key, value] = workloadEntry(0n, 0);
  const size = key.length + value.length;
  const all = Buffer.allocUnsafe(indexes.length * size);
  return indexes.map((index, i) => {
    const [k, v] = workloadEntry(0n, index);
    const at = i * size;
    all.set(k, at);
    all.set(v, at + k.length);
    return [all.subarray(at, at + k.length), all.subarray(at + k.length, at + size)];
  });
}

/** A digest of the values of the first 1,000 keys the reads draw: the two imports must agree on it. */
async function sampleDigest(state, n) {
  const { workloadEntry } = await import('../packages/peer/src/workload.ts');
  const keys = picks(1, 1000, n).map((i) => workloadEntry(0n, i)[0]);
  const values = await state.getMany(keys);
  if (values.some((v) => v === undefined)) fail('a key of the workload is missing');
  return hex(createHash('sha256').update(Buffer.concat(values.map((v) => Buffer.from(v)))).digest());
}

/** The entries of a file of the sort's records (`sort-records.node.ts`), as views valid until the next is asked for (what a reader of the CLI's input hands on). */
function* readEntryFile(path) {
  const reader = new RunReader(path, 0, ENTRY_FILE_BUFFER);
  try {
    while (reader.next()) yield [reader.key, reader.value];
  } finally {
    reader.close();
  }
}

// --- child phases: each prints one JSON line ---------------------------------

async function child(phase) {
  const { openState } = await import('@bpavl/store');
  const { verifyExistenceBatch } = await import('@bpavl/wasm');
  const { workloadEntry } = await import('../packages/peer/src/workload.ts');
  const dir = args.dir;
  const n = Number(args.n);
  const cacheBytes = Number(args['cache-mib']) << 20;
  const valueCacheBytes = Number(args['value-cache-mib']) << 20;
  const batchBytes = Number(args['batch-mib']) * 2 ** 20;
  const opened = { cacheBytes, valueCacheBytes, batchBytes, mmapBytes: Number(args['mmap-mib']) * 2 ** 20 };
  const out = {};
  if (phase === 'bulk') {
    const { sortEntries, sortRecords } = await import('@bpavl/store/sort');
    const { packedRoot } = await import('./packed-root.mjs');
    // The input is generated into a file first, and the reference root
    // recomputed from a sort of it, both untimed: on the load's main thread
    // they would hide the sort's worker, which runs beside it.
    const input = args.input ?? `${dir}.input`;
    let t = performance.now();
    if (args.input === undefined || !existsSync(input)) {
      writeRecords(input, (function* () {
        for (let i = 0; i < n; i++) yield workloadEntry(0n, i);
      })());
      out.generate_s = seconds(t);
    }
    const state = await openState({ path: dir, ...opened });
    t = performance.now();
    const reference = packedRoot(n, state.capacity);
    for await (const [key, value] of sortEntries(readEntryFile(input), { dir: tmpdir() })) reference.push(key, value);
    const root = reference.root();
    out.check_s = seconds(t);
    let sortedAt;
    async function* timed(sorted) {
      for await (const entry of sorted) {
        sortedAt ??= performance.now();
        yield entry;
      }
    }
    let shown = 0;
    const onProgress = (k) => {
      if (k - shown >= 1_000_000) process.stderr.write(`  ${(shown = k) / 1e6}M entries loaded\n`);
    };
    const t0 = performance.now();
    const head = await state.bulkLoad(timed(sortRecords(readEntryFile(input), { dir })), { onProgress });
    out.seconds = seconds(t0);
    out.sort_s = (sortedAt - t0) / 1000;
    if (args.input === undefined) rmSync(input);
    if (head.entryCount !== n || hex(root) !== hex(head.root)) fail(`the bulk load's root ${hex(head.root)} (${head.entryCount} entries) is not the recomputed ${hex(root)}`);
    out.sample = await sampleDigest(state, n);
    out.root = hex(head.root);
    out.version = head.version;
    await state.close();
  } else if (phase === 'import') {
    // As `bpavl generate` does: slices of 16,384 entries to putMany, a commit every --batch.
    // Only the store's calls are timed; generating the entries (17 SHA-256 calls each) is not.
    const batch = Number(args.batch);
    const state = await openState({ path: dir, ...opened });
    let storeMs = 0;
    let generateMs = 0;
    let head;
    for (let i = 0; i < n; ) {
      const end = Math.min(n, i + IMPORT_SLICE, (Math.floor(i / batch) + 1) * batch);
      const tg = performance.now();
      const slice = [];
      for (; i < end; i++) slice.push(workloadEntry(0n, i));
      const ts = performance.now();
      generateMs += ts - tg;
      await state.putMany(slice);
      if (i % batch === 0 || i === n) head = await state.commit();
      storeMs += performance.now() - ts;
      if (i % 1_000_000 === 0) process.stderr.write(`  ${i / 1e6}M entries, ${(storeMs / 1000).toFixed(1)} s in the store\n`);
    }
    if (head.entryCount !== n) fail(`the import holds ${head.entryCount} entries, not ${n}`);
    out.sample = await sampleDigest(state, n);
    out.seconds = storeMs / 1000;
    out.generate_s = generateMs / 1000;
    out.root = hex(head.root);
    out.version = head.version;
    await state.close();
  } else if (phase === 'read') {
    // The keys first: drawing 100,000 of them (BigInt arithmetic) took 30–60 ms inside `open_s`.
    const keys = picks(1, Number(args.gets), n);
    const [firstKey, firstValue] = workloadEntry(0n, keys[0]);
    const t0 = performance.now();
    const state = await openState({ path: dir, readOnly: true, ...opened });
    const first = await state.proveExistence(firstKey);
    if (!sameBytes(first.value, firstValue)) fail('the first get');
    const root = state.head().root;
    const [checked] = verifyExistenceBatch(root, [{ key: firstKey, value: first.value, proof: first.proof }]);
    if (checked instanceof Error) fail(`the first proof: ${checked.code}`);
    out.open_s = seconds(t0);
    // The proofs ask the gets' keys again (seed 1 both): one table for both.
    const expected = expectedEntries(workloadEntry, picks(1, Math.max(keys.length, Number(args.proofs)), n));
    const entries = expected.slice(0, keys.length);
    for (const pass of ['cold', 'warm']) {
      const t = performance.now();
      for (const [key, value] of entries) if (!sameBytes(await state.get(key), value)) fail(`a ${pass} get`);
      out[`get_per_s_${pass}`] = Math.round(entries.length / seconds(t));
    }
    const proofKeys = expected.slice(0, Number(args.proofs));
    const t = performance.now();
    // Verified a thousand at a time, so that the proofs held do not count in the phase's RSS.
    let items = [];
    const verify = () => {
      for (const r of verifyExistenceBatch(root, items)) if (r instanceof Error) fail(`a proof: ${r.code}`);
      items = [];
    };
    for (const [key, value] of proofKeys) {
      const p = await state.proveExistence(key);
      if (!sameBytes(p.value, value)) fail('a proved value');
      items.push({ key, value: p.value, proof: p.proof });
      if (items.length === 1000) verify();
    }
    verify();
    out.prove_per_s = Math.round(proofKeys.length / seconds(t));
    const stats = await state.stats();
    out.cache_hits = stats.cacheHits;
    out.cache_misses = stats.cacheMisses;
    out.value_cache_hits = stats.valueCacheHits;
    out.value_cache_misses = stats.valueCacheMisses;
    await state.close();
  } else if (phase === 'read-many') {
    const entries = expectedEntries(workloadEntry, picks(1, Number(args.gets), n));
    const state = await openState({ path: dir, readOnly: true, ...opened });
    for (const pass of ['cold', 'warm']) {
      const t = performance.now();
      for (let at = 0; at < entries.length; at += GET_MANY_BATCH) {
        const batch = entries.slice(at, at + GET_MANY_BATCH);
        const values = await state.getMany(batch.map(([key]) => key));
        batch.forEach(([, value], i) => {
          if (!sameBytes(values[i], value)) fail(`a ${pass} getMany`);
        });
      }
      out[`get_many_per_s_${pass}`] = Math.round(entries.length / seconds(t));
    }
    await state.close();
  } else if (phase === 'update') {
    const versions = Number(args.versions);
    const state = await openState({ path: dir, ...opened });
    const next = splitmix(2);
    const commitSeconds = [];
    for (let v = 0; v < versions; v++) {
      const writes = new Map();
      for (let u = 0; u < UPDATES_PER_VERSION; u++) {
        const i = Number(next() % BigInt(n));
        const [key] = workloadEntry(0n, i);
        const old = writes.get(i)?.[1] ?? (await state.get(key));
        if (old === undefined) fail(`key ${i} is missing before its update`);
        writes.set(i, [key, updated(old)]);
      }
      const t = performance.now();
      await state.putMany(writes.values());
      const head = await state.commit();
      commitSeconds.push(seconds(t));
      const sample = [...writes.values()].slice(0, 200);
      const items = [];
      for (const [key, value] of sample) {
        const p = await state.proveExistence(key);
        if (!sameBytes(p.value, value)) fail(`an updated value at version ${head.version}`);
        items.push({ key, value, proof: p.proof });
      }
      for (const r of verifyExistenceBatch(head.root, items)) if (r instanceof Error) fail(`an update's proof: ${r.code}`);
      if ((v + 1) % 10 === 0) process.stderr.write(`  ${v + 1} versions of 10k updates, last commit ${commitSeconds.at(-1).toFixed(2)} s\n`);
    }
    const sorted = [...commitSeconds].sort((a, b) => a - b);
    out.update10k_commit_s = sorted[Math.floor(sorted.length / 2)];
    out.update10k_commit_s_max = sorted.at(-1);
    await state.close();
  } else if (phase === 'prune') {
    const state = await openState({ path: dir, ...opened });
    const t = performance.now();
    await state.prune({ keepLast: Number(args.keep) });
    out.prune_s = seconds(t);
    out.disk_unpacked = (await state.stats()).bytesOnDisk;
    const tv = performance.now();
    await state.prune({ keepLast: Number(args.keep), vacuum: true });
    out.prune_vacuum_s = seconds(tv);
    const kept = state.versions();
    if (kept.length !== Number(args.keep)) fail(`prune kept ${kept.length} versions`);
    for (const i of picks(3, 100, n)) {
      const [key] = workloadEntry(0n, i);
      const { value } = await state.proveExistence(key, { version: kept[0].version });
      if (value.length !== VALUE_LEN) fail('a read of the oldest kept version');
    }
    await state.close();
  } else throw new Error(`unknown phase ${phase}`);
  out.peak_rss_mib = peakRssMib();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

// --- driver ------------------------------------------------------------------

async function phase(name, dir, n, extra = []) {
  const argv = [new URL(import.meta.url).pathname, '--child', name, '--dir', dir, '--n', String(n), '--cache-mib', args['cache-mib'], '--value-cache-mib', args['value-cache-mib'], '--batch-mib', args['batch-mib'], '--mmap-mib', args['mmap-mib'], ...extra];
  const { code, signal, stdout, parts } = await runSampled(argv, name === 'bulk' ? { asCli: 'import' } : {});
  if (code !== 0) throw new Error(`phase ${name} at n = ${n} failed (exit ${code ?? signal})`);
  // The child's own peak (getrusage), and the largest anonymous and file-backed parts sampled from /proc.
  return { ...JSON.parse(stdout.trim().split('\n').at(-1)), anon_mib: Math.round(parts.anon), file_mib: Math.round(parts.file) };
}

async function run(n) {
  const base = mkdtempSync(join(tmpdir(), 'bpavl-bench-store-'));
  const bulkDir = join(base, 'bulk');
  const batchedDir = join(base, 'every10k');
  try {
    process.stderr.write(`n = ${n}: bulk import\n`);
    const bulk = await phase('bulk', bulkDir, n);
    process.stderr.write(`n = ${n}: import with a commit every 10k\n`);
    const batched = await phase('import', batchedDir, n, ['--batch', '10000']);
    if (batched.sample !== bulk.sample) fail('the two imports disagree on the values of the sampled keys');
    rmSync(batchedDir, { recursive: true, force: true });
    const disk = diskBytes(bulkDir);
    dropCache(bulkDir);
    process.stderr.write(`n = ${n}: reads\n`);
    const reads = await phase('read', bulkDir, n, ['--gets', args.gets, '--proofs', args.proofs]);
    dropCache(bulkDir);
    const batchedReads = await phase('read-many', bulkDir, n, ['--gets', args.gets]);
    process.stderr.write(`n = ${n}: ${args.versions} versions of 10k updates\n`);
    const updates = await phase('update', bulkDir, n, ['--versions', args.versions]);
    const pruneDiskBefore = diskBytes(bulkDir);
    const prune = await phase('prune', bulkDir, n, ['--keep', args.keep]);
    const pruneDiskAfter = diskBytes(bulkDir);
    return {
      n,
      root: bulk.root,
      bulk_import_s: round(bulk.seconds),
      bulk_sort_s: round(bulk.sort_s),
      bulk_generate_s: round(bulk.generate_s),
      bulk_check_s: round(bulk.check_s),
      import_commit_every_10k_s: round(batched.seconds),
      disk_bytes_per_entry: Math.round(disk / n),
      open_s: round(reads.open_s, 3),
      get_per_s_cold: reads.get_per_s_cold,
      get_per_s_warm: reads.get_per_s_warm,
      prove_per_s: reads.prove_per_s,
      get_many_per_s_cold: batchedReads.get_many_per_s_cold,
      get_many_per_s_warm: batchedReads.get_many_per_s_warm,
      update10k_commit_s: round(updates.update10k_commit_s, 3),
      update10k_commit_s_max: round(updates.update10k_commit_s_max, 3),
      prune_s: round(prune.prune_s),
      prune_vacuum_s: round(prune.prune_vacuum_s),
      prune_disk_before: pruneDiskBefore,
      prune_disk_after_unpacked: prune.disk_unpacked,
      prune_disk_after: pruneDiskAfter,
      one_version_disk: disk,
      peak_rss_mib: Math.max(bulk.peak_rss_mib, batched.peak_rss_mib, reads.peak_rss_mib, batchedReads.peak_rss_mib, updates.peak_rss_mib, prune.peak_rss_mib),
      // The bounds the store ran with, so that runs compare.
      cache_mib: Number(args['cache-mib']),
      batch_mib: Number(args['batch-mib']),
      mmap_mib: Number(args['mmap-mib']),
      peak_rss_mib_by_phase: { bulk: bulk.peak_rss_mib, every10k: batched.peak_rss_mib, reads: reads.peak_rss_mib, batchedReads: batchedReads.peak_rss_mib, updates: updates.peak_rss_mib, prune: prune.peak_rss_mib },
      // Of each, the largest anonymous part (heaps, WASM, SQLite's page cache) and file-backed part (SQLite's memory map, the node binary) seen.
      rss_anon_file_mib_by_phase: Object.fromEntries(
        Object.entries({ bulk, every10k: batched, reads, batchedReads, updates, prune })
          .filter(([, p]) => p !== undefined)
          .map(([name, p]) => [name, [p.anon_mib, p.file_mib]]),
      ),
    };
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

const round = (x, digits = 2) => Number(x.toFixed(digits));

if (args.child) await child(args.child);
else {
  execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/storage'], { stdio: ['ignore', process.stderr, process.stderr] });
  const runs = [];
  for (const n of args.n.split(',').map(Number)) {
    const r = await run(n);
    runs.push(r);
    process.stderr.write(`${JSON.stringify(r)}\n`);
  }
  process.stderr.write(`targets at 10M: ${JSON.stringify(TARGETS_10M)}\n`);
  process.stdout.write(`${JSON.stringify({ runs })}\n`);
}
