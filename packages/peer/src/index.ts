/**
 * `@bpavl/peer`: a serving peer for the bpavl sync protocol (`spec/wire.md`)
 * over plain WebSockets and libp2p, and the `bpavl` CLI (`./cli.ts`).
 *
 * ```ts
 * import { init, Tree } from '@bpavl/wasm';
 * import { startPeer, StaticTreeSource } from '@bpavl/peer';
 * await init();
 * const tree = new Tree();
 * tree.insert(key, value);
 * tree.commit();
 * const peer = await startPeer(new StaticTreeSource([tree.head()]));
 * console.log(peer.wsUrl, peer.libp2pAddrs[0]);
 * ```
 * @module
 */

export { SyncServer, type SyncServerOptions, type SyncServerStats } from './server.ts';
export type { ByteConnection, ConnectionEvents } from './connection.ts';
export type { Answer, IncomingRequest, Reply, ServerHook } from './hook.ts';
export { StaticTreeSource, MovingHead, CachedTree, toHex, fromHex, type AnyServedTree, type ServedTree, type StoredTree, type TreeSource } from './source.ts';
export { startPeer, type PeerOptions, type RunningPeer } from './peer.ts';
export { wsConnection, listenWs, type WsListener } from './transports/ws.ts';
export { streamConnection, listenLibp2p, type Libp2pListener } from './transports/libp2p.ts';
export { buildWorkloadTree, headWrites, workloadEntry, VALUE_LEN, type HeadWrite, type WorkloadSpec } from './workload.ts';
export { readTreeFile, writeTreeFile, parseTreeFileHeader, TreeFileError, type TreeFileHeader } from './treefile.ts';
export * from './constants.ts';
