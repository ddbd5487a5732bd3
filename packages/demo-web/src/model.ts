/**
 * What the page knows about a running sync, folded from the engine's
 * events (`SyncEvent` of `@bpavl/light-client/sync`). No protocol logic:
 * every decision (verify, ban, refetch) is the engine's; this only counts.
 * @module
 */

import type { CatchUpEvent, PeerStatus, SyncEvent } from '@bpavl/light-client/sync';

export type CellState = 'pending' | 'inflight' | 'verified' | 'rejected' | 'restored';

/** A response the engine rejected. */
export interface Rejection {
  peer: string;
  code: string;
  /** Seconds since the start. */
  at: number;
}

/** One chunk of the grid. */
export interface Cell {
  state: CellState;
  /** Who is fetching it (in flight), or who served the verified copy. */
  peer?: string;
  bytes?: number;
  /** Request-to-verified time of the verified copy. */
  ms?: number;
  /** Seconds since the start when it verified. */
  at?: number;
  requests: number;
  rejections: Rejection[];
}

/** One row of the peer table. */
export interface PeerStats {
  address: string;
  status: PeerStatus | 'idle';
  reason?: string;
  code?: string;
  chunks: number;
  bytes: number;
  latencySumMs: number;
  rejected: number;
}

/** One line of the rejection log. */
export interface LogEntry {
  at: number;
  /** The chunk of a sync; a catch-up asks for pieces (`kind`), not chunks. */
  index?: number;
  kind?: string;
  peer: string;
  code: string;
  /** Who then served the chunk that verified. */
  refetchedFrom?: string;
  /** The rejected copy came after the chunk had verified (a hedged request in the endgame or at the start). */
  late?: boolean;
}

/** A point of the throughput series: verified bytes at a time. */
export interface Sample {
  t: number;
  bytes: number;
}

export class SyncModel {
  /** `performance.now()` at the start. */
  readonly started: number;
  /** Seconds from start to the end (done, failed or stopped), once over. */
  endedAt: number | undefined;
  /** The chunk count, known from the first verified chunk's authenticated path. */
  chunkCount: number | undefined;
  readonly cells = new Map<number, Cell>();
  readonly peers = new Map<string, PeerStats>();
  readonly log: LogEntry[] = [];
  readonly samples: Sample[] = [{ t: 0, bytes: 0 }];
  done = 0;
  /** Verified bytes. */
  bytes = 0;
  bytesPerSecond = 0;
  etaSeconds: number | undefined;
  rejected = 0;
  /** Chunks kept in this browser by an interrupted run, never fetched again. */
  restored = 0;
  /** Chunks durably written to this browser's storage (restored ones included). */
  stored = 0;

  /** What changed since the view last looked. */
  readonly dirtyCells = new Set<number>();
  readonly dirtyPeers = new Set<string>();
  dirtyLog = false;
  dirtyProgress = true;
  totalChanged = false;

  constructor(addresses: readonly string[], now: number) {
    this.started = now;
    for (const address of addresses) {
      this.peers.set(address, { address, status: 'connecting', chunks: 0, bytes: 0, latencySumMs: 0, rejected: 0 });
    }
  }

  /** Seconds since the start at `now`. */
  seconds(now: number): number {
    return this.endedAt ?? (now - this.started) / 1000;
  }

  private cell(index: number): Cell {
    let c = this.cells.get(index);
    if (!c) {
      c = { state: 'pending', requests: 0, rejections: [] };
      this.cells.set(index, c);
    }
    this.dirtyCells.add(index);
    return c;
  }

  private peer(address: string): PeerStats {
    let p = this.peers.get(address);
    if (!p) {
      p = { address, status: 'connecting', chunks: 0, bytes: 0, latencySumMs: 0, rejected: 0 };
      this.peers.set(address, p);
    }
    this.dirtyPeers.add(address);
    return p;
  }

  /** The chunk count, once an event tells it (authenticated by the root): the grid is built then. */
  private learnChunkCount(chunkCount: number | undefined): void {
    if (chunkCount !== undefined && this.chunkCount === undefined) {
      this.chunkCount = chunkCount;
      this.totalChanged = true;
    }
  }

