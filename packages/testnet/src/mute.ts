/**
 * A peer that accepts TCP connections and never completes a handshake: the
 * WebSocket upgrade request (and so libp2p's dial) gets no answer. For
 * testing connect deadlines (`spec/wire.md`, "Giving up").
 * @module
 */

import { createServer, type Socket } from 'node:net';

/** A running mute listener. */
export interface MuteListener {
  readonly port: number;
  /** `ws://127.0.0.1:port`. */
  readonly url: string;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Stops listening and destroys every accepted socket. */
  close(): Promise<void>;
}

/**
 * Listens on 127.0.0.1 (any free port), accepts every connection, reads and
 * drops whatever arrives, and never writes.
 *
 * @example
 * ```ts
 * const mute = await listenMute();
 * await syncState({ root, peers: [mute.url] }); // rejects: NO_HONEST_PEERS, the peer unreachable
 * ```
 */
export async function listenMute(): Promise<MuteListener> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('data', () => {}); // read and drop
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: `ws://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
