/**
 * Options, events and results of a state sync.
 * @module
 */

import type { Tree, VerifiedChunk } from '@bpavl/wasm';
import type { Connect } from '../transport/types.js';

/** How a peer stands in the session. */
export type PeerStatus = 'connecting' | 'active' | 'slow' | 'banned' | 'failed';

/** What a sync reports while it runs. */
export type SyncEvent =
  | { type: 'peer'; peer: string; status: PeerStatus; reason?: string; code?: string; outcome?: PeerOutcome }
  /** Chunks a store kept from an interrupted run of this sync: never fetched again (first, before any request). */
  | { type: 'restored'; chunks: number; chunkCount: number | undefined; indices: readonly number[] }
  /**
   * A sync into a store: chunks durably written so far (restored ones included); a crash now keeps them.
   * Reported until the last is written: after the last chunk is verified, and after an abort or a failure
   * until the writes the sink started land (the promise settles after them), so the last one is what a resume restores.
   */
  | { type: 'stored'; chunks: number }
  | { type: 'request'; index: number; peer: string; hedge: boolean }
  | { type: 'chunk-verified'; index: number; peer: string; ms: number; bytes: number }
  | { type: 'chunk-rejected'; index: number; peer: string; code: string }
  | { type: 'peer-banned'; peer: string; reason: string; code: string }
  | {
      type: 'progress';
      done: number;
      chunkCount: number | undefined;
      /**
       * Bytes of the chunk envelopes newly verified so far (each chunk once): not restored chunks,
       * hedged duplicates or rejected envelopes, which the result's `bytes` (every envelope received) counts.
       */
      bytes: number;
      /** `bytes` per second of this run. */
      bytesPerSecond: number;
      etaSeconds: number | undefined;
    }
  | { type: 'done'; root: Uint8Array; seconds: number; bytes: number; refetches: number; rejected: number };

/** Options of {@link syncState}. */
export interface SyncOptions {
  /** The trusted root (32 bytes): everything is checked against it. */
  root: Uint8Array;
  /** Peer addresses: `ws://host:port` URLs and libp2p multiaddrs, mixed freely. */
  peers: readonly string[];
  /** Stops the sync: the promise rejects with the signal's reason and every connection closes. */
  signal?: AbortSignal;
  /** Receives every {@link SyncEvent}; what it throws is ignored. */
  onEvent?: (event: SyncEvent) => void;
  /** Opens connections; the default picks WebSocket or libp2p by address. */
  connect?: Connect;
  /** Version number the rebuilt tree is committed as (default 1; an integer ≥ 1). */
  version?: number;
  /** Per-request deadline in ms (default 10,000). */
  requestTimeoutMs?: number;
  /**
   * Requests in flight per peer at first (default 4) and at most (default 32;
   * each 1 … 64, what a peer serves, `spec/wire.md`). The window grows by one per success
   * up to the maximum until the first timeout or `BUSY`, then by one per
   * window of successes; 32 chunks of ~100 KB keep a 25 MB/s link with an
   * 80 ms round trip busy. Every number here is checked before the sync
   * starts (`TypeError` for a type, `RangeError` for a value: a duration
   * must be above 0 and at most 2^31 − 1 ms, a count an integer ≥ 1).
   */
  initialWindow?: number;
  maxWindow?: number;
  /** Consecutive timeouts or lost connections after which a peer is dropped (default 4). */
  maxFailures?: number;
  /** Deadline of one connection attempt, TCP and handshakes included (default 5,000 ms). */
  connectTimeoutMs?: number;
  /**
   * A peer that sends no valid chunk for this long, and meanwhile only
   * answered `BUSY`, timed out, lost its connection or could not connect, is
   * unusable (default 20,000 ms; `spec/wire.md`, "Giving up").
   */
  stallTimeoutMs?: number;
}

