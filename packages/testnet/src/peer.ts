/**
 * `startPeer` of the test network: the serving peer of `@bpavl/peer`, with
 * the lies, the Baseline and link emulation of `./hook.ts` plugged in.
 * @module
 */

import { type PeerOptions, type RunningPeer as HonestPeer, startPeer as startHonestPeer } from '../../peer/src/peer.ts';
import type { TreeSource } from '../../peer/src/source.ts';
import type { Byzantine } from './byzantine.ts';
import { testnetHook, type TestnetOptions } from './hook.ts';

/** Options of a test peer: a serving peer's, and what the test network adds. */
export type TestPeerOptions = Omit<PeerOptions, 'hook'> & TestnetOptions;

/** A running test peer, and the liar it carries. */
export interface RunningPeer extends HonestPeer {
  readonly byzantine?: Byzantine;
}

/**
 * Serves `source` over WebSocket and libp2p, lying and emulating as `opts` say.
 *
 * @example
 * ```ts
 * const liar = await startPeer(source, { byzantine: new Byzantine({ mode: 'wrong-index', rate: 1, seed: 1n }) });
 * ```
 */
export async function startPeer(source: TreeSource, opts: TestPeerOptions = {}): Promise<RunningPeer> {
  const { byzantine, baseline, link, ...peerOpts } = opts;
  const hook = testnetHook({ byzantine, baseline, link });
  const peer = await startHonestPeer(source, { ...peerOpts, ...(hook ? { hook } : {}) });
  return byzantine ? Object.assign(peer, { byzantine }) : peer;
}
