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
  | 'CAPACITY_MISMATCH';

/** A refused store operation; the store is left unchanged. */
export class StoreError extends Error {
  override readonly name = 'StoreError';
  readonly code: StoreErrorCode;

  constructor(code: StoreErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** The tree's codes for a key it can never hold (`spec/errors.md`, "Decoding"). */
type KeyErrorCode = 'KEY_EMPTY' | 'KEY_TOO_LONG';

/** The longest key a tree holds (`spec/encoding.md`). */
const MAX_KEY_BYTES = 1024;

/**
 * Refuses a key no tree can hold as the core refuses it in a put: an Error
 * named `TreeError` with code `KEY_EMPTY` or `KEY_TOO_LONG` (`BpavlError`
 * of `@bpavl/wasm`), a `TypeError` for a key that is no Uint8Array.
 */
export function checkKey(key: unknown): void {
  if (!(key instanceof Uint8Array)) throw new TypeError('key must be a Uint8Array');
  let code: KeyErrorCode | undefined;
  if (key.length === 0) code = 'KEY_EMPTY';
  else if (key.length > MAX_KEY_BYTES) code = 'KEY_TOO_LONG';
  if (code !== undefined) throw Object.assign(new Error(`a key must hold 1 to ${MAX_KEY_BYTES} bytes, not ${key.length}`), { name: 'TreeError', code });
}
