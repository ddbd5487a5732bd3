/**
 * The default {@link Connect}: WebSocket for `ws://` and `wss://` URLs,
 * libp2p for multiaddrs (loaded only when one is used).
 * @module
 */

import { type PeerConnection, TransportError } from './types.js';
import { connectWebSocket } from './ws.js';

/**
 * Opens a connection by the address's form.
 *
 * @example
 * ```ts
 * await connectAuto('ws://127.0.0.1:7001');
 * ```
 */
export async function connectAuto(address: string, signal?: AbortSignal): Promise<PeerConnection> {
  if (/^wss?:\/\//i.test(address)) return connectWebSocket(address, signal);
  if (address.startsWith('/')) {
    const { connectLibp2p } = await import('./libp2p.js');
    return connectLibp2p(address, signal);
  }
  throw new TransportError('CONNECT_FAILED', `unsupported peer address ${address}`);
}
