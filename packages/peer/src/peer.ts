/**
 * A serving peer: one `SyncServer` behind a plain WebSocket listener and a
 * libp2p (WebSockets + noise + yamux) listener at once.
 * @module
 */

import { SyncServer, type SyncServerOptions } from './server.ts';
import type { TreeSource } from './source.ts';
import { listenLibp2p, type Libp2pListener } from './transports/libp2p.ts';
import { listenWs, type WsListener } from './transports/ws.ts';

/** Options of `startPeer`. */
export interface PeerOptions extends SyncServerOptions {
  /** Interface to listen on (default `127.0.0.1`). */
  host?: string;
  /** Plain WebSocket port (0: any free port; `null`: no WebSocket listener). Default 0. */
  wsPort?: number | null;
  /** libp2p WebSockets port (0: any free port; `null`: no libp2p node). Default 0. */
  libp2pPort?: number | null;
}

/** A running peer. */
export interface RunningPeer {
  readonly server: SyncServer;
  /** `ws://host:port`, if listening. */
  readonly wsUrl?: string;
  /** Multiaddrs ending in `/p2p/<peerId>`, if listening. */
  readonly libp2pAddrs: string[];
  readonly peerId?: string;
  readonly ws?: WsListener;
  readonly libp2p?: Libp2pListener;
  /** Stops both listeners and closes every connection. */
  close(): Promise<void>;
}

/**
 * Serves `source` over WebSocket and libp2p.
 *
 * @example
 * ```ts
 * const peer = await startPeer(new StaticTreeSource([tree.head()]));
 * console.log(peer.wsUrl, peer.libp2pAddrs[0]);
 * await peer.close();
 * ```
 */
export async function startPeer(source: TreeSource, opts: PeerOptions = {}): Promise<RunningPeer> {
  const host = opts.host ?? '127.0.0.1';
  const server = new SyncServer(source, opts);
  let ws: WsListener | undefined;
  let libp2p: Libp2pListener | undefined;
  try {
    if (opts.wsPort !== null) ws = await listenWs(server, { host, port: opts.wsPort ?? 0 });
    if (opts.libp2pPort !== null) libp2p = await listenLibp2p(server, { host, port: opts.libp2pPort ?? 0 });
  } catch (e) {
    await ws?.close();
    throw e;
  }
  let closing: Promise<void> | undefined;
  return {
    server,
    ...(ws ? { ws, wsUrl: ws.url } : {}),
    ...(libp2p ? { libp2p, peerId: libp2p.peerId } : {}),
    libp2pAddrs: libp2p?.multiaddrs ?? [],
    close() {
      closing ??= (async () => {
        server.close();
        await Promise.allSettled([ws?.close(), libp2p?.close()]);
      })();
      return closing;
    },
  };
}
