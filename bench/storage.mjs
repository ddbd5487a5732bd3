#!/usr/bin/env node
// `npm run bench:storage`: the candidate Node storage engines under the state
// store's workload shapes, to choose the backend of @bpavl/storage/node by
// measurement (docs/storage.md records the figures and the choice). A
// benchmark, not a test: it prints the targets next to the figures and exits
// 0 when they are missed, 1 when a value reads back wrong.
//
//   npm run bench:storage [-- --only sqlite-64k-full-mmap-cache64,port-node,lmdb-flushed --bulk-mb 560 --rounds 3]
//
// better-sqlite3 and lmdb-js are not dependencies of the repository: without
// `npm install --no-save lmdb@3.5.6 better-sqlite3@13.2.0` they are skipped.
//
// Each candidate runs in its own child process, on its own directory under
// /tmp/backends-bench-*, deleted afterwards:
// 1. bulk: 140,000-byte blobs (a chunk of the standard workload at C = 256)
//    under 32-byte keys, written in transactions of --txn-mb (as an import or
//    a state sync writes them); MB/s up to the last durable commit;
// 2. base: --base-small records of 600 B and a tenth as many of 8,192 B, in
//    transactions of 20,000, so that updates land in populated tables;
// 3. update: 10,000 records of 600 B plus 9,000 of 8,192 B (an entry and a
//    chunk's entry-hash list, the shape of 10,000 random updates at 10M
//    entries) in one durable commit, --rounds times, each with new keys;
//    with the bytes the process had written to the device per byte stored
//    (/proc/self/io write_bytes: journal, pages rewritten, checkpoints);
// 4. reads, after closing and dropping the files from the page cache
//    (`dd iflag=nocache`, this process's files only): --reads random point
//    reads of each small size and every blob in a random order, cold (first
//    pass after reopening) then warm;
// 5. disk: bytes of every file of the database over the bytes stored.
// Every value is read back and compared (the reads cover every bulk blob);
// a mismatch fails the run.
//
// --browser: instead, IndexedDB (through @bpavl/storage/indexeddb) against
// OPFS (a synchronous access handle in a dedicated worker, appending to one
// file) in headless Chromium, three runs of bench/pages/storage:
// 400 blobs in transactions of 64, the update commit, every blob read back.
//
// Progress on stderr; one line per candidate, then one JSON line last, on stdout:
// {"candidates": [{name, bulk_mb_s, update_commit_s: [..], get_per_s_cold: {..}, ...}]}
// or, with --browser, {"browser": [{indexeddb: {bulk_mb_s, update_commit_s, blob_reads_per_s}, opfs: {…}}, …]}
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { diskBytes, dropCache, splitmix } from './files.mjs';

