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
import { execFileSync, spawnSync } from 'node:child_process';
import { createWriteStream, rmSync, statSync } from 'node:fs';
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
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write('usage: node bench/disk-reads.mjs [--mib 6144] [--reads 2000] [--size 16384] [--in-flight 1,4,16,64] [--file PATH]\n');
  process.exit(0);
}
if (process.env.UV_THREADPOOL_SIZE !== '64') {
  // The pool's size is read once, at its first use: run again with it set.
  const again = spawnSync(process.execPath, process.argv.slice(1), { stdio: 'inherit', env: { ...process.env, UV_THREADPOOL_SIZE: '64' } });
  process.exit(again.status ?? 1);
}
const reads = Number(args.reads);
const size = Number(args.size);
const levels = args['in-flight'].split(',').map(Number);
const log = (s) => process.stderr.write(`bench:disk-reads: ${s}\n`);

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
