/**
 * The store's typed errors (`spec/errors.md`, "State store"). Branch on
 * `code`, never on `message`. Errors from the core (a corrupt record:
 * `STORE_CORRUPT`; an oversize key: `KEY_TOO_LONG`, …) and from the backend
 * (`STORE_LOCKED`, `STORE_NOT_A_DATABASE`, …) carry their codes the same way.
 * @module
 */

/** A stable code from spec/errors.md. */
export type StoreErrorCode =
  | 'STORE_CORRUPT'
  | 'VERSION_UNKNOWN'
  | 'STORE_CLOSED'
  | 'STORE_READ_ONLY'
  | 'KEY_NOT_FOUND'
  | 'KEY_EXISTS'
  | 'CHUNK_OUT_OF_RANGE'
  | 'SYNC_PENDING'
  | 'STORE_NOT_EMPTY'
  | 'CAPACITY_MISMATCH'
  | 'STORE_IO';

/** A refused store operation; the store is left unchanged. */
export class StoreError extends Error {
  override readonly name = 'StoreError';
  readonly code: StoreErrorCode;

  constructor(code: StoreErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}