const { values: args } = parseArgs({
  options: {
    'bulk-mb': { type: 'string', default: '560' },
    'txn-mb': { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    reads: { type: 'string', default: '3000' },
    'base-small': { type: 'string', default: '200000' },
    only: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    browser: { type: 'boolean', default: false },
    child: { type: 'string' },
  },
});

const BLOB = 140_000;
const SMALL = 600;
const LIST = 8_192;
const UPDATE_SMALL = 10_000;
const UPDATE_LISTS = 9_000;
const TARGETS = { bulk_mb_s: 150, update_commit_s: 0.5 };

const bulkCount = Math.max(1, Math.round((Number(args['bulk-mb']) * 1e6) / BLOB));
const txnBlobs = Math.max(1, Math.round((Number(args['txn-mb']) * 1e6) / BLOB));
const rounds = Number(args.rounds);
const baseSmall = Number(args['base-small']);
const reads = Number(args.reads);
const log = (s) => console.error(`bench:storage: ${s}`);

// ---------------------------------------------------------------- candidates

/** node:sqlite with the given pragmas; one table `kv(k BLOB PRIMARY KEY, v BLOB)`. */
function sqlite({ pageSize, synchronous, withoutRowid = false, mmap = 0, cacheMiB = 2 }) {
  return async (dir) => {
    const { DatabaseSync } = await import('node:sqlite');
    return sqliteDriver(() => new DatabaseSync(join(dir, 'db.sqlite')), { pageSize, synchronous, withoutRowid, mmap, cacheMiB });
  };
}

/** better-sqlite3, same schema and pragmas (skipped when it is not installed). */
function betterSqlite(options) {
  return async (dir) => {
    const Database = createRequire(import.meta.url)('better-sqlite3');
    return sqliteDriver(() => new Database(join(dir, 'db.sqlite')), options);
  };
}

function sqliteDriver(openDb, { pageSize, synchronous, withoutRowid, mmap, cacheMiB = 2 }) {
  let db;
  let put;
  let get;
  const open = () => {
    db = openDb();
    db.exec(`PRAGMA page_size = ${pageSize}`);
    db.exec('PRAGMA journal_mode = WAL');
    db.exec(`PRAGMA synchronous = ${synchronous}`);
    db.exec(`PRAGMA mmap_size = ${mmap}`);
    db.exec(`PRAGMA cache_size = -${cacheMiB * 1024}`);
    db.exec(`CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL)${withoutRowid ? ' WITHOUT ROWID' : ''}`);
    put = db.prepare('INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)');
    get = db.prepare('SELECT v FROM kv WHERE k = ?');
  };
  open();
  return {
    write(records) {
      db.exec('BEGIN');
      for (const [k, v] of records) put.run(k, v);
      db.exec('COMMIT');
    },
    get: (k) => get.get(k)?.v,
    open,
    close() {
      db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
      db.close();
    },
  };
}

/**
 * lmdb-js: binary keys and values, no compression. Its default
 * `overlappingSync` returns from a commit before the fsync; `durable` waits
 * for `db.flushed` as well, the equivalent of SQLite's synchronous = FULL.
 */
function lmdb({ durable }) {
  return async (dir) => {
    const { open: openLmdb } = await import('lmdb');
    let db;
    const open = () => {
      db = openLmdb({ path: join(dir, 'db.lmdb'), keyEncoding: 'binary', encoding: 'binary', compression: false });
    };
    open();
    return {
      async write(records) {
        db.transactionSync(() => {
          for (const [k, v] of records) db.putSync(k, v);
        });
        if (durable) await db.flushed;
      },
      get: (k) => db.getBinary(k),
      open,
      close: () => db.close(),
    };
  };
}

/** The chosen backend through the port, as the store uses it (@bpavl/storage/node, built first). */
async function portNode(dir) {
  const { openNodeBackend } = await import('@bpavl/storage/node');
  let backend;
  const open = async () => {
    backend = await openNodeBackend({ path: dir, tables: ['kv'] });
  };
  await open();
  return {
    open,
    write: (records) => backend.write({ puts: records.map(([k, v]) => ['kv', k, v]) }),
    get: (k) => backend.get('kv', k),
    close: () => backend.close(),
  };
}

const CANDIDATES = {
  'sqlite-4k-normal': sqlite({ pageSize: 4096, synchronous: 'NORMAL' }),
  'sqlite-4k-full': sqlite({ pageSize: 4096, synchronous: 'FULL' }),
  'sqlite-16k-full': sqlite({ pageSize: 16384, synchronous: 'FULL' }),
  'sqlite-64k-normal': sqlite({ pageSize: 65536, synchronous: 'NORMAL' }),
  'sqlite-64k-full': sqlite({ pageSize: 65536, synchronous: 'FULL' }),
  'sqlite-64k-full-mmap': sqlite({ pageSize: 65536, synchronous: 'FULL', mmap: 1 << 30 }),
  'sqlite-64k-normal-mmap-cache64': sqlite({ pageSize: 65536, synchronous: 'NORMAL', mmap: 1 << 30, cacheMiB: 64 }),
  'sqlite-64k-full-mmap-cache64': sqlite({ pageSize: 65536, synchronous: 'FULL', mmap: 1 << 30, cacheMiB: 64 }),
  'sqlite-4k-full-mmap-cache64': sqlite({ pageSize: 4096, synchronous: 'FULL', mmap: 1 << 30, cacheMiB: 64 }),
  'sqlite-64k-full-norowid': sqlite({ pageSize: 65536, synchronous: 'FULL', withoutRowid: true }),
  'better-sqlite3-64k-full-mmap-cache64': betterSqlite({ pageSize: 65536, synchronous: 'FULL', withoutRowid: false, mmap: 1 << 30, cacheMiB: 64 }),
  'lmdb-flushed': lmdb({ durable: true }),
  'lmdb-committed': lmdb({ durable: false }),
  'port-node': portNode,
};

// ---------------------------------------------------------------- workload

const base = new Uint8Array(BLOB);
for (let i = 0, x = 0x9e3779b9; i < BLOB; i++) base[i] = (x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i) | 0) >>> 24;

/** 32 bytes, as uniformly spread as the store's hash-named records. */
const key = (kind, i) => createHash('sha256').update(`${kind}:${i}`).digest();

