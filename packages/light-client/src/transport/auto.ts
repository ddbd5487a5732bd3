/**
 * The default {@link Connect}: WebSocket for `ws://` and `wss://` URLs,
 * libp2p for multiaddrs (loaded only when one is used).
 * @module
 */

import { addressKind, type ConnectOptions, type PeerConnection, TransportError } from './types.js';
import { connectWebSocket } from './ws.js';

let libp2p: Promise<typeof import('./libp2p.js')> | undefined;

/**
 * Stops what the transports keep running between syncs (the shared libp2p
 * node, if one was started), so that a process can exit.
 */
export async function closeTransports(): Promise<void> {
  if (libp2p) await (await libp2p).stopLibp2pClient();
}

/**
 * Opens a connection by the address's form.
 *
 * @example
 * ```ts
 * await connectAuto('ws://127.0.0.1:7001');
 * ```
 */
export async function connectAuto(address: string, signal?: AbortSignal, opts?: ConnectOptions): Promise<PeerConnection> {
  const kind = addressKind(address);
  if (kind === 'ws') return connectWebSocket(address, signal, opts);
  if (kind === 'libp2p') {
    libp2p ??= import('./libp2p.js');
    return (await libp2p).connectLibp2p(address, signal, opts);
  }
  throw new TransportError('CONNECT_FAILED', `unsupported peer address ${address}`);
}