  apply(e: SyncEvent, now: number): void {
    const at = (now - this.started) / 1000;
    switch (e.type) {
      case 'peer': {
        const p = this.peer(e.peer);
        // A banned peer stays banned: the engine never lifts a ban.
        if (p.status === 'banned') break;
        p.status = e.status;
        if (e.reason !== undefined) p.reason = e.reason;
        else if (e.status === 'active') delete p.reason;
        if (e.code !== undefined) p.code = e.code;
        break;
      }
      case 'peer-banned': {
        const p = this.peer(e.peer);
        p.status = 'banned';
        p.reason = e.reason;
        p.code = e.code;
        break;
      }
      case 'restored': {
        this.learnChunkCount(e.chunkCount);
        for (const i of e.indices) this.cell(i).state = 'restored';
        this.restored = e.chunks;
        this.done = e.chunks;
        this.dirtyProgress = true;
        break;
      }
      case 'stored':
        this.stored = e.chunks;
        this.dirtyProgress = true;
        break;
      case 'request': {
        const c = this.cell(e.index);
        c.requests += 1;
        if (c.state !== 'verified') {
          c.state = 'inflight';
          c.peer = e.peer;
        }
        break;
      }
      case 'chunk-verified': {
        const c = this.cell(e.index);
        c.state = 'verified';
        c.peer = e.peer;
        c.bytes = e.bytes;
        c.ms = e.ms;
        c.at = at;
        const p = this.peer(e.peer);
        p.chunks += 1;
        p.bytes += e.bytes;
        p.latencySumMs += e.ms;
        if (c.rejections.length > 0) {
          for (const entry of this.log) if (entry.index === e.index && entry.refetchedFrom === undefined) entry.refetchedFrom = e.peer;
          this.dirtyLog = true;
        }
        break;
      }
      case 'chunk-rejected': {
        const c = this.cell(e.index);
        c.rejections.push({ peer: e.peer, code: e.code, at });
        const late = c.state === 'verified';
        if (!late) c.state = 'rejected';
        this.peer(e.peer).rejected += 1;
        this.rejected += 1;
        this.log.push({ at, index: e.index, peer: e.peer, code: e.code, ...(late && { late, refetchedFrom: c.peer }) });
        this.dirtyLog = true;
        break;
      }
      case 'progress': {
        this.learnChunkCount(e.chunkCount);
        this.done = e.done;
        this.bytes = e.bytes;
        this.bytesPerSecond = e.bytesPerSecond;
        this.etaSeconds = e.etaSeconds;
        this.dirtyProgress = true;
        break;
      }
      case 'done':
        this.endedAt = e.seconds;
        this.etaSeconds = 0;
        this.dirtyProgress = true;
        break;
    }
  }

  /**
   * Folds a catch-up's event (`CatchUpEvent`): its pieces are not chunks,
   * so only the peer table and the rejection log move.
   */
  applyCatchUp(e: CatchUpEvent, now: number): void {
    const at = (now - this.started) / 1000;
    if (e.type === 'request' || e.type === 'verified') {
      const p = this.peer(e.peer);
      if (p.status === 'connecting') p.status = 'active';
    } else if (e.type === 'rejected') {
      this.peer(e.peer).rejected += 1;
      this.rejected += 1;
      this.log.push({ at, kind: e.kind, peer: e.peer, code: e.code });
      this.dirtyLog = true;
    } else if (e.type === 'banned') {
      const p = this.peer(e.peer);
      p.status = 'banned';
      p.reason = e.reason;
      p.code = e.code;
    }
  }

  /** Adds a throughput sample (call on a timer while the sync runs). */
  sample(now: number): void {
    this.samples.push({ t: this.seconds(now), bytes: this.bytes });
  }

  /** The run ended: cells still in flight go back to pending, peers never reached are idle again. */
  end(now: number): void {
    this.endedAt ??= (now - this.started) / 1000;
    for (const p of this.peers.values()) {
      if (p.status === 'connecting') {
        p.status = 'idle';
        this.dirtyPeers.add(p.address);
      }
    }
    for (const [i, c] of this.cells) {
      if (c.state === 'inflight') {
        c.state = 'pending';
        delete c.peer;
        this.dirtyCells.add(i);
      }
    }
    this.dirtyProgress = true;
  }

  /** Average request-to-verified time of a peer's chunks. */
  static latency(p: PeerStats): number | undefined {
    return p.chunks > 0 ? p.latencySumMs / p.chunks : undefined;
  }
}

/**
 * Throughput over time from cumulative samples: bytes per second over a
 * sliding window of `windowSeconds`, at each sample.
 */
export function throughput(samples: readonly Sample[], windowSeconds = 1): { t: number[]; rate: number[] } {
  const t: number[] = [];
  const rate: number[] = [];
  let j = 0;
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i]!;
    while (j < i && s.t - samples[j]!.t > windowSeconds) j++;
    const from = samples[j === i ? Math.max(0, i - 1) : j]!;
    const dt = s.t - from.t;
    t.push(s.t);
    rate.push(dt > 0 ? (s.bytes - from.bytes) / dt : 0);
  }
  return { t, rate };
}
