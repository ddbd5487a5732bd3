/**
 * The server hook: how a harness (`packages/testnet`) plugs lies, protocol
 * extensions and link emulation into a `SyncServer` without the serving peer
 * knowing any of them. A production peer runs without a hook and answers
 * every request honestly (`spec/wire.md`).
 * @module
 */

import type { Request, Status } from '@bpavl/light-client/wire';
import type { ByteConnection } from './connection.ts';
import type { ServedTree } from './source.ts';

/** A request whose header (version, kind, id) parsed. */
export interface IncomingRequest {
  readonly id: number;
  readonly kind: number;
  /** The whole request body, as received (an extension decodes its own kinds from it). */
  readonly body: Uint8Array;
  /** The decoded request, when the body is a valid `spec/wire.md` request. */
  readonly request?: Request;
}

/** The server's honest answer to a request. */
export interface Answer {
  readonly status: Status;
  /** The OK payload. */
  readonly payload?: Uint8Array;
  /** The tree the payload came from (a tree in memory; none for a version read from storage). */
  readonly tree?: ServedTree;
}

/** What to send for one request. */
export type Reply =
  /** A response frame with this status and payload (the kind and id echo the request). */
  | { kind: 'answer'; status: Status; payload?: Uint8Array }
  /** These bytes as they are, then keep serving, send nothing more, or close the connection. */
  | { kind: 'raw'; bytes: Uint8Array; then: 'continue' | 'mute' | 'close' }
  /** `reply`, `ms` later. */
  | { kind: 'delay'; ms: number; reply: Reply }
  /** Nothing; the request no longer counts as in flight. */
  | { kind: 'drop' };

/** Plugs into a `SyncServer` (option `hook`); every member is optional. */
export interface ServerHook {
  /** Wraps each accepted connection, e.g. to emulate a slow link. */
  connection?(conn: ByteConnection): ByteConnection;
  /**
   * Decides what to send for `req`, given the honest answer (which is
   * `BAD_REQUEST` for a kind the server does not know). `undefined`: the
   * honest answer.
   */
  reply?(req: IncomingRequest, honest: Answer): Reply | undefined;
}
