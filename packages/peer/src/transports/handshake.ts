/**
 * The handshake deadline before and during a WebSocket upgrade
 * (`spec/wire.md`, "Server limits"): one deadline from the moment a socket
 * connects, not an inactivity timer, so a client that trickles its upgrade
 * request a byte at a time cannot hold a socket past it.
 * @module
 */

import type { Duplex } from 'node:stream';
import { HANDSHAKE_TIMEOUT_MS } from '../constants.ts';

/**
 * Destroys each socket `server` accepts unless it is added to the returned
 * set (its upgrade done) within `HANDSHAKE_TIMEOUT_MS` of connecting.
 */
export function handshakeDeadline(server: { on(event: 'connection', listener: (socket: Duplex) => void): unknown }): WeakSet<Duplex> {
  const upgraded = new WeakSet<Duplex>();
  server.on('connection', (socket) => {
    const deadline = setTimeout(() => {
      if (!upgraded.has(socket)) socket.destroy();
    }, HANDSHAKE_TIMEOUT_MS);
    deadline.unref();
    socket.once('close', () => clearTimeout(deadline));
  });
  return upgraded;
}
