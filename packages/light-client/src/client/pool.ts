/**
 * A pool of untrusted peers: lazy connections, a latency estimate per peer,
 * back-off after timeouts and `BUSY`, and bans for the session. It knows
 * nothing of proofs or chunks, so that the query client uses it today and
 * the sync engine can adopt it (`spec/wire.md`, "What the client checks":
 * a slow peer is down-weighted, a lying one banned).
 * @module
 */

import { type Connect, type PeerConnection, TransportError } from '../transport/types.js';

/** How a peer stands in the pool. */
export type PoolPeerStatus = 'idle' | 'active' | 'slow' | 'banned' | 'failed';

/** One peer of a {@link PeerPool}. */
export interface PoolPeer {
  readonly address: string;
  status: PoolPeerStatus;
  /** Smoothed response time in ms, once one answer came. */
  latencyMs: number | undefined;
  /** Requests sent and not settled. */
  inflight: number;
  /** Consecutive timeouts, lost connections or failed connects. */
  failures: number;
  /** No new request before this time (ms, `performance.now()`). */
  notBefore: number;
  /** Why it was banned: the error code. */
  banCode?: string;
}

/** Options of {@link PeerPool}. */
export interface PeerPoolOptions {
  /** Opens a connection to an address. */
  connect: Connect;
  /** Consecutive timeouts or lost connections after which a peer is dropped (default 4). */
  maxFailures?: number;
  /** Called when a peer is banned. */
  onBan?: (peer: PoolPeer, code: string, reason: string) => void;
}

interface Entry {
  peer: PoolPeer;
  conn: Promise<PeerConnection> | undefined;
}

/** Latency assumed for a peer not measured yet: low, so that each is tried. */
const UNMEASURED_MS = 0.05;

/**
 * The peers of a session and the choice among them.
 *
 * @example
 * ```ts
 * const pool = new PeerPool(['ws://127.0.0.1:7001'], { connect: connectAuto });
 * const peer = pool.pick(new Set());
 * const conn = await pool.connection(peer!, signal);
 * ```
 */
export class PeerPool {
  readonly #entries = new Map<PoolPeer, Entry>();
  readonly #connect: Connect;
  readonly #maxFailures: number;
  readonly #onBan: PeerPoolOptions['onBan'];
  #closed = false;
  /** Aborts connects still opening when the pool closes. */
  readonly #lifetime = new AbortController();

  constructor(addresses: readonly string[], opts: PeerPoolOptions) {
    for (const address of new Set(addresses)) {
      const peer: PoolPeer = { address, status: 'idle', latencyMs: undefined, inflight: 0, failures: 0, notBefore: 0 };
      this.#entries.set(peer, { peer, conn: undefined });
    }
    this.#connect = opts.connect;
    this.#maxFailures = opts.maxFailures ?? 4;
    this.#onBan = opts.onBan;
  }

  /** Every peer, in the order given. */
  get peers(): PoolPeer[] {
    return [...this.#entries.keys()];
  }

  /** Peers that are neither banned nor dropped. */
  usable(): PoolPeer[] {
    return this.peers.filter((p) => p.status !== 'banned' && p.status !== 'failed');
  }

  /**
   * The best peer to ask now, outside `exclude`: the lowest expected wait,
   * its latency times the requests it already has plus one. Peers backing
   * off are skipped; `undefined` if none is left.
   */
  pick(exclude: ReadonlySet<PoolPeer>, now = performance.now()): PoolPeer | undefined {
    let best: PoolPeer | undefined;
    let bestScore = Infinity;
    for (const p of this.#entries.keys()) {
      if (exclude.has(p) || p.status === 'banned' || p.status === 'failed' || now < p.notBefore) continue;
      const score = (p.latencyMs ?? UNMEASURED_MS) * (p.inflight + 1) * (p.status === 'slow' ? 4 : 1);
      if (score < bestScore) {
        best = p;
        bestScore = score;
      }
    }
    return best;
  }

  /** Milliseconds until a usable peer outside `exclude` ends its back-off (0 if one is ready), or undefined if none is usable. */
  readyIn(exclude: ReadonlySet<PoolPeer>, now = performance.now()): number | undefined {
    let soonest: number | undefined;
    for (const p of this.usable()) {
      if (exclude.has(p)) continue;
      const wait = Math.max(0, p.notBefore - now);
      soonest = soonest === undefined ? wait : Math.min(soonest, wait);
    }
    return soonest;
  }

  /**
   * The peer's open connection, opened on first use and again after a loss
   * (the caller counts a failed connect with {@link onFailure}).
   */
  connection(peer: PoolPeer): Promise<PeerConnection> {
    const e = this.#entries.get(peer)!;
    if (this.#closed) return Promise.reject(new TransportError('CONNECTION_CLOSED', 'the pool is closed'));
    if (e.conn === undefined) {
      const opening = this.#connect(peer.address, this.#lifetime.signal);
      e.conn = opening;
      opening.then(
        (conn) => {
          if (this.#closed || peer.status === 'banned') conn.close();
          conn.onClose(() => {
            if (e.conn === opening) e.conn = undefined;
          });
          if (peer.status === 'idle') peer.status = 'active';
        },
        () => {
          if (e.conn === opening) e.conn = undefined;
        },
      );
    }
    return e.conn;
  }

  /** An answer came in `ms`. */
  onSuccess(peer: PoolPeer, ms: number): void {
    peer.latencyMs = peer.latencyMs === undefined ? ms : 0.8 * peer.latencyMs + 0.2 * ms;
    peer.failures = 0;
    if (peer.status === 'slow' || peer.status === 'idle') peer.status = 'active';
  }

  /** A timeout or a lost connection: back off, mark slow, and drop the peer after `maxFailures` in a row. */
  onFailure(peer: PoolPeer, now = performance.now()): void {
    if (peer.status === 'banned' || peer.status === 'failed') return;
    peer.failures += 1;
    peer.notBefore = now + Math.min(2000, 50 * 2 ** peer.failures);
    peer.status = peer.failures >= this.#maxFailures ? 'failed' : 'slow';
    if (peer.status === 'failed') this.#drop(peer);
  }

  /** `BUSY`: back off without counting a failure. */
  onBusy(peer: PoolPeer, now = performance.now()): void {
    peer.notBefore = now + 50;
  }

  /** Bans `peer` for the session with `code` and closes its connection. */
  ban(peer: PoolPeer, code: string, reason: string): void {
    if (peer.status === 'banned') return;
    peer.status = 'banned';
    peer.banCode = code;
    this.#drop(peer);
    this.#onBan?.(peer, code, reason);
  }

  #drop(peer: PoolPeer): void {
    const e = this.#entries.get(peer)!;
    const conn = e.conn;
    e.conn = undefined;
    conn?.then((c) => c.close(), () => {});
  }

  /** Closes every connection; the pool cannot be used after. */
  close(): void {
    this.#closed = true;
    this.#lifetime.abort();
    for (const p of this.#entries.keys()) this.#drop(p);
  }
}
