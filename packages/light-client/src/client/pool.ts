/**
 * A pool of untrusted peers: lazy connections, a latency estimate per peer,
 * back-off after timeouts and `BUSY`, and bans for the session. It knows
 * nothing of proofs or chunks, so that the query client uses it today and
 * the sync engine can adopt it (`spec/wire.md`, "What the client checks":
 * a slow peer is down-weighted, a lying one banned).
 * @module
 */

import type { PeerReport } from '../sync/types.js';
import { type Connect, type PeerConnection, TransportError } from '../transport/types.js';
import { WireError } from '../wire/errors.js';

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
  /** Whether a connection to it ever opened. */
  connected: boolean;
  /** When it last gave a valid answer, or when its current wait began (ms, `performance.now()`). */
  lastProgress: number;
  /** Since `lastProgress`: `BUSY` answers, and timeouts, lost connections or failed connects. */
  busySince: number;
  failedSince: number;
  /** The status it last refused a request with (`UNKNOWN_ROOT`, `BAD_REQUEST`), until it answers. */
  refused?: string;
  /**
   * Roots it denied (`UNKNOWN_ROOT`) and then listed in `ROOTS`, with when
   * that list came (ms): denying one again in a request sent after it is a
   * lie (`ask`). The last few only.
   */
  listed: { root: Uint8Array; at: number }[];
  /** Why the pool gave it up (banned or dropped), once it did. */
  report?: PeerReport;
}

/** Options of {@link PeerPool}. */
export interface PeerPoolOptions {
  /** Opens a connection to an address. */
  connect: Connect;
  /** Deadline of one connection attempt, handshakes included (the transport's default if absent). */
  connectTimeoutMs?: number;
  /** Consecutive timeouts or lost connections after which a peer is dropped (default 4). */
  maxFailures?: number;
  /** Called when a peer is banned. */
  onBan?: (peer: PoolPeer, code: string, reason: string) => void;
  /**
   * The stall deadline (`spec/wire.md`, "Giving up"): a peer with no valid
   * answer for this long, since the pool opened or its last valid answer,
   * while it only answered `BUSY` or failed, is dropped, and its requests
   * fail at once. Off by default.
   */
  stallMs?: number;
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
  readonly #connectTimeoutMs: number | undefined;
  readonly #maxFailures: number;
  readonly #onBan: PeerPoolOptions['onBan'];
  readonly #stallMs: number | undefined;
  /** The pending stall check, and when it is due. */
  #stallTimer: ReturnType<typeof setTimeout> | undefined;
  #stallCheckAt = Infinity;
  #closed = false;
  /** Aborts connects still opening when the pool closes. */
  readonly #lifetime = new AbortController();

  constructor(addresses: readonly string[], opts: PeerPoolOptions) {
    const now = performance.now();
    for (const address of new Set(addresses)) {
      const peer: PoolPeer = {
        address,
        status: 'idle',
        latencyMs: undefined,
        inflight: 0,
        failures: 0,
        notBefore: 0,
        connected: false,
        lastProgress: now,
        busySince: 0,
        failedSince: 0,
        listed: [],
      };
      this.#entries.set(peer, { peer, conn: undefined });
    }
    this.#connect = opts.connect;
    this.#connectTimeoutMs = opts.connectTimeoutMs;
    this.#maxFailures = opts.maxFailures ?? 4;
    this.#onBan = opts.onBan;
    this.#stallMs = opts.stallMs;
  }

