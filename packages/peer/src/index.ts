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
 * const peer = await startPeer(new StaticTreeSource([tree.snapshot()]));
 * console.log(peer.wsUrl, peer.libp2pAddrs[0]);
 * ```
 * @module
 */

export { SyncServer, type SyncServerOptions, type SyncServerStats } from './server.ts';
export type { ByteConnection, ConnectionEvents } from './connection.ts';
export { StaticTreeSource, CachedTree, toHex, fromHex, type ServedTree, type TreeSource } from './source.ts';
export { startPeer, type PeerOptions, type RunningPeer } from './peer.ts';
export { wsConnection, listenWs, type WsListener } from './transports/ws.ts';
export { streamConnection, listenLibp2p, type Libp2pListener } from './transports/libp2p.ts';
export {
  Byzantine,
  BYZANTINE_MODES,
  parseByzantine,
  SeededRandom,
  type ByzantineMode,
  type ByzantineOptions,
  type ByzantineSpec,
  type Lie,
} from '../../testnet/src/byzantine.ts';
export { buildWorkloadTree, workloadEntry, VALUE_LEN, type WorkloadSpec } from './workload.ts';
export { readTreeFile, writeTreeFile, parseTreeFileHeader, TreeFileError, type TreeFileHeader } from './treefile.ts';
export * from './constants.ts';
export { shapeConnection, isShaping, DEFAULT_BURST_BYTES, type LinkOptions } from '../../testnet/src/link.ts';
export {
  BaselineKind,
  baselineBuilder,
  decodeBaselineRequest,
  decodeBaselineResponse,
  decodeBaselineRootsPayload,
  encodeBaselineRequest,
  encodeBaselineResponse,
  encodeBaselineRootsPayload,
  encodeVarint,
  isBaselineBody,
  DEFAULT_BASELINE_CHUNK_BYTES,
  type BaselineBuilder,
  type BaselineRequest,
  type BaselineResponse,
  type BaselineRootInfo,
  type BaselineServed,
} from '../../testnet/src/baseline.ts';
