/**
 * The WebSocket transport: the global `WebSocket` of browsers and Node ≥ 22.
 * Every binary message carries whole frames (`spec/wire.md`, "Framing");
 * a text message is a protocol fault.
 *
 * A message longer than one maximal response is a fault, and the frames of
 * a message are read one at a time, so the first bad one ends it.
 * Limitation: the `WebSocket` API offers no cap on one message's size, so a
 * hostile peer can make the runtime buffer one oversized message before it
 * is rejected. The libp2p transport streams and has no such gap.
 * @module
 */

import { MAX_RESPONSE_MESSAGE_BYTES } from '../wire/constants.js';
import { WireError } from '../wire/errors.js';
import { FramedConnection } from './framed.js';
import { type ConnectOptions, DEFAULT_CONNECT_TIMEOUT_MS, type PeerConnection, TransportError } from './types.js';

/**
 * Opens a WebSocket connection to a serving peer. Rejects with
 * `CONNECT_FAILED` if the connection and its upgrade are not done within
 * `opts.timeoutMs` (default 5 s).
 *
 * @example
 * ```ts
 * const conn = await connectWebSocket('ws://127.0.0.1:7001');
 * const res = await conn.request({ kind: Kind.Chunk, root, index: 0 }, { timeoutMs: 5000 });
 * ```
 */
export function connectWebSocket(url: string, signal?: AbortSignal, opts: ConnectOptions = {}): Promise<PeerConnection> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    let ws: WebSocket;
    try {
      ws = new WebSocket(url);
    } catch {
      return reject(new TransportError('CONNECT_FAILED', `bad WebSocket URL ${url}`));
    }
    ws.binaryType = 'arraybuffer';
    const conn = new FramedConnection(url, {
      send: (bytes) => ws.send(bytes as Uint8Array<ArrayBuffer>),
      close: () => ws.close(),
    });
    let open = false;
    const onAbort = () => {
      clearTimeout(deadline);
      conn.close();
      if (!open) reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const timeoutMs = opts.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const deadline = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      reject(new TransportError('CONNECT_FAILED', `no WebSocket handshake with ${url} within ${timeoutMs} ms`));
      conn.close();
    }, timeoutMs);
    ws.onopen = () => {
      open = true;
      clearTimeout(deadline);
      resolve(conn);
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (typeof ev.data === 'string') return conn.fail(new WireError('MESSAGE_MALFORMED', 'text message'));
      const data = ev.data as ArrayBuffer;
      // A peer sends one response per message: anything longer is a fault before a byte of it is decoded.
      if (data.byteLength > MAX_RESPONSE_MESSAGE_BYTES) return conn.fail(new WireError('MESSAGE_MALFORMED', `message of ${data.byteLength} bytes`));
      conn.receive(new Uint8Array(data));
    };
    ws.onclose = () => {
      clearTimeout(deadline);
      signal?.removeEventListener('abort', onAbort);
      conn.fail(new TransportError('CONNECTION_CLOSED', `${url} closed`));
      if (!open) reject(new TransportError('CONNECT_FAILED', `cannot connect to ${url}`));
    };
  });
}
