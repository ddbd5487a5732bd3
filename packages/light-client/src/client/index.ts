/**
 * `@bpavl/light-client/client`: verified reads (`get`, `has`, `getMany`,
 * `range`, `proof`) from untrusted peers over the sync wire protocol
 * (`spec/wire.md`), trusting only a root. Lying peers are banned with the
 * error code and the read is asked of another; no honest peer left is a
 * typed `NO_HONEST_PEERS` within the deadline, never a hang.
 *
 * @example
 * ```ts
 * import { createClient } from '@bpavl/light-client/client';
 * const client = createClient({ root, peers: ['ws://127.0.0.1:7001', 'ws://127.0.0.1:7002'] });
 * const balance = await client.get(new TextEncoder().encode('alice'));
 * ```
 * @module
 */

export {
  createClient,
  type Client,
  type ClientOptions,
  type CallOptions,
  type RangeOptions,
  type RangePage,
  type VerifiedProof,
} from './client.js';
export type { QueryEvent } from './ask.js';
export { QueryError, type QueryErrorCode, type BannedPeer } from './errors.js';
export { PeerPool, type PeerPoolOptions, type PoolPeer, type PoolPeerStatus } from './pool.js';
export { closeTransports } from '../transport/auto.js';
