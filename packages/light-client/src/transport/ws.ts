/**
 * The WebSocket transport: in Node the `ws` package, in browsers the global
 * `WebSocket`. Every binary message carries whole frames (`spec/wire.md`,
 * "Framing"); a text message is a protocol fault.
 *
 * A message longer than one maximal response is a fault, and the frames of
 * a message are read one at a time, so the first bad one ends it. In Node,
 * `ws` refuses such a message as it arrives, and offers the peer no
 * compression, so no message inflates past the cap either; the global
 * `WebSocket` can do neither. Limitation: in a browser a hostile peer can
 * still make the browser buffer one oversized (or compressed) message
 * before it is rejected. The libp2p transport streams and has no such gap.
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
export async function connectWebSocket(url: string, signal?: AbortSignal, opts: ConnectOptions = {}): Promise<PeerConnection> {
  const open = await webSocketOpener();
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    let ws: WebSocket;
    try {
      ws = open(url);
    } catch {
      return reject(new TransportError('CONNECT_FAILED', `bad WebSocket URL ${url}`));
    }
    ws.binaryType = 'arraybuffer';
    const conn = new FramedConnection(url, {
      send: (bytes) => ws.send(bytes as Uint8Array<ArrayBuffer>),
      close: () => ws.close(),
    });
    let opened = false;
    const onAbort = () => {
      clearTimeout(deadline);
      conn.close();
      if (!opened) reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const timeoutMs = opts.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const deadline = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      reject(new TransportError('CONNECT_FAILED', `no WebSocket handshake with ${url} within ${timeoutMs} ms`));
      conn.close();
    }, timeoutMs);
    ws.onopen = () => {
      opened = true;
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
    // `ws` reports a peer's breach of the WebSocket protocol (a message past the cap, a compressed frame) before it closes.
    ws.onerror = (ev: Event) => {
      const code = (ev as { error?: { code?: unknown } }).error?.code;
      if (typeof code === 'string' && code.startsWith('WS_ERR_')) conn.fail(new WireError('MESSAGE_MALFORMED', `WebSocket protocol fault ${code}`));
    };
    ws.onclose = () => {
      clearTimeout(deadline);
      signal?.removeEventListener('abort', onAbort);
      conn.fail(new TransportError('CONNECTION_CLOSED', `${url} closed`));
      if (!opened) reject(new TransportError('CONNECT_FAILED', `cannot connect to ${url}`));
    };
  });
}

/** Opens a WebSocket to a URL. */
type Opener = (url: string) => WebSocket;

let opener: Promise<Opener> | undefined;

/**
 * In Node, `ws` with its message cap at one maximal response and no
 * compression; elsewhere (or if `ws` cannot be loaded) the global class.
 * The specifier is a variable so that browser bundles leave `ws` out.
 */
function webSocketOpener(): Promise<Opener> {
  const global: Opener = (url) => new WebSocket(url);
  const node = (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node;
  if (node === undefined) return Promise.resolve(global);
  const specifier = 'ws';
  opener ??= import(/* @vite-ignore */ specifier).then(
    (m: { WebSocket: new (url: string, opts: object) => WebSocket }) => (url: string) =>
      new m.WebSocket(url, { maxPayload: MAX_RESPONSE_MESSAGE_BYTES, perMessageDeflate: false }),
    () => global,
  );
  return opener;
}
