/**
 * What the page knows about a running sync, folded from the engine's
 * events (`SyncEvent` of `@bpavl/light-client/sync`). No protocol logic:
 * every decision (verify, ban, refetch) is the engine's; this only counts.
 * @module
 */

import type { CatchUpEvent, PeerStatus, SyncEvent } from '@bpavl/light-client/sync';

/** A sync's states, then, after a catch-up, the new version's: `changed` (fetched by it), `kept` (shared with the version before). */
export type CellState = 'pending' | 'inflight' | 'verified' | 'rejected' | 'restored' | 'changed' | 'kept';

/**
 * What a catch-up's request may be refused with without a lie (`QueryEvent`
 * of `@bpavl/light-client`): a peer at its request limit, restarting, slow,
 * not (yet) serving the root, or predating the kind. The request goes to
 * another peer; nobody is banned. A lie, even with one of these codes
 * (`UNKNOWN_ROOT` for a root the peer listed), is followed by a ban.
 */
const TRANSIENT = new Set(['BUSY', 'CONNECT_FAILED', 'CONNECTION_CLOSED', 'TIMEOUT', 'UNKNOWN_ROOT', 'BAD_REQUEST']);

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
  /** A catch-up's answer that was a lie: the peer was banned for it (`banned`), or had been already. */
  ban?: 'banned' | 'already';
  /** Why, for a ban that came with no rejected answer. */
  reason?: string;
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
  /**
   * A catch-up's refusals that were no lie (`BUSY`, a failed connect to a
   * peer that is restarting, …), by code: counted, not listed, since the
   * log is there to show the liars.
   */
  readonly transient = new Map<string, number>();
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
      this.#last = undefined;
      const p = this.peer(e.peer);
      if (p.status === 'connecting') p.status = 'active';
    } else if (e.type === 'rejected') {
      const p = this.peer(e.peer);
      this.#last = undefined;
      if (TRANSIENT.has(e.code)) {
        // Listed only if the ban that a lie brings follows at once (see `banned`).
        this.#last = { at, kind: e.kind, peer: e.peer, code: e.code };
        this.transient.set(e.code, (this.transient.get(e.code) ?? 0) + 1);
      } else {
        // A lie: its ban follows at once, unless the peer was banned already (a request that was out then).
        const entry: LogEntry = { at, kind: e.kind, peer: e.peer, code: e.code, ...(p.status === 'banned' && { ban: 'already' as const }) };
        p.rejected += 1;
        this.rejected += 1;
        this.log.push(entry);
        this.#last = entry;
      }
      this.dirtyLog = true;
    } else if (e.type === 'banned') {
      const p = this.peer(e.peer);
      p.status = 'banned';
      p.reason = e.reason;
      p.code = e.code;
      const last = this.#last;
      this.#last = undefined;
      if (last && last.peer === e.peer && last.code === e.code && last.ban === undefined) {
        if (!this.log.includes(last)) {
          // A code that is mostly a refusal (`UNKNOWN_ROOT` of a root the peer listed) was a lie this time: listed after all.
          const n = this.transient.get(last.code)! - 1;
          if (n > 0) this.transient.set(last.code, n);
          else this.transient.delete(last.code);
          p.rejected += 1;
          this.rejected += 1;
          this.log.push(last);
        }
        last.ban = 'banned';
      } else {
        // A ban that no rejected answer came with (a lie found at the end, e.g. `KEY_COPY_MISMATCH`): listed alone.
        this.log.push({ at, peer: e.peer, code: e.code, ban: 'banned', reason: e.reason });
      }
      this.dirtyLog = true;
    }
  }

  /** The catch-up's last rejected answer, until the next event says whether it brought a ban. */
  #last: LogEntry | undefined;

  /**
   * The version a catch-up made, as the grid shows it: `chunkCount` cells;
   * `changed` (the catch-up's `changedIndices`: increasing indices in this
   * version's chunk order) the chunks it stored, each different from every
   * chunk of the version before; the others kept from that version.
   */
  showVersion(chunkCount: number, changed: Uint32Array): void {
    this.chunkCount = chunkCount;
    this.totalChanged = true;
    this.cells.clear();
    for (let i = 0; i < chunkCount; i++) this.cells.set(i, { state: 'kept', requests: 0, rejections: [] });
    for (const i of changed) if (i < chunkCount) this.cells.get(i)!.state = 'changed';
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
