/**
 * `RANGE` answers that fit the response limit (`spec/wire.md`, "Server
 * limits"). A valid `RANGE` whose proof would exceed the limit is answered
 * with the proof of the longest prefix of its results that fits: an
 * incomplete range proof, whose successor key is where the client resumes.
 * The proof is never built whole first: a probe of 256 results measures the
 * bytes per result, one attempt is sized from it (the whole `limit` if it
 * should fit), and only an attempt that still comes out too big is followed
 * by a smaller one, so no attempt is much bigger than the limit.
 * @module
 */

import type { ServedTree, StoredTree } from './source.ts';

/** Results of the first attempt when `limit` is bigger. */
export const RANGE_PROBE_RESULTS = 256;

/** Attempts at most (a probe, a fit, then corrections for uneven entry sizes). */
const MAX_ATTEMPTS = 6;

/** Aim this far below the limit, so that uneven entry sizes rarely need another attempt. */
const HEADROOM = 0.9;

/**
 * The proof of `RANGE(start, end, limit)` if it is at most `maxBytes`, else
 * the proof of `RANGE(start, end, k)` for the largest `k < limit` found that
 * fits. Undefined if not even one result fits (a key and value are far
 * smaller than the response limit, so only a tiny `maxBytes` gets there).
 *
 * @example
 * ```ts
 * const proof = fittingRangeProof(snapshot, new Uint8Array(0), undefined, 65536, MAX_RESPONSE_BYTES - 11);
 * ```
 */
export function fittingRangeProof(
  tree: ServedTree,
  start: Uint8Array,
  end: Uint8Array | undefined,
  limit: number,
  maxBytes: number,
): Uint8Array | undefined {
  const attempts = fittingAttempts(limit, maxBytes);
  let next = attempts.next();
  while (!next.done) next = attempts.next(tree.proveRange(start, end, next.value));
  return next.value;
}

/** `fittingRangeProof` for a version read from storage. */
export async function fittingStoredRangeProof(
  tree: StoredTree,
  start: Uint8Array,
  end: Uint8Array | undefined,
  limit: number,
  maxBytes: number,
): Promise<Uint8Array | undefined> {
  const attempts = fittingAttempts(limit, maxBytes);
  let next = attempts.next();
  while (!next.done) next = attempts.next(await tree.proveRange(start, end, next.value));
  return next.value;
}

/** The attempts: yields a result count, is sent that attempt's proof, returns the answer. */
function* fittingAttempts(limit: number, maxBytes: number): Generator<number, Uint8Array | undefined, Uint8Array> {
  let results = Math.min(limit, RANGE_PROBE_RESULTS);
  let probing = results < limit;
  let best: { proof: Uint8Array; results: number } | undefined;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const proof = yield results;
    if (proof.length <= maxBytes) {
      // Fits: done, unless it was the probe; then one attempt sized from it.
      if (results === limit || !probing) return proof;
      probing = false;
      best = { proof, results };
      const fit = Math.floor((results * maxBytes) / proof.length);
      results = fit >= limit ? limit : Math.max(results, Math.floor(fit * HEADROOM));
      if (results === best.results) return proof;
    } else {
      probing = false;
      const next = Math.max(1, Math.min(results - 1, Math.floor((results * maxBytes * HEADROOM) / proof.length)));
      if (best !== undefined && next <= best.results) return best.proof;
      if (results === 1) return undefined;
      results = next;
    }
  }
  return best?.proof;
}
