/**
 * The libp2p transport: a js-libp2p 3 node listening on WebSockets (noise
 * encryption, yamux multiplexing) that serves `/bpavl/sync/1.0.0`. Each
 * protocol stream is one `ByteConnection`; a client may open several streams
 * over one libp2p connection.
 *
 * js-libp2p 3 streams are `EventTarget`s: `message` events carry
 * `Uint8Array | Uint8ArrayList`, `send()` returns false when the write buffer
 * is full (then wait for `drain`), `pause()`/`resume()` apply read
 * backpressure (yamux tells the remote to stop sending), `close()` half-closes,
 * `abort(err)` resets.
 * @module
 */

import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { PROTOCOL_ID } from '@bpavl/light-client/wire';
import type { Connection, Stream } from '@libp2p/interface';
import { webSockets } from '@libp2p/websockets';
import { createLibp2p, type Libp2p } from 'libp2p';
import type { Server as HttpServer } from 'node:http';
import type { Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ByteConnection, ConnectionEvents } from '../connection.ts';
import { HANDSHAKE_TIMEOUT_MS, MAX_STREAMS_PER_LIBP2P_CONNECTION } from '../constants.ts';
import { handshakeDeadline } from './handshake.ts';
import type { SyncServer } from '../server.ts';

class ProtocolFault extends Error {
  constructor() {
    super('protocol fault');
    this.name = 'ProtocolFault';
  }
}

/** Wraps one inbound `/bpavl/sync/1.0.0` stream. */
export function streamConnection(stream: Stream, label = 'libp2p'): ByteConnection {
  let closed = false;
  let events: ConnectionEvents | undefined;
  const onClosed = () => {
    if (closed) return;
    closed = true;
    events?.closed();
  };
  return {
    label,
    attach(e) {
      events = e;
      stream.addEventListener('message', (evt) => {
        if (closed) return;
        const d = evt.data;
        e.bytes(d instanceof Uint8Array ? d : d.subarray());
      });
      stream.addEventListener('drain', () => e.drain());
      stream.addEventListener('idle', () => e.drain());
      stream.addEventListener('remoteCloseWrite', () => e.end());
      stream.addEventListener('close', onClosed);
      if (stream.status !== 'open') queueMicrotask(onClosed);
    },
    send(bytes) {
      if (closed || stream.writeStatus !== 'writable') return;
      try {
        stream.send(bytes);
      } catch {
        // The stream was reset under us; its 'close' event follows.
      }
    },
    get bufferedAmount() {
      return stream.writeBufferLength;
    },
    pause() {
      stream.pause();
    },
    resume() {
      stream.resume();
    },
    close() {
      stream.close().catch((err: unknown) => stream.abort(err instanceof Error ? err : new Error(String(err))));
    },
    abort() {
      if (closed) return;
      stream.abort(new ProtocolFault());
      onClosed();
    },
  };
}

/** A started libp2p node serving the sync protocol. */
export interface Libp2pListener {
  readonly node: Libp2p;
  /** The listen multiaddrs, each ending in `/p2p/<peerId>`. */
  readonly multiaddrs: string[];
  readonly peerId: string;
  close(): Promise<void>;
}

/** The fields of @libp2p/websockets' listener that the handshake guard uses. */
interface WebSocketListenerInternals {
  server?: NetServer;
  http?: HttpServer;
}

/**
 * The handshake deadline before and during the WebSocket upgrade.
 * @libp2p/websockets arms no timer there: a socket that sends nothing, or
 * whose upgrade request never ends, is kept forever (Node checks its HTTP
 * timeouts only on servers that listen themselves, which this one does
 * not). So every accepted socket gets a one-shot deadline, cancelled by
 * its upgrade. This reaches into the listener's `server` and `http` fields
 * (the versions are pinned; test/hostile.test.ts fails if they move).
 */
function guardWebSocketHandshakes(node: Libp2p): void {
  const { transportManager } = (node as unknown as { components: { transportManager: { getListeners(): unknown[] } } }).components;
  for (const listener of transportManager.getListeners() as WebSocketListenerInternals[]) {
    const { server, http } = listener;
    if (server === undefined || http === undefined) throw new Error('@libp2p/websockets changed: its listener has no server or http field');
    const upgraded = handshakeDeadline(server);
    http.on('upgrade', (_req, socket: Duplex) => upgraded.add(socket));
  }
}

/**
 * Drops a client's peer-store record once its last connection closes. libp2p
 * records every remote peer that opens a stream (its key and protocols) and
 * deletes a record only when it is read again after six hours; a serving
 * peer never reads them (it dials nobody), so without this it kept one
 * record for every client identity it ever served, and a peer serving
 * browsers and short-lived CLIs for weeks grew without bound.
 */
function forgetDisconnectedPeers(node: Libp2p): void {
  node.addEventListener('peer:disconnect', (evt) => {
    // A client that reconnected meanwhile is recorded again by its next stream; a failed delete only leaves the record.
    if (node.getConnections(evt.detail).length === 0) void node.peerStore.delete(evt.detail).catch(() => {});
  });
}

/**
 * Starts a libp2p node listening on `/ip4/<host>/tcp/<port>/ws` and hands
 * every `/bpavl/sync/1.0.0` stream to `server`.
 */
export async function listenLibp2p(server: SyncServer, opts: { host: string; port: number }): Promise<Libp2pListener> {
  const family = opts.host.includes(':') ? 'ip6' : 'ip4';
  const node = await createLibp2p({
    addresses: { listen: [`/${family}/${opts.host}/tcp/${opts.port}/ws`] },
    transports: [webSockets()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    // The handshake deadline after the WebSocket upgrade: noise, yamux and
    // protocol negotiation (before it: guardWebSocketHandshakes).
    connectionManager: {
      maxConnections: server.maxConnections,
      inboundUpgradeTimeout: HANDSHAKE_TIMEOUT_MS,
      inboundStreamProtocolNegotiationTimeout: HANDSHAKE_TIMEOUT_MS,
    },
  });
  guardWebSocketHandshakes(node);
  forgetDisconnectedPeers(node);
  let n = 0;
  await node.handle(
    PROTOCOL_ID,
    (stream: Stream, connection: Connection) => {
      n++;
      const label = `libp2p#${n} ${connection.remotePeer.toString().slice(-8)}`;
      server.handleConnection(streamConnection(stream, label));
    },
    { maxInboundStreams: MAX_STREAMS_PER_LIBP2P_CONNECTION },
  );
  const multiaddrs = node.getMultiaddrs().map((ma) => ma.toString());
  return {
    node,
    multiaddrs,
    peerId: node.peerId.toString(),
    close: async () => {
      await node.stop();
    },
  };
}
