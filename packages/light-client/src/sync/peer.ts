/**
 * One peer's standing in a sync: its connection, an in-flight window that
 * grows with successes and halves on timeouts (like TCP: one more request
 * per success up to a threshold, "slow start", then one more per window of
 * successes, AIMD), a latency estimate, and backoff.
 * @module
 */

import type { PeerConnection } from '../transport/types.js';
import type { PeerStatus } from './types.js';

export class PeerState {
  readonly address: string;
  conn: PeerConnection | undefined;
  status: PeerStatus = 'connecting';
  /** Chunk indices this peer is fetching now. */
  readonly inflight = new Set<number>();
  /** Fractional so that it grows by about one per window of successes. */
  window: number;
  readonly maxWindow: number;
  /** Below it the window grows by one per success; above, by one per window. Halved on failures. */
  threshold: number;
  /** Smoothed response time in ms. */
  latencyMs: number | undefined;
  /** Consecutive timeouts or lost connections. */
  failures = 0;
  /** No new request before this time (ms, performance.now()). */
  notBefore = 0;
  connecting = false;
  /** Requests sent to this peer so far. */
  requests = 0;
  /** Whether a connection to it ever opened. */
  connected = false;
  /** When it last sent a valid chunk (or when the session started; ms, performance.now()). */
  lastProgress: number;
  /** Since `lastProgress`: BUSY answers, and timeouts, lost connections or failed connects. */
  busySince = 0;
  failedSince = 0;
  served = 0;
  bytes = 0;

  constructor(address: string, initialWindow: number, maxWindow: number, now: number) {
    this.address = address;
    this.lastProgress = now;
    this.window = Math.min(initialWindow, maxWindow);
    this.maxWindow = maxWindow;
    this.threshold = maxWindow;
  }

  /** Whether the peer may be asked for more now. */
  canRequest(now: number): boolean {
    return (
      this.conn !== undefined &&
      !this.conn.isClosed &&
      (this.status === 'active' || this.status === 'slow') &&
      now >= this.notBefore &&
      this.inflight.size < Math.floor(this.window)
    );
  }

  /**
   * Whether to hand the peer work now: it may request, and it has room for a
   * batch of a quarter of its window (at least one), so that requests leave
   * several to a message rather than one per response.
   */
  wantsWork(now: number): boolean {
    if (!this.canRequest(now)) return false;
    const w = Math.floor(this.window);
    return w - this.inflight.size >= Math.max(1, w >> 2);
  }

  /** Whether the peer may still help (it is not banned or dropped). */
  get usable(): boolean {
    return this.status !== 'banned' && this.status !== 'failed';
  }

  onSuccess(ms: number, bytes: number): void {
    this.latencyMs = this.latencyMs === undefined ? ms : 0.8 * this.latencyMs + 0.2 * ms;
    const step = this.window < this.threshold ? 1 : 1 / Math.floor(this.window);
    this.window = Math.min(this.maxWindow, this.window + step);
    this.failures = 0;
    this.lastProgress = performance.now();
    this.busySince = 0;
    this.failedSince = 0;
    this.served += 1;
    this.bytes += bytes;
    if (this.status === 'slow') this.status = 'active';
  }

  /** A timeout or a lost connection: shrink, back off, and mark slow. */
  onFailure(now: number): void {
    this.failures += 1;
    this.failedSince += 1;
    this.window = Math.max(1, this.window / 2);
    this.threshold = this.window;
    this.notBefore = now + Math.min(2000, 100 * 2 ** this.failures);
    if (this.status === 'active') this.status = 'slow';
  }

  /**
   * Whether the peer made no progress for `stallMs` while it was tried (a
   * peer with nothing to do is not stalled).
   */
  stalled(now: number, stallMs: number): boolean {
    return now - this.lastProgress >= stallMs && (this.busySince + this.failedSince > 0 || this.connecting);
  }

  /** Why a peer that made no progress is unusable (`spec/wire.md`, "Giving up"). */
  get stallOutcome(): { outcome: 'unreachable' | 'unresponsive' | 'busy'; code: string } {
    if (!this.connected) return { outcome: 'unreachable', code: 'CONNECT_FAILED' };
    if (this.failedSince === 0 && this.busySince > 0) return { outcome: 'busy', code: 'BUSY' };
    return { outcome: 'unresponsive', code: 'TIMEOUT' };
  }

  /** `BUSY`: back off without counting a failure. */
  onBusy(now: number): void {
    this.busySince += 1;
    this.window = Math.max(1, this.window - 1);
    this.threshold = this.window;
    this.notBefore = now + 100;
  }
}
