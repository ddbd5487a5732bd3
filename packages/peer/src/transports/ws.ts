/**
 * The plain WebSocket transport (`ws`): each socket is one `ByteConnection`.
 * `spec/wire.md`: "Over a WebSocket every binary message carries whole frames
 * … a receiver accepts any split and reassembles. Text messages are a
 * protocol fault."
 * @module
 */

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { ByteConnection, ConnectionEvents } from '../connection.ts';
import { MAX_WS_MESSAGE_BYTES } from '../constants.ts';
import type { SyncServer } from '../server.ts';
import { handshakeDeadline } from './handshake.ts';

/** What a ping carries for the protocol. */
const NOTHING = new Uint8Array(0);

/** How long a closing socket may take for the close handshake before it is destroyed. */
const CLOSE_GRACE_MS = 2000;

/**
 * Wraps a server-side `ws` socket. Output backpressure is measured with
 * `send` callbacks (bytes handed to `ws` minus bytes it reported written), so
 * no private `ws` field is needed.
 */
export function wsConnection(ws: WebSocket, label = 'ws'): ByteConnection {
  let events: ConnectionEvents | undefined;
  let pending = 0;
  let closed = false;
  const onClosed = () => {
    if (closed) return;
    closed = true;
    events?.closed();
  };
  const shutdown = (code: number) => {
    if (ws.readyState === WebSocket.CLOSED) return onClosed();
    ws.close(code);
    setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
  };
  return {
    label,
    attach(e) {
      events = e;
      ws.on('message', (data, isBinary) => {
        if (closed) return;
        if (!isBinary) return e.fault();
        if (Array.isArray(data)) for (const d of data) e.bytes(d);
        else e.bytes(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
      });
      // A ping is something received: it keeps the connection from idling out (spec/wire.md, "Server limits").
      ws.on('ping', () => e.bytes(NOTHING));
      ws.on('close', onClosed);
      ws.on('error', () => ws.terminate());
      if (ws.readyState !== WebSocket.OPEN) queueMicrotask(onClosed);
    },
    send(bytes, written) {
      if (closed || ws.readyState !== WebSocket.OPEN) return;
      pending += bytes.length;
      // ws calls back once the socket has taken the bytes, or with an error.
      ws.send(bytes, { binary: true }, () => {
        pending -= bytes.length;
        written?.();
        events?.drain();
      });
    },
    get bufferedAmount() {
      return pending;
    },
    pause() {
      if (ws.readyState === WebSocket.OPEN) ws.pause();
    },
    resume() {
      if (ws.readyState === WebSocket.OPEN) ws.resume();
    },
    close() {
      shutdown(1000);
    },
    abort() {
      // Destroys the socket at once: queued output is dropped, the remote sees 1006.
      if (closed) return;
      ws.terminate();
      onClosed();
    },
  };
}

/** A listening WebSocket server bound to `host:port`. */
export interface WsListener {
  /** `ws://host:port`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Listens for WebSockets on `host:port` (0: any free port) and hands every
 * socket to `server`. Sockets beyond the server's connection cap are closed
 * with 1013 (try again later).
 */
export async function listenWs(server: SyncServer, opts: { host: string; port: number }): Promise<WsListener> {
  // A socket that does not finish its upgrade in time is destroyed, so
  // half-open handshakes cannot hold sockets (spec/wire.md, "Server limits");
  // the deadline is lifted once the WebSocket is open.
  const http = createServer((_req, res) => res.writeHead(426).end());
  const upgraded = handshakeDeadline(http);
  const wss = new WebSocketServer({
    server: http,
    maxPayload: MAX_WS_MESSAGE_BYTES,
    perMessageDeflate: false,
    clientTracking: true,
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port, opts.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  wss.on('error', () => {});
  let n = 0;
  wss.on('connection', (ws, req) => {
    upgraded.add(req.socket);
    n++;
    ws.binaryType = 'nodebuffer';
    if (!server.hasRoom) {
      server.stats.refused++;
      ws.close(1013);
      setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
      return;
    }
    server.handleConnection(wsConnection(ws, `ws#${n} ${req.socket.remoteAddress}:${req.socket.remotePort}`));
  });
  const port = (http.address() as AddressInfo).port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `ws://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of wss.clients) ws.terminate();
        wss.close(() => {
          http.closeAllConnections();
          http.close(() => resolve());
        });
      }),
  };
}
