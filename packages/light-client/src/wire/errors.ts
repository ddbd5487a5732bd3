/**
 * `WireError`: a frame or message that breaks `spec/wire.md`. The receiver
 * treats the sender as faulty (a client drops the connection; a server
 * answers `BAD_REQUEST` or closes). Codes are listed in `spec/errors.md`.
 * @module
 */

/** Every code a wire decoder can throw (`spec/errors.md`, "Wire"). */
export type WireErrorCode = 'FRAME_TOO_LARGE' | 'FRAME_MALFORMED' | 'MESSAGE_MALFORMED' | 'VERSION_UNSUPPORTED' | 'RESPONSE_DUPLICATE';

/**
 * Thrown by the frame and message decoders.
 *
 * @example
 * ```ts
 * try { decodeResponse(body); } catch (e) { if (e instanceof WireError) console.log(e.code); }
 * ```
 */
export class WireError extends Error {
  /** The stable code from `spec/errors.md`. */
  readonly code: WireErrorCode;
  /** The request's id and kind, when the header parsed, so a server can answer it. */
  readonly request?: { id: number; kind: number };

  constructor(code: WireErrorCode, message?: string, request?: { id: number; kind: number }) {
    super(message ?? code);
    this.name = 'WireError';
    this.code = code;
    if (request) this.request = request;
  }
}
