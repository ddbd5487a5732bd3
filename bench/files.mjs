// Helpers the storage benchmarks share: the peers' key picker, the size and
// page-cache state of a database directory, and a child run with its memory
// sampled.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { nodeFlagsFor, tunedEnv } from '../packages/peer/bin/tuning.mjs';

/** SplitMix64 as the peers pick random keys: each call returns the next u64 as a bigint. */
export function splitmix(seed) {
  let s = BigInt(seed);
  return () => {
    s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    return z ^ (z >> 31n);
  };
}

/** Bytes of every file under `dir`. */
export function diskBytes(dir) {
  let sum = 0;
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) sum += statSync(join(e.parentPath, e.name)).size;
  }
  return sum;
}

/** Evicts this directory's files from the page cache (posix_fadvise DONTNEED through GNU dd). */
export function dropCache(dir) {
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) execFileSync('dd', [`if=${join(e.parentPath, e.name)}`, 'iflag=nocache', 'count=0', 'status=none']);
  }
}

const running = new Set();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Runs `node ARGV` to its end, stdout collected and stderr passed through,
 * its memory sampled from /proc every 50 ms: `peak` (VmHWM, MiB) and the
 * largest anonymous (heaps, WASM) and file-backed (SQLite's memory map,
 * the node binary) parts seen. `killAfterMs` sends SIGKILL then; `asCli`
 * (a `bpavl` command's name) runs it with the settings the launcher gives
 * that command (packages/peer/bin/tuning.mjs).
 */
export function runSampled(argv, { killAfterMs, asCli } = {}) {
  return new Promise((resolve, reject) => {
    const [flags, env] = asCli !== undefined ? [nodeFlagsFor(asCli), tunedEnv(process.env)] : [[], process.env];
    const child = spawn(process.execPath, [...flags, ...argv], { stdio: ['ignore', 'pipe', 'inherit'], env });
    running.add(child);
    let stdout = '';
    let peak = 0;
    const parts = { anon: 0, file: 0 };
    child.stdout.on('data', (d) => (stdout += d));
    const poll = setInterval(() => {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const kib = (field) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
        peak = Math.max(peak, kib('VmHWM') / 1024);
        parts.anon = Math.max(parts.anon, kib('RssAnon') / 1024);
        parts.file = Math.max(parts.file, kib('RssFile') / 1024);
      } catch {
        // Gone.
      }
    }, 50);
    const killer = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearInterval(poll);
      clearTimeout(killer);
      running.delete(child);
      resolve({ code, signal, stdout, peak, parts });
    });
  });
}
