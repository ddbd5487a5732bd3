/**
 * The one small interface every transport implements: pipelined
 * request/response over a connection to one peer (`spec/wire.md`).
 * @module
 */

import type { Request, Response } from '../wire/messages.js';

/** A request without its id: the connection assigns ids. */
export type RequestBody = Request extends infer R ? (R extends Request ? Omit<R, 'id'> : never) : never;

/** Why a request failed for reasons other than the peer's answer. */
export type TransportErrorCode = 'TIMEOUT' | 'CONNECTION_CLOSED' | 'CONNECT_FAILED';

/**
 * A request that timed out, or a connection that closed or never opened.
 * These lead to retries with backoff, never to a ban.
 */
export class TransportError extends Error {
  readonly code: TransportErrorCode;
  constructor(code: TransportErrorCode, message?: string) {
    super(message ?? code);
    this.name = 'TransportError';
    this.code = code;
  }
}

/** An open connection to one peer. */
export interface PeerConnection {
  /** The address it was opened with (`ws://…` or a multiaddr). */
  readonly address: string;
  /**
   * Sends a request and resolves with the peer's response (any status).
   * Rejects with `TransportError` (`TIMEOUT`, `CONNECTION_CLOSED`) or
   * `WireError` (the peer broke the protocol; the connection is then closed).
   */
  request(req: RequestBody, opts: { timeoutMs: number }): Promise<Response>;
  /** Closes the connection; pending requests reject with `CONNECTION_CLOSED`. */
  close(): void;
  /** Whether the connection is closed. */
  readonly isClosed: boolean;
  /** Calls `listener` once when the connection closes, for whatever reason. */
  onClose(listener: (reason: Error) => void): void;
}

/** Options of a {@link Connect}. */
export interface ConnectOptions {
  /**
   * Deadline of the whole attempt: TCP, the WebSocket upgrade and, for
   * libp2p, noise, yamux and protocol negotiation (default
   * {@link DEFAULT_CONNECT_TIMEOUT_MS}). Past it the attempt rejects with
   * `CONNECT_FAILED` (`spec/wire.md`, "Giving up").
   */
  timeoutMs?: number;
}

/** Default deadline of a connection attempt. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

/** A timer's longest delay in ms: a longer one fires at once, so no duration option goes past it. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The transport the default {@link Connect} picks for `address`: `ws` for a
 * `ws://` or `wss://` URL, `libp2p` for a multiaddr (it starts with `/`),
 * `undefined` for anything else.
 */
export function addressKind(address: string): 'ws' | 'libp2p' | undefined {
  if (/^wss?:\/\//i.test(address)) return 'ws';
  return address.startsWith('/') ? 'libp2p' : undefined;
}

/** Opens a connection to `address`. */
export type Connect = (address: string, signal?: AbortSignal, opts?: ConnectOptions) => Promise<PeerConnection>;
