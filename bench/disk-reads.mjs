#!/usr/bin/env node
// `npm run bench:disk-reads`: how many random reads a second this machine's
// disk gives one process, by how many are in flight. The store's cold reads
// at 10M are random reads of a file much larger than memory, one at a time
// (node:sqlite is synchronous); this says what reading several at once
// would give (docs/storage.md, "Random reads in flight"). A benchmark, not
// a test.
//
//   npm run bench:disk-reads [-- --mib 6144 --reads 2000 --size 16384 --in-flight 1,4,16,64 --file PATH]
//
// Writes --mib of random bytes to a file under /tmp (unless --file names
// one), evicts it from the page cache before each run (posix_fadvise
// DONTNEED through GNU dd), then reads --reads blocks of --size bytes at
// random 4 KiB-aligned offsets (a new seed each run, so no run reads what
// another cached), with k reads in flight through libuv's thread pool
// (UV_THREADPOOL_SIZE 64). Every read must return --size bytes. Deletes
// the file it wrote. The last line on stdout is JSON:
// {"reads_per_s": {"1": …, "4": …, …}, "size": …, "file_mib": …}
//
// With --store DIR (a state directory, e.g. made by `node bench/store.mjs
// --child bulk`), it reads records of --table (entries or chunks) by key
// instead, as the Node backend does: --reads keys picked at random rowids
// (seeded) and sorted, the directory's files evicted before each run, then
// read on k connections at once (1: this thread, in one transaction; k >
// 1: k worker threads with a read-only connection each, a slice of the
// keys each; new keys each run, so that none is read from the cache).
// Every key picked must be found. JSON: {"records_per_s": {"1": …, …},
// "table": …, "store": …}
import { execFileSync, spawnSync } from 'node:child_process';
import { createWriteStream, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'node:fs/promises';
import { randomFillSync } from 'node:crypto';
import { parseArgs } from 'node:util';
import { splitmix } from './files.mjs';

const { values: args } = parseArgs({
  options: {
    mib: { type: 'string', default: '6144' },
    reads: { type: 'string', default: '2000' },
    size: { type: 'string', default: '16384' },
    'in-flight': { type: 'string', default: '1,4,16,64' },
    file: { type: 'string' },
    store: { type: 'string' },
    table: { type: 'string', default: 'entries' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write('usage: node bench/disk-reads.mjs [--mib 6144] [--reads 2000] [--size 16384] [--in-flight 1,4,16,64] [--file PATH | --store DIR [--table entries|chunks]]\n');
  process.exit(0);
}
const reads = Number(args.reads);
const size = Number(args.size);
const levels = args['in-flight'].split(',').map(Number);
const log = (s) => process.stderr.write(`bench:disk-reads: ${s}\n`);

if (args.store !== undefined) {
  await readRecords(args.store, args.table);
  process.exit(0);
}
if (process.env.UV_THREADPOOL_SIZE !== '64') {
  // The file reads go through libuv's pool, whose size is read once, at its first use: run again with it set.
  const again = spawnSync(process.execPath, process.argv.slice(1), { stdio: 'inherit', env: { ...process.env, UV_THREADPOOL_SIZE: '64' } });
  process.exit(again.status ?? 1);
}

const file = args.file ?? `/tmp/bench-disk-reads-${process.pid}.bin`;
if (args.file === undefined) {
  log(`writing ${args.mib} MiB of random bytes to ${file}`);
  const out = createWriteStream(file);
  const block = Buffer.alloc(8 << 20);
  for (let written = 0; written < Number(args.mib) * 2 ** 20; written += block.length) {
    randomFillSync(block);
    if (!out.write(block)) await new Promise((resolve) => out.once('drain', resolve));
  }
  await new Promise((resolve, reject) => out.end((e) => (e ? reject(e) : resolve())));
  execFileSync('sync');
}
const bytes = statSync(file).size;
if (bytes < 64 * size) throw new Error(`${file} holds ${bytes} bytes: too few to read at random`);

/** Reads `reads` random blocks with `inFlight` at a time; the reads a second. */
async function run(inFlight, seed) {
  execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
  const next = splitmix(seed);
  const offsets = Array.from({ length: reads }, () => Number(next() % BigInt(Math.floor((bytes - size) / 4096))) * 4096);
  const fh = await open(file, 'r');
  let at = 0;
  const t0 = performance.now();
  const reader = async () => {
    const buf = Buffer.alloc(size);
    while (at < offsets.length) {
      const { bytesRead } = await fh.read(buf, 0, size, offsets[at++]);
      if (bytesRead !== size) throw new Error(`a read returned ${bytesRead} bytes, not ${size}`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, reader));
  const seconds = (performance.now() - t0) / 1000;
  await fh.close();
  return Math.round(reads / seconds);
}

try {
  const perS = {};
  let seed = 1;
  for (const k of levels) {
    perS[k] = await run(k, seed++);
    log(`${k} in flight: ${perS[k].toLocaleString('en-US')} reads of ${size} bytes a second`);
  }
  process.stdout.write(`${JSON.stringify({ reads_per_s: perS, size, file_mib: Math.round(bytes / 2 ** 20) })}\n`);
} finally {
  if (args.file === undefined) rmSync(file, { force: true });
}

/** The --store mode: records read by key, on one connection or on several in worker threads. */
async function readRecords(dir, table) {
  const { DatabaseSync } = await import('node:sqlite');
  const { Worker } = await import('node:worker_threads');
  const file = join(dir, 'data.sqlite');
  const picker = new DatabaseSync(file, { readOnly: true });
  const max = picker.prepare(`SELECT max(rowid) AS m FROM "${table}"`).get().m;
  const atRowid = picker.prepare(`SELECT k FROM "${table}" WHERE rowid >= ? LIMIT 1`);
  const keysOf = (seed) => {
    const next = splitmix(seed);
    return Array.from({ length: reads }, () => atRowid.get(1 + Number(next() % BigInt(max))).k).sort(Buffer.compare);
  };
  // A worker's connection reads its slice in one transaction, as the backend's getMany does.
  const WORKER = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(workerData.file, { readOnly: true, timeout: 5000 });
    const select = db.prepare('SELECT v FROM "' + workerData.table + '" WHERE k = ?');
    parentPort.on('message', (keys) => {
      db.exec('BEGIN');
      const values = keys.map((k) => select.get(k)?.v);
      db.exec('COMMIT');
      parentPort.postMessage(values);
    });`;
  const perS = {};
  let seed = 1;
  for (const k of levels) {
    const keys = keysOf(seed++);
    for (const f of readdirSync(dir)) execFileSync('dd', [`if=${join(dir, f)}`, 'iflag=nocache', 'count=0', 'status=none']);
    let values;
    let seconds;
    if (k === 1) {
      const db = new DatabaseSync(file, { readOnly: true });
      const select = db.prepare(`SELECT v FROM "${table}" WHERE k = ?`);
      const t0 = performance.now();
      db.exec('BEGIN');
      values = keys.map((key) => select.get(key)?.v);
      db.exec('COMMIT');
      seconds = (performance.now() - t0) / 1000;
      db.close();
    } else {
      const pool = Array.from({ length: k }, () => new Worker(WORKER, { eval: true, workerData: { file, table } }));
      await Promise.all(pool.map((w) => new Promise((resolve) => w.once('online', resolve))));
      const per = Math.ceil(keys.length / k);
      const t0 = performance.now();
      const parts = await Promise.all(pool.map((w, i) => new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
        w.postMessage(keys.slice(i * per, (i + 1) * per));
      })));
      seconds = (performance.now() - t0) / 1000;
      values = parts.flat();
      await Promise.all(pool.map((w) => w.terminate()));
    }
    if (values.length !== keys.length || values.some((v) => v === undefined)) throw new Error('a record picked was not found');
    const bytes = values.reduce((sum, v) => sum + v.length, 0);
    perS[k] = Math.round(keys.length / seconds);
    log(`${table}, ${k} connection${k === 1 ? '' : 's'}: ${perS[k].toLocaleString('en-US')} records a second (${(bytes / keys.length).toFixed(0)} bytes each)`);
  }
  picker.close();
  process.stdout.write(`${JSON.stringify({ records_per_s: perS, table, store: dir })}\n`);
}