/** A value of `size` bytes that names its record, so that a misplaced value is caught. */
function value(kind, i, size, round = 0) {
  const v = Buffer.allocUnsafe(size);
  v.set(base.subarray(0, size));
  v.writeUInt32LE(i, 0);
  v.writeUInt32LE(round, 4);
  v[8] = kind.charCodeAt(0);
  return v;
}

/** 0 … n − 1 in a random order (Fisher–Yates). */
function shuffled(n, next) {
  const order = [...Array(n).keys()];
  for (let i = n - 1; i > 0; i--) {
    const j = Number(next() % BigInt(i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** Bytes this process has caused to be sent to the storage device so far. */
const writtenBytes = () => Number(/write_bytes: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))[1]);

function check(got, want, what) {
  if (!got || !Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(want)) {
    throw new Error(`${what}: read back ${got ? `${got.length} wrong bytes` : 'nothing'}`);
  }
}

const seconds = (t0) => (performance.now() - t0) / 1000;

async function runCandidate(name) {
  const dir = mkdtempSync('/tmp/backends-bench-');
  try {
    const db = await CANDIDATES[name](dir);
    const result = { name };

    // 1. Bulk.
    const written0 = writtenBytes();
    let t0 = performance.now();
    for (let first = 0; first < bulkCount; first += txnBlobs) {
      const records = [];
      for (let i = first; i < Math.min(bulkCount, first + txnBlobs); i++) records.push([key('b', i), value('b', i, BLOB)]);
      await db.write(records);
    }
    result.bulk_mb_s = round((bulkCount * BLOB) / 1e6 / seconds(t0));
    result.bulk_written_per_byte = round((writtenBytes() - written0) / (bulkCount * BLOB), 2);

    // 2. Base records, in the tables the updates go to.
    const baseLists = Math.round(baseSmall / 10);
    t0 = performance.now();
    for (let first = 0; first < baseSmall; first += 20_000) {
      const records = [];
      for (let i = first; i < Math.min(baseSmall, first + 20_000); i++) {
        records.push([key('s', i), value('s', i, SMALL)]);
        if (i % 10 === 0) records.push([key('l', i / 10), value('l', i / 10, LIST)]);
      }
      await db.write(records);
    }
    result.base_mb_s = round((baseSmall * SMALL + baseLists * LIST) / 1e6 / seconds(t0));

    // 3. Updates: new records each round, one commit.
    result.update_commit_s = [];
    result.update_written_per_byte = [];
    const updateBytes = UPDATE_SMALL * SMALL + UPDATE_LISTS * LIST;
    for (let r = 0; r < rounds; r++) {
      const records = [];
      for (let i = 0; i < UPDATE_SMALL; i++) records.push([key(`s${r}`, i), value('s', i, SMALL, r)]);
      for (let i = 0; i < UPDATE_LISTS; i++) records.push([key(`l${r}`, i), value('l', i, LIST, r)]);
      const before = writtenBytes();
      t0 = performance.now();
      await db.write(records);
      result.update_commit_s.push(round(seconds(t0), 3));
      result.update_written_per_byte.push(round((writtenBytes() - before) / updateBytes, 2));
    }
    const stored = bulkCount * BLOB + baseSmall * SMALL + baseLists * LIST + rounds * updateBytes;

    // 4. Reads, cold then warm. Every bulk blob is read in each pass.
    await db.close();
    dropCache(dir);
    t0 = performance.now();
    await db.open();
    result.open_s = round(seconds(t0), 4);
    const pick = splitmix(1);
    const sample = (kind, count, n, size, r) =>
      Array.from({ length: count }, () => {
        const i = Number(pick() % BigInt(n));
        return [key(kind, i), value(kind[0], i, size, r)];
      });
    const sets = {
      blob: shuffled(bulkCount, pick).map((i) => [key('b', i), value('b', i, BLOB)]),
      list: sample('l', reads, baseLists, LIST, 0),
      small: sample('s', reads, baseSmall, SMALL, 0),
    };
    for (const pass of ['cold', 'warm']) {
      const perS = {};
      for (const [kind, records] of Object.entries(sets)) {
        t0 = performance.now();
        for (const [k, v] of records) check(await db.get(k), v, `${name} ${kind}`);
        perS[kind] = Math.round(records.length / seconds(t0));
      }
      perS.blob_mb_s = round((perS.blob * BLOB) / 1e6);
      result[`get_per_s_${pass}`] = perS;
    }
    await db.close();
    result.disk_per_stored_byte = round(diskBytes(dir) / stored, 3);
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x, digits = 1) => Number(x.toFixed(digits));

// ---------------------------------------------------------------- driver

/** IndexedDB against OPFS in headless Chromium (bench/pages/storage), `runs` times. */
async function benchBrowser(runs) {
  const { chromium } = await import('@playwright/test');
  const { buildPage } = await import('../tests/browser/build.mjs');
  const { launchOptions } = await import('../tests/browser/chromium.mjs');
  const { serve } = await import('../tests/browser/serve.mjs');
  const outDir = mkdtempSync('/tmp/backends-browser-bench-');
  const browser = await chromium.launch(launchOptions);
  try {
    await buildPage(new URL('./pages/storage/', import.meta.url), outDir);
    const server = await serve(outDir);
    const results = [];
    for (let i = 0; i < runs; i++) {
      const page = await (await browser.newContext()).newPage();
      await page.goto(server.url);
      await page.waitForFunction(() => document.querySelector('#status')?.dataset.state === 'done', undefined, { timeout: 120_000 });
      const r = await page.evaluate(() => window.__storageBench);
      if (r.error) throw new Error(r.error);
      const fmt = (e) => `bulk ${e.bulk_mb_s.toFixed(0)} MB/s, update+commit ${e.update_commit_s.toFixed(2)} s, ${e.blob_reads_per_s.toFixed(0)} blob reads/s`;
      console.log(`chromium run ${i + 1}: IndexedDB ${fmt(r.indexeddb)}; OPFS ${fmt(r.opfs)}`);
      results.push(r);
      await page.context().close();
    }
    await server.close();
    return results;
  } finally {
    await browser.close();
    rmSync(outDir, { recursive: true, force: true });
  }
}

if (args.browser) {
  if (!args['no-build']) execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/storage'], { stdio: ['ignore', process.stderr, process.stderr] });
  console.log(JSON.stringify({ browser: await benchBrowser(3) }));
} else if (args.child) {
  process.stdout.write(`${JSON.stringify(await runCandidate(args.child))}\n`);
} else {
  const names = args.only ? args.only.split(',') : Object.keys(CANDIDATES);
  if (names.includes('port-node') && !args['no-build']) {
    log('building @bpavl/storage');
    execFileSync('npm', ['run', '--silent', 'build', '-w', '@bpavl/storage'], { stdio: ['ignore', process.stderr, process.stderr] });
  }
  log(`${bulkCount} blobs of ${BLOB} B in transactions of ${txnBlobs}; ${rounds} update commits; ${reads} reads of each size`);
  const results = [];
  let failed = false;
  for (const name of names) {
    if (!CANDIDATES[name]) throw new RangeError(`unknown candidate ${name}; known: ${Object.keys(CANDIDATES).join(', ')}`);
    log(`${name} ...`);
    const child = spawnSync(process.execPath, [process.argv[1], ...process.argv.slice(2), '--child', name], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 1 << 20,
    });
    if (child.status !== 0) {
      const why = child.stderr.trim().split('\n').find((l) => /Error/.test(l)) ?? `exit ${child.status}`;
      if (/Cannot find module|ERR_MODULE_NOT_FOUND|Could not locate the bindings/.test(child.stderr)) {
        log(`${name}: skipped (not installed: ${why})`);
        results.push({ name, skipped: why });
        continue;
      }
      process.stderr.write(child.stderr);
      failed = true;
      results.push({ name, error: why });
      continue;
    }
    const r = JSON.parse(child.stdout.trim().split('\n').at(-1));
    results.push(r);
    console.log(
      `${name.padEnd(26)} bulk ${r.bulk_mb_s} MB/s (≥ ${TARGETS.bulk_mb_s})  update+commit ${r.update_commit_s.join('/')} s (≤ ${TARGETS.update_commit_s}), written ×${r.update_written_per_byte.join('/')}` +
        `  cold get/s ${r.get_per_s_cold.small}/${r.get_per_s_cold.list}/${r.get_per_s_cold.blob} (600 B/8 KB/140 KB)` +
        `  warm ${r.get_per_s_warm.small}/${r.get_per_s_warm.list}/${r.get_per_s_warm.blob}  disk ×${r.disk_per_stored_byte}`,
    );
  }
  console.log(JSON.stringify({ bulk_blobs: bulkCount, blob_bytes: BLOB, txn_blobs: txnBlobs, targets: TARGETS, candidates: results }));
  process.exitCode = failed ? 1 : 0;
}
