/**
 * The libp2p transport: js-libp2p 3 with WebSockets, noise and yamux, one
 * stream per peer on protocol `/bpavl/sync/1.0.0` (`spec/wire.md`). Loaded
 * only when a multiaddr is dialled, so WebSocket-only users never pay for it.
 * @module
 */

import type { Multiaddr } from '@multiformats/multiaddr';
import type { Libp2p } from 'libp2p';
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

/**
 * The one dialling node of this process or page, and its users: dials in
 * progress and streams open on it. It stops when the last one ends, so that
 * nothing of it keeps a process alive once its clients and syncs are
 * closed; the next dial starts another.
 */
interface SharedNode {
  readonly node: Promise<Libp2p>;
  users: number;
}

let shared: SharedNode | undefined;

/**
 * The optional peer dependencies, imported when first used: a bundler then
 * builds an app that did not install them (Vite stands in an empty module
 * for a missing optional peer dependency, which a static named import
 * would fail the build on), and a missing one is a clear error.
 */
async function libp2pModules() {
  try {
    const [libp2p, websockets, noise, yamux, multiaddr] = await Promise.all([
      import('libp2p'),
      import('@libp2p/websockets'),
      import('@chainsafe/libp2p-noise'),
      import('@chainsafe/libp2p-yamux'),
      import('@multiformats/multiaddr'),
    ]);
    return { createLibp2p: libp2p.createLibp2p, webSockets: websockets.webSockets, noise: noise.noise, yamux: yamux.yamux, multiaddr: multiaddr.multiaddr };
  } catch (e) {
    throw new TransportError('CONNECT_FAILED', `a multiaddr peer needs the optional peer dependencies of @bpavl/light-client (libp2p, @libp2p/websockets, @chainsafe/libp2p-noise, @chainsafe/libp2p-yamux, @multiformats/multiaddr, @libp2p/utils): ${(e as Error).message}`);
  }
}

let modules: ReturnType<typeof libp2pModules> | undefined;

/** The shared node, started on first use, with one more user. */
function useNode(): SharedNode {
  shared ??= {
    node: (async () => {
      const { createLibp2p, webSockets, noise, yamux } = await (modules ??= libp2pModules());
      return createLibp2p({
        transports: [webSockets()],
        connectionEncrypters: [noise()],
        streamMuxers: [yamux()],
        connectionGater: loopbackFriendlyGater,
      });
    })(),
    users: 0,
  };
  shared.users += 1;
  return shared;
}

/** One use of `s` ended. */
function release(s: SharedNode): void {
  s.users -= 1;
  if (s.users === 0 && shared === s) void stopLibp2pClient();
}

/** Stops the shared dialling node now, whoever uses it (tests and short-lived CLIs call this). */
export async function stopLibp2pClient(): Promise<void> {
  const s = shared;
  shared = undefined;
  // A node that failed to start has nothing to stop.
  if (s) await (await s.node.catch(() => undefined))?.stop();
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
  // A missing package is not cached as a failure: an app may install it and retry.
  const { multiaddr } = await (modules ??= libp2pModules()).catch((e: unknown) => {
    modules = undefined;
    throw e;
  });
  let ma: Multiaddr;
  try {
    ma = multiaddr(address);
  } catch {
    throw new TransportError('CONNECT_FAILED', `bad multiaddr ${address}`);
  }
  const s = useNode();
  let stream;
  // One deadline for the dial, the WebSocket upgrade, noise, yamux and protocol negotiation.
  const deadline = AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  try {
    stream = await (await s.node).dialProtocol(ma, PROTOCOL_ID, { signal: signal ? AbortSignal.any([signal, deadline]) : deadline });
  } catch (e) {
    release(s);
    if (signal?.aborted) throw signal.reason;
    throw new TransportError('CONNECT_FAILED', `cannot open ${PROTOCOL_ID} to ${address}: ${(e as Error).message}`);
  }
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    release(s);
  };
  const conn = new FramedConnection(address, {
    // Requests are small (≤ 4 KiB) and bounded in number by the window, so
    // the stream's own send buffer is the only queue needed.
    send: (bytes) => void stream.send(bytes),
    close: () => {
      void stream.close().catch((e: Error) => stream.abort(e));
      end();
    },
  });
  stream.addEventListener('message', (evt) => conn.receive(evt.data.subarray()));
  stream.addEventListener('close', () => {
    end();
    conn.fail(new TransportError('CONNECTION_CLOSED', `${address} closed`));
  });
  return conn;
}
