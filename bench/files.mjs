// Helpers the storage benchmarks share: the peers' key picker, and the
// size and page-cache state of a database directory.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

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
