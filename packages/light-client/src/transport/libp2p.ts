/**
 * The libp2p transport: js-libp2p 3 with WebSockets, noise and yamux, one
 * stream per peer on protocol `/bpavl/sync/1.0.0` (`spec/wire.md`). Loaded
 * only when a multiaddr is dialled, so WebSocket-only users never pay for it.
 * @module
 */

import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { webSockets } from '@libp2p/websockets';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { createLibp2p, type Libp2p } from 'libp2p';
import { PROTOCOL_ID } from '../wire/constants.js';
import { FramedConnection } from './framed.js';
import { type ConnectOptions, DEFAULT_CONNECT_TIMEOUT_MS, type PeerConnection, TransportError } from './types.js';

/** Whether a multiaddr names this machine (127.0.0.0/8, ::1, localhost). */
function isLoopback(ma: Multiaddr): boolean {
  const host = ma.getComponents()[0];
  if (!host?.value) return false;
  if (host.name === 'ip4') return host.value.startsWith('127.');
  if (host.name === 'ip6') return host.value === '::1';
  return host.value === 'localhost';
}

/**
 * Browsers' default gater refuses every private address. This one refuses
 * private addresses too, except loopback, so that a page can sync from peers
 * on its own machine (the demo) without being able to probe the LAN.
 */
const loopbackFriendlyGater = {
  denyDialMultiaddr: async (ma: Multiaddr): Promise<boolean> => {
    if (isLoopback(ma)) return false;
    const { isPrivate } = await import('@libp2p/utils');
    return isPrivate(ma);
  },
};

let shared: Promise<Libp2p> | undefined;

/** The one dialling node of this process or page, started on first use. */
function clientNode(): Promise<Libp2p> {
  shared ??= createLibp2p({
    transports: [webSockets()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    connectionGater: loopbackFriendlyGater,
  });
  return shared;
}

/** Stops the shared dialling node (tests and short-lived CLIs call this). */
export async function stopLibp2pClient(): Promise<void> {
  const node = shared;
  shared = undefined;
  if (node) await (await node).stop();
}

/**
 * Opens a stream on `/bpavl/sync/1.0.0` to the peer at `address` (a
 * multiaddr ending in `/p2p/<peer id>`).
 *
 * @example
 * ```ts
 * const conn = await connectLibp2p('/ip4/127.0.0.1/tcp/7002/ws/p2p/12D3Koo…');
 * ```
 */
export async function connectLibp2p(address: string, signal?: AbortSignal, opts: ConnectOptions = {}): Promise<PeerConnection> {
  let ma: Multiaddr;
  try {
    ma = multiaddr(address);
  } catch {
    throw new TransportError('CONNECT_FAILED', `bad multiaddr ${address}`);
  }
  const node = await clientNode();
  let stream;
  // One deadline for the dial, the WebSocket upgrade, noise, yamux and protocol negotiation.
  const deadline = AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  try {
    stream = await node.dialProtocol(ma, PROTOCOL_ID, { signal: signal ? AbortSignal.any([signal, deadline]) : deadline });
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    throw new TransportError('CONNECT_FAILED', `cannot open ${PROTOCOL_ID} to ${address}: ${(e as Error).message}`);
  }
  const conn = new FramedConnection(address, {
    // Requests are small (≤ 4 KiB) and bounded in number by the window, so
    // the stream's own send buffer is the only queue needed.
    send: (bytes) => void stream.send(bytes),
    close: () => void stream.close().catch((e: Error) => stream.abort(e)),
  });
  stream.addEventListener('message', (evt) => conn.receive(evt.data.subarray()));
  stream.addEventListener('close', () => conn.fail(new TransportError('CONNECTION_CLOSED', `${address} closed`)));
  return conn;
}
