/**
 * `ProofError`, the one error every verifier throws for bad bytes or a failed
 * check, with the stable codes of `spec/errors.md`.
 *
 * Wrong argument *types* throw `TypeError` and wrong argument values that are
 * not a format issue (a root that is not 32 bytes, a negative index) throw
 * `RangeError`; see `input.ts`.
 * @module
 */

/**
 * Every code a verifier can throw (`spec/errors.md`, "Decoding" and
 * "Verification"). Codes are stable: never renamed, never reused.
 *
 * @example
 * ```ts
 * const code: ProofErrorCode = 'ROOT_MISMATCH';
 * ```
 */
export type ProofErrorCode =
  | 'TRUNCATED'
  | 'TRAILING_BYTES'
  | 'FORMAT_UNSUPPORTED'
  | 'VARINT_NON_CANONICAL'
  | 'VARINT_OVERFLOW'
  | 'CAPACITY_INVALID'
  | 'CHUNK_SIZE_INVALID'
  | 'CHUNK_FILL'
  | 'POSITION_INVALID'
  | 'KEY_EMPTY'
  | 'KEY_TOO_LONG'
  | 'VALUE_TOO_LONG'
  | 'KEYS_NOT_SORTED'
  | 'PATH_TOO_LONG'
  | 'HEIGHT_INVALID'
  | 'COUNT_INVALID'
  | 'FLAGS_INVALID'
  | 'ROOT_MISMATCH'
  | 'CHUNK_INDEX_MISMATCH'
  | 'KEY_HEIGHT_MISMATCH'
  | 'ABSENCE_INVALID'
  | 'RANGE_INVALID'
  | 'QUERY_INVALID'
  | 'MULTIPROOF_INVALID'
  | 'NODE_MISMATCH'
  | 'LEAVES_MISMATCH'
  | 'ENTRY_MISMATCH'
  | 'KINDS_MISMATCH';

/**
 * All {@link ProofErrorCode}s, in the order of `spec/errors.md`.
 *
 * @example
 * ```ts
 * PROOF_ERROR_CODES.includes('TRUNCATED'); // true
 * ```
 */
export const PROOF_ERROR_CODES: readonly ProofErrorCode[] = [
  'TRUNCATED',
  'TRAILING_BYTES',
  'FORMAT_UNSUPPORTED',
  'VARINT_NON_CANONICAL',
  'VARINT_OVERFLOW',
  'CAPACITY_INVALID',
  'CHUNK_SIZE_INVALID',
  'CHUNK_FILL',
  'POSITION_INVALID',
  'KEY_EMPTY',
  'KEY_TOO_LONG',
  'VALUE_TOO_LONG',
  'KEYS_NOT_SORTED',
  'PATH_TOO_LONG',
  'HEIGHT_INVALID',
  'COUNT_INVALID',
  'FLAGS_INVALID',
  'ROOT_MISMATCH',
  'CHUNK_INDEX_MISMATCH',
  'KEY_HEIGHT_MISMATCH',
  'ABSENCE_INVALID',
  'RANGE_INVALID',
  'QUERY_INVALID',
  'MULTIPROOF_INVALID',
  'NODE_MISMATCH',
  'LEAVES_MISMATCH',
  'ENTRY_MISMATCH',
  'KINDS_MISMATCH',
];

/**
 * Bytes failed to decode, or a proof or chunk failed to verify. Branch on
 * `code`, never on `message`.
 *
 * @example
 * ```ts
 * try {
 *   verifyExistence(root, key, value, proof);
 * } catch (err) {
 *   if (err instanceof ProofError && err.code === 'ROOT_MISMATCH') banPeer();
 *   else throw err;
 * }
 * ```
 */
export class ProofError extends Error {
  /** The stable code from `spec/errors.md`. */
  readonly code: ProofErrorCode;

  constructor(code: ProofErrorCode, message?: string) {
    super(message ?? code);
    this.name = 'ProofError';
    this.code = code;
  }
}

/**
 * Whether `err` is a {@link ProofError}, also across realms and bundle copies
 * (checks `name` and a known `code`, not the prototype).
 *
 * @example
 * ```ts
 * if (isProofError(err)) console.log(err.code);
 * ```
 */
export function isProofError(err: unknown): err is Error & { readonly code: ProofErrorCode } {
  return (
    err instanceof ProofError ||
    (err instanceof Error &&
      err.name === 'ProofError' &&
      PROOF_ERROR_CODES.includes((err as { code?: unknown }).code as ProofErrorCode))
  );
}

/** Throws `ProofError(code)`; a one-liner for decoders. Internal. */
export function fail(code: ProofErrorCode): never {
  throw new ProofError(code);
}
