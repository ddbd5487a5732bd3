/**
 * `PROOF` and `MULTIPROOF` answers (`spec/wire.md`). A tree in memory builds
 * a `MULTIPROOF` answer in one call (`proveMulti`); a version read from
 * storage is proven key by key, and the single proofs are merged into the
 * multiproof (`multiproofFromProofs`). Either way the answer proves the
 * first k keys whose multiproof fits the response limit (k ≥ 1).
 * @module
 */

import type { ProofPayload } from '@bpavl/light-client/wire';
import { multiproofFromProofs } from '@bpavl/wasm';
import type { ServedTree, StoredTree } from './source.ts';

/** The `PROOF` payload of `key` in `tree`: its value and existence proof, or its absence proof. */
export function proofOf(tree: ServedTree, key: Uint8Array): ProofPayload {
  const value = tree.get(key);
  return answerOf(value, value === undefined ? tree.proveAbsence(key) : tree.proveExistence(key));
}

/** A `PROOF` payload from a value (`undefined`: absent) and its existence or absence proof. */
export function answerOf(value: Uint8Array | undefined, proof: Uint8Array): ProofPayload {
  return value === undefined ? { present: false, proof } : { present: true, value, proof };
}

/** The `MULTIPROOF` payload for `keys` (strictly increasing) in a version read from storage, at most `maxBytes`. */
export async function storedMultiproofPayload(tree: StoredTree, keys: readonly Uint8Array[], maxBytes: number): Promise<Uint8Array> {
  const values: (Uint8Array | undefined)[] = [];
  const proofs: Uint8Array[] = [];
  for (const key of keys) {
    const { value, proof } = await tree.prove(key);
    values.push(value);
    proofs.push(proof);
  }
  return multiproofFromProofs(keys as Uint8Array[], values, proofs, maxBytes);
}
