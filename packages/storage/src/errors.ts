/**
 * `StorageError`, the one error every storage backend throws for a failure
 * of the store itself, with the stable codes of `spec/errors.md` ("Storage").
 *
 * Bad arguments are not storage failures: a wrong type throws `TypeError`, a
 * wrong value (an unknown table, an oversize key, a negative limit) throws
 * `RangeError`; see `checks.ts`.
 * @module
 */

/**
 * Every code a backend can throw. Codes are stable: never renamed, never reused.
 *
 * @example
 * ```ts
 * const code: StorageErrorCode = 'STORE_LOCKED';
 * ```
 */
export type StorageErrorCode =
  | 'STORE_LOCKED'
  | 'STORE_CLOSED'
  | 'STORE_READ_ONLY'
  | 'STORE_NOT_A_DATABASE'
  | 'STORE_CORRUPT'
  | 'STORE_IO';

/**
 * All {@link StorageErrorCode}s, in the order of `spec/errors.md`.
 *
 * @example
 * ```ts
 * STORAGE_ERROR_CODES.includes('STORE_IO'); // true
 * ```
 */
export const STORAGE_ERROR_CODES: readonly StorageErrorCode[] = [
  'STORE_LOCKED',
  'STORE_CLOSED',
  'STORE_READ_ONLY',
  'STORE_NOT_A_DATABASE',
  'STORE_CORRUPT',
  'STORE_IO',
];

/**
 * A backend could not do what was asked. Branch on `code`, never on
 * `message`; `cause` holds the engine's own error, when there is one.
 *
 * @example
 * ```ts
 * try {
 *   backend = await openNodeBackend({ path, tables });
 * } catch (err) {
 *   if (isStorageError(err) && err.code === 'STORE_LOCKED') backend = await openNodeBackend({ path, tables, readOnly: true });
 *   else throw err;
 * }
 * ```
 */
export class StorageError extends Error {
  /** The stable code from `spec/errors.md`. */
  readonly code: StorageErrorCode;

  constructor(code: StorageErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? code, options);
    this.name = 'StorageError';
    this.code = code;
  }
}

/**
 * Whether `err` is a {@link StorageError}, also across realms and bundle
 * copies (checks `name` and a known `code`, not the prototype).
 *
 * @example
 * ```ts
 * if (isStorageError(err)) console.log(err.code);
 * ```
 */
export function isStorageError(err: unknown): err is Error & { readonly code: StorageErrorCode } {
  return (
    err instanceof StorageError ||
    (err instanceof Error &&
      err.name === 'StorageError' &&
      STORAGE_ERROR_CODES.includes((err as { code?: unknown }).code as StorageErrorCode))
  );
}

/**
 * `cause`, an engine's or the platform's failure, as a StorageError of
 * `code`; argument errors (`TypeError`, `RangeError`) and StorageErrors pass
 * through unchanged. For the backends.
 */
export function asStorageError(cause: unknown, code: StorageErrorCode, what: string): unknown {
  if (cause instanceof StorageError || cause instanceof TypeError || cause instanceof RangeError) return cause;
  return new StorageError(code, `${what}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
}
