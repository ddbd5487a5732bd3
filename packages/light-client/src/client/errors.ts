/**
 * `QueryError`: a read the query client could not answer with a verified
 * answer. Codes are in `spec/errors.md` ("Query client").
 * @module
 */

/** Why a read failed (abort rejects with the signal's reason instead); `CLIENT_CLOSED`: the client was closed before or during the read. */
export type QueryErrorCode = 'NO_HONEST_PEERS' | 'NO_PEERS' | 'CLIENT_CLOSED';

/** A peer the client banned, and why. */
export interface BannedPeer {
  readonly peer: string;
  /** The verification code of its answer, or the wire rule it broke. */
  readonly code: string;
}

/**
 * Thrown by the query client's reads.
 *
 * @example
 * ```ts
 * try { await client.get(key); } catch (e) { if (e instanceof QueryError && e.code === 'NO_HONEST_PEERS') retryLater(); }
 * ```
 */
export class QueryError extends Error {
  /** The stable code from `spec/errors.md`. */
  readonly code: QueryErrorCode;
  /** The peers banned so far in the client's session. */
  readonly banned: readonly BannedPeer[];

  constructor(code: QueryErrorCode, message: string, banned: readonly BannedPeer[] = []) {
    super(message);
    this.name = 'QueryError';
    this.code = code;
    this.banned = banned;
  }
}