/**
 * Where verified chunks go (a port): the in-memory rebuilder by default, or
 * a state store, which writes each chunk as it arrives and resumes an
 * interrupted sync from what it stored (`@bpavl/store`).
 */
export interface ChunkSink<Result> {
  /** Chunks already held when the sync starts (restored from storage), and the chunk count they told. */
  readonly restored: readonly number[];
  readonly chunkCount: number | undefined;
  /** Takes over a chunk verified against the root (a new index: the engine never hands one twice). */
  add(chunk: VerifiedChunk): void;
  /** Bytes taken and not yet durable: the engine asks for no chunk while this is above its bound. */
  readonly backlogBytes: number;
  /** Called after each durable write with the chunks stored so far, and with the error if a write fails (the sync then fails with it). */
  watch(onStored: (chunks: number) => void, onFailure: (e: unknown) => void): void;
  /** Once every chunk is in: the synced state. */
  finish(): Promise<Result>;
  /**
   * On abort or failure: writes nothing new, and resolves once every write it started has landed or
   * failed (the engine settles only then, so the store holds what the last `stored` event said); what
   * is durable stays for a resume. Never rejects.
   */
  close(): Promise<void>;
}

/** A state store a sync can write into (`@bpavl/store`'s `State`). */
export interface SyncTarget {
  /** The sink for the state under `root`: a new sync, or the resume of an interrupted one. */
  syncSink(root: Uint8Array): Promise<ChunkSink<{ version: number }>>;
}

/** Options of a sync into a store. */
export interface StoreSyncOptions extends Omit<SyncOptions, 'version'> {
  /** Writes each verified chunk as it arrives; the finished sync is a committed version of the store. */
  store: SyncTarget;
}

/** Why a peer stopped counting in a session (`spec/wire.md`, "Giving up"). */
export type PeerOutcome = 'banned' | 'unreachable' | 'unresponsive' | 'busy' | 'refused';

/** A peer the session gave up on, and why. */
export interface PeerReport {
  peer: string;
  outcome: PeerOutcome;
  reason: string;
  /**
   * `banned`: the verification or wire code; `unreachable`: `CONNECT_FAILED`;
   * `unresponsive`: `TIMEOUT`; `busy`: `BUSY`; `refused`: `UNKNOWN_ROOT` or `BAD_REQUEST`.
   */
  code: string;
}

/** A peer the session banned, and why. */
export interface BannedPeer {
  peer: string;
  reason: string;
  code: string;
}

/** What a finished sync returns. */
export interface SyncResult extends SyncFigures {
  /** The rebuilt tree; its root equals the trusted root. */
  tree: Tree;
}

/** What a finished sync into a store returns. */
export interface StoreSyncResult extends SyncFigures {
  /** The store's version that holds the synced state (its root is the trusted root). */
  version: number;
}

/** What every finished sync reports. */
export interface SyncFigures {
  root: Uint8Array;
  seconds: number;
  /** Bytes of chunk envelopes received, duplicates and rejects included. */
  bytes: number;
  chunkCount: number;
  /** Chunks taken from the store, stored by an interrupted run (never fetched again). */
  restored: number;
  /** Chunks fetched again after a rejection, a timeout or a lost connection. */
  refetches: number;
  /** Responses rejected by verification. */
  rejected: number;
  banned: BannedPeer[];
}

/** Why a sync failed (not counting abort, which rejects with the signal's reason). */
export type SyncErrorCode = 'NO_HONEST_PEERS' | 'NO_PEERS';

/** A sync that cannot finish. */
export class SyncError extends Error {
  readonly code: SyncErrorCode;
  readonly banned: BannedPeer[];
  /** Every peer and why it was given up on (`NO_HONEST_PEERS`). */
  readonly peers: PeerReport[];
  constructor(code: SyncErrorCode, message: string, banned: BannedPeer[] = [], peers: PeerReport[] = []) {
    super(message);
    this.name = 'SyncError';
    this.code = code;
    this.banned = banned;
    this.peers = peers;
  }
}