  /** Whether {@link close} was called: a request failing from now on fails because of it. */
  get closed(): boolean {
    return this.#closed;
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
   * A report per peer given up on (banned or dropped), and per peer that
   * refused its last request (`UNKNOWN_ROOT`, `BAD_REQUEST`): what a
   * `NO_HONEST_PEERS` error carries (`spec/wire.md`, "Giving up").
   */
  reports(): PeerReport[] {
    return this.peers.flatMap((p): PeerReport[] => {
      if (p.report !== undefined) return [p.report];
      if (p.refused !== undefined) return [{ peer: p.address, outcome: 'refused', reason: `answered ${p.refused}`, code: p.refused }];
      return [];
    });
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
      const opening = this.#connect(peer.address, this.#lifetime.signal, this.#connectTimeoutMs === undefined ? undefined : { timeoutMs: this.#connectTimeoutMs });
      e.conn = opening;
      opening.then(
        (conn) => {
          peer.connected = true;
          if (this.#closed || peer.status === 'banned') conn.close();
          // A protocol fault bans the peer even when no request was open to fail (`spec/wire.md`, "Duplicates").
          conn.onClose((reason) => {
            if (e.conn === opening) e.conn = undefined;
            if (reason instanceof WireError) this.ban(peer, reason.code, `broke the wire protocol: ${reason.message}`);
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

  /** A valid answer came in `ms`. */
  onSuccess(peer: PoolPeer, ms: number): void {
    peer.latencyMs = peer.latencyMs === undefined ? ms : 0.8 * peer.latencyMs + 0.2 * ms;
    peer.failures = 0;
    peer.lastProgress = performance.now();
    peer.busySince = 0;
    peer.failedSince = 0;
    delete peer.refused;
    if (peer.status === 'slow' || peer.status === 'idle') peer.status = 'active';
  }

  /** The peer refused a request with `code` (`UNKNOWN_ROOT`, `BAD_REQUEST`): not a fault, but reported if nobody is left. */
  onRefused(peer: PoolPeer, code: string): void {
    peer.refused = code;
  }

  /** A timeout, a lost connection or a failed connect: back off, mark slow, and drop the peer after `maxFailures` in a row. */
  onFailure(peer: PoolPeer, now = performance.now()): void {
    if (peer.status === 'banned' || peer.status === 'failed') return;
    this.#troubled(peer, now);
    peer.failures += 1;
    peer.failedSince += 1;
    peer.notBefore = now + Math.min(2000, 50 * 2 ** peer.failures);
    if (peer.failures < this.#maxFailures) peer.status = 'slow';
    else this.#giveUp(peer, `${peer.failures} failures in a row`);
  }

  /** `BUSY`: back off without counting a failure. */
  onBusy(peer: PoolPeer, now = performance.now()): void {
    if (peer.status === 'banned' || peer.status === 'failed') return;
    this.#troubled(peer, now);
    peer.busySince += 1;
    peer.notBefore = now + 50;
  }

  /** Bans `peer` for the session with `code` and closes its connection. */
  ban(peer: PoolPeer, code: string, reason: string): void {
    if (peer.status === 'banned') return;
    peer.status = 'banned';
    peer.banCode = code;
    peer.report = { peer: peer.address, outcome: 'banned', reason, code };
    this.#drop(peer);
    this.#onBan?.(peer, code, reason);
  }

  /** Drops a peer that is not lying but cannot help, with its outcome (`spec/wire.md`, "Giving up"). */
  #giveUp(peer: PoolPeer, reason: string): void {
    peer.status = 'failed';
    const [outcome, code] = !peer.connected
      ? (['unreachable', 'CONNECT_FAILED'] as const)
      : peer.failedSince === 0 && peer.busySince > 0
        ? (['busy', 'BUSY'] as const)
        : (['unresponsive', 'TIMEOUT'] as const);
    peer.report = { peer: peer.address, outcome, reason, code };
    this.#drop(peer);
  }

  /**
   * The peer answered `BUSY` or failed. Its stall clock runs from its last
   * valid answer; a peer that had nothing to do for a whole stall deadline
   * before starts a new one now.
   */
  #troubled(peer: PoolPeer, now: number): void {
    if (this.#stallMs === undefined) return;
    if (peer.busySince + peer.failedSince === 0 && now - peer.lastProgress >= this.#stallMs) peer.lastProgress = now;
    this.#checkStallsAt(peer.lastProgress + this.#stallMs);
  }

  /** Drops the peers stalled by `at` then (their requests fail at once: the connection closes). */
  #checkStallsAt(at: number): void {
    if (at >= this.#stallCheckAt || this.#closed) return;
    if (this.#stallTimer !== undefined) clearTimeout(this.#stallTimer);
    this.#stallCheckAt = at;
    this.#stallTimer = setTimeout(() => {
      this.#stallTimer = undefined;
      this.#stallCheckAt = Infinity;
      const now = performance.now();
      for (const p of this.usable()) {
        if (p.busySince + p.failedSince === 0) continue;
        if (now - p.lastProgress >= this.#stallMs!) this.#giveUp(p, `no valid answer in ${this.#stallMs} ms`);
        else this.#checkStallsAt(p.lastProgress + this.#stallMs!);
      }
    }, Math.max(1, at - performance.now()));
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
    if (this.#stallTimer !== undefined) clearTimeout(this.#stallTimer);
    this.#lifetime.abort();
    for (const p of this.#entries.keys()) this.#drop(p);
  }
}
