// The root of a bulk load (spec/store-format.md, "Bulk load") recomputed
// from its sorted entries with @bpavl/light-client's TypeScript hashing, not
// the core's: the check of `bench:store`'s bulk phase. It holds one chunk's
// leaves and a hash and two counts per chunk.
import { chunkHashInto, emptyRoot, entryHashInto, innerHashInPlace, rootHash } from '../packages/light-client/dist/hash.js';
import { chunkRootInPlace } from '../packages/light-client/dist/inchunk.js';

const HASH_LEN = 32;

/**
 * The chunk sizes of `n` entries at capacity `c`: chunks of the bulk fill
 * f = c − ⌊c/16⌋, but the last of them and the rest one chunk when they fit
 * in `c`, else two halves.
 */
function chunkSizes(n, c) {
  const f = c - Math.floor(c / 16);
  const sizes = new Array(Math.floor(n / f)).fill(f);
  const rest = n % f;
  if (rest > 0 && sizes.length > 0) sizes.splice(-1, 1, ...(f + rest <= c ? [f + rest] : [Math.ceil((f + rest) / 2), Math.floor((f + rest) / 2)]));
  else if (rest > 0) sizes.push(rest);
  return sizes;
}

/** Takes the `n` entries in ascending key order (checked), then gives the root. */
export function packedRoot(n, capacity) {
  const sizes = chunkSizes(n, capacity);
  const chunks = [];
  let leaves = new Uint8Array(capacity * HASH_LEN);
  let inChunk = 0;
  let last;
  let count = 0;
  return {
    push(key, value) {
      if (last !== undefined && Buffer.compare(last, key) >= 0) throw new Error(`packedRoot: entry ${count}: key ${Buffer.from(key).toString('hex')} is not above ${Buffer.from(last).toString('hex')}`);
      if (count === n) throw new Error(`packedRoot: more than ${n} entries`);
      // A copy (a Buffer's slice() is a view): a sort's entries are views of its buffers, refilled under them.
      last = new Uint8Array(key);
      entryHashInto(key, value, leaves, inChunk * HASH_LEN);
      count++;
      if (++inChunk === sizes[chunks.length]) {
        chunkRootInPlace(leaves, inChunk);
        const hash = new Uint8Array(HASH_LEN);
        chunkHashInto(inChunk, leaves, 0, hash, 0);
        chunks.push({ height: 0, chunks: 1, entries: inChunk, hash });
        inChunk = 0;
      }
    },
    root() {
      if (count !== n) throw new Error(`packedRoot: ${count} entries of ${n}`);
      if (n === 0) return emptyRoot(capacity);
      const top = balanced(chunks);
      return rootHash(capacity, top.chunks, top.entries, top.hash);
    },
  };
}

/** The node over `list`, split with the odd chunk on the left. */
function balanced(list) {
  if (list.length === 1) return list[0];
  const mid = Math.ceil(list.length / 2);
  const left = balanced(list.slice(0, mid));
  const right = balanced(list.slice(mid));
  const height = 1 + Math.max(left.height, right.height);
  const [chunks, entries] = [left.chunks + right.chunks, left.entries + right.entries];
  const hash = left.hash.slice();
  innerHashInPlace(height, chunks, entries, hash, right.hash, false);
  return { height, chunks, entries, hash };
}
