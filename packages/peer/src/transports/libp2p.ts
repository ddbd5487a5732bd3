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
import type { ByteConnection, ConnectionEvents } from '../connection.ts';
import { MAX_STREAMS_PER_LIBP2P_CONNECTION } from '../constants.ts';
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
    connectionManager: { maxConnections: server.maxConnections },
  });
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
