/**
 * `PROOFS` answers (`spec/wire.md`): each asked key's `PROOF` answer, in the
 * order asked, cut to the first k that fit the response limit (k ≥ 1: one
 * answer always fits). A tree in memory builds the whole answer in one call
 * (`proveMany`); a version read from storage is proven key by key here.
 * Either way answers are built one at a time and the building stops at the
 * first that does not fit, so nothing is proven in vain.
 * @module
 */

import { encodeProofsPayload, type ProofPayload, proofsAnswerSize } from '@bpavl/light-client/wire';
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

/** The `PROOFS` payload for `keys` in a version read from storage, at most `maxBytes`. */
export async function storedProofsPayload(tree: StoredTree, keys: readonly Uint8Array[], maxBytes: number): Promise<Uint8Array> {
  const fit = new Fitting(maxBytes);
  for (const key of keys) {
    const { value, proof } = await tree.prove(key);
    if (!fit.add(answerOf(value, proof))) break;
  }
  return fit.payload();
}

/** Collects answers while the payload stays within `maxBytes`. */
class Fitting {
  readonly #answers: ProofPayload[] = [];
  /** Payload bytes so far; the count varint is at most 2 bytes (k ≤ 256). */
  #bytes = 2;
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Adds `answer` if it fits (the first always does); false once one does not. */
  add(answer: ProofPayload): boolean {
    const bytes = proofsAnswerSize(answer);
    if (this.#answers.length > 0 && this.#bytes + bytes > this.#maxBytes) return false;
    this.#answers.push(answer);
    this.#bytes += bytes;
    return true;
  }

  payload(): Uint8Array {
    return encodeProofsPayload(this.#answers);
  }
}
