#!/usr/bin/env node
// How the entry records' keys shape a sync's writes at scale (docs/storage.md,
// "Entry record keys at scale"). Raw node:sqlite with the Node backend's
// settings, no store: N entry records of 513 bytes written as a sync writes
// them, a chunk of 177 consecutive keys at a time, chunks in random order,
// in transactions of about 16 MiB, each chunk with an 8 KB chunk record.
// `--keys hash` keys each record as the store does today, u64be(birth) ‖
// entry hash. `--keys key-prefix` puts the first 8 bytes of the entry's key
// before 24 bytes of its hash, so that a chunk's records sit together.
//
//   node bench/entry-keys.mjs --keys hash|key-prefix [--n 4000000]
//
// The database lives under /tmp and is deleted afterwards. The row counts are
// checked. The last line is JSON: seconds, GB the process wrote (WAL and
// checkpoints, from /proc/self/io) and disk bytes per entry.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { keys: { type: 'string' }, n: { type: 'string', default: '4000000' } } });
if (args.keys !== 'hash' && args.keys !== 'key-prefix') {
  process.stderr.write('usage: node bench/entry-keys.mjs --keys hash|key-prefix [--n 4000000]\n');
  process.exit(2);
}
const n = Number(args.n);
const PER_CHUNK = 177; // the standard workload's chunks at 1M: 1,000,000 / 5,665
const TX_BYTES = 16 << 20;

const dir = mkdtempSync(join(tmpdir(), 'bench-entry-keys-'));
try {
  const db = new DatabaseSync(join(dir, 'data.sqlite'));
  db.exec('PRAGMA page_size = 65536; PRAGMA auto_vacuum = INCREMENTAL; PRAGMA cache_size = -65536');
  db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA journal_size_limit = ${64 << 20}`);
  for (const t of ['entries', 'chunks']) db.exec(`CREATE TABLE "${t}" (k BLOB PRIMARY KEY, v BLOB NOT NULL)`);
  const putEntry = db.prepare('INSERT INTO entries (k, v) VALUES (?, ?)');
  const putChunk = db.prepare('INSERT INTO chunks (k, v) VALUES (?, ?)');

  const keys = Array.from({ length: n }, () => randomBytes(32)).sort(Buffer.compare);
  const chunks = [];
  for (let i = 0; i < n; i += PER_CHUNK) chunks.push(keys.slice(i, i + PER_CHUNK));
  for (let i = chunks.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [chunks[i], chunks[j]] = [chunks[j], chunks[i]];
  }
  const birth = Buffer.alloc(8);
  birth.writeBigUInt64BE(1n);
  const value = randomBytes(513);
  const chunkRecord = randomBytes(8000);
  const recordKey = args.keys === 'hash' ? (key, hash) => Buffer.concat([birth, hash]) : (key, hash) => Buffer.concat([birth, key.subarray(0, 8), hash.subarray(0, 24)]);

  const written = () => Number(/write_bytes: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))[1]);
  const before = written();
  const t0 = performance.now();
  let pending = 0;
  db.exec('BEGIN');
  for (const chunk of chunks) {
    for (const key of chunk) putEntry.run(recordKey(key, randomBytes(32)), value);
    putChunk.run(Buffer.concat([birth, randomBytes(32)]), chunkRecord);
    pending += chunk.length * (40 + value.length) + chunkRecord.length;
    if (pending >= TX_BYTES) {
      db.exec('COMMIT; BEGIN');
      pending = 0;
    }
  }
  db.exec('COMMIT');
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  const seconds = (performance.now() - t0) / 1000;
  const gb = (written() - before) / 1e9;
  const count = (t) => db.prepare(`SELECT count(*) AS c FROM ${t}`).get().c;
  if (count('entries') !== n || count('chunks') !== chunks.length) throw new Error('rows lost');
  db.close();
  const bytesPerEntry = statSync(join(dir, 'data.sqlite')).size / n;
  process.stdout.write(`${JSON.stringify({ keys: args.keys, n, seconds: Number(seconds.toFixed(2)), written_gb: Number(gb.toFixed(2)), disk_bytes_per_entry: Math.round(bytesPerEntry) })}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
