/**
 * Which chunk a peer fetches next: the chunks nobody fetches yet, who
 * fetches what since when, and the endgame's hedging. Pure: it opens no
 * connection and reads no clock (every call is given `now`, in ms), and
 * peers are opaque keys, so that the policy is tested without sockets
 * (`test/scheduler.test.ts`). The engine (`engine.ts`) asks it and acts.
 * @module
 */

/**
 * Endgame hedging: once nothing is left to hand out, an outstanding request
 * is asked of a second peer only when it is this many times older than the
 * session's smoothed response time. Earlier, a hedge is nearly always a
 * duplicate download (and a duplicate verification) of a chunk that was
 * about to arrive; later, a staller holds the sync's tail hostage.
 */
export const HEDGE_LATENCY_FACTOR = 2;

/** Never hedge a request younger than this (ms), however fast the peers answer. */
export const HEDGE_MIN_MS = 10;

/** What to ask a peer for next. */
export interface NextChunk {
  readonly index: number;
  /** A second request for a chunk another peer is fetching. */
  readonly hedge: boolean;
}

export class Scheduler<Peer> {
  /*
   * The indices to fetch that nobody is fetching, next first, are, in order:
   * `#head`, then the range `#cursor` up to `#end` (never handed out yet),
   * then `#tail`. The range is two numbers, not an entry per chunk: a root
   * may name up to 2^32 - 1 chunks, and the queue's memory grows with the
   * chunks put back, not with the count. An index in the range that is in
   * (restored) is skipped when the cursor reaches it.
   */
  /** Chunks put back first, and chunk 0 until the count is known. */
  readonly #head: number[] = [];
  #cursor = 0;
  #end = 0;
  /** Chunks put back last once the count is known (after the range). */
  readonly #tail: number[] = [];
  /** Who is fetching each index, and since when (ms). */
  readonly #fetchers = new Map<number, Map<Peer, number>>();
  readonly #received = new Set<number>();
  #chunkCount: number | undefined;
  /** Smoothed response time of every valid chunk, any peer (ms). */
  #latencyMs: number | undefined;
  /**
   * No hedge is due, for any peer, before this time while the hedging delay
   * stays at least `#noHedgeDelay`: lets `next` skip the scan of every
   * outstanding request on each call. Reset when a hedged pair loses one.
   */
  #noHedgeBefore = 0;
  #noHedgeDelay = Infinity;
  /** The earliest time a hedge not yet due becomes due (`beginRound` resets it). */
  hedgeDueAt = Infinity;
  /** Chunks put back after a rejection, a timeout or a lost connection. */
  refetches = 0;

  /** A schedule with `held` chunks in already (restored from a store), of `chunkCount` if known. */
  constructor(held: Iterable<number> = [], chunkCount?: number) {
    for (const index of held) this.#received.add(index);
    this.#chunkCount = chunkCount;
    if (chunkCount === undefined) this.#head.push(0);
    else this.#end = chunkCount;
  }

  get chunkCount(): number | undefined {
    return this.#chunkCount;
  }

  /** Chunks in. */
  get done(): number {
    return this.#received.size;
  }

  get complete(): boolean {
    return this.#received.size === this.#chunkCount;
  }

  has(index: number): boolean {
    return this.#received.has(index);
  }

  /**
   * How many indices the queue holds as entries (chunks put back, chunk 0
   * before the count is known), not counting the range never handed out:
   * its memory, whatever the chunk count. For tests.
   */
  get queueEntries(): number {
    return this.#head.length + this.#tail.length;
  }

  /** Whether a request for `index` is out. */
  isOut(index: number): boolean {
    return this.#fetchers.has(index);
  }

  /** The chunk count an authenticated chunk told: every index not in or out is queued. */
  learnChunkCount(chunkCount: number): void {
    if (this.#chunkCount !== undefined) return;
    this.#chunkCount = chunkCount;
    // Chunk 0 is the first asked for: it is out (or in) when the count
    // arrives, and no other index was handed out before it.
    this.#cursor = 1;
    this.#end = Math.max(1, chunkCount);
  }

  /** A valid chunk came in `ms`, new or not. */
  observeLatency(ms: number): void {
    this.#latencyMs = this.#latencyMs === undefined ? ms : 0.8 * this.#latencyMs + 0.2 * ms;
  }

  /** Marks `index` in; false if it already was (a hedged duplicate). */
  receive(index: number): boolean {
    if (this.#received.has(index)) return false;
    this.#received.add(index);
    return true;
  }

  /** Starts a pass over the peers: `hedgeDueAt` gathers again. */
  beginRound(): void {
    this.hedgeDueAt = Infinity;
  }

  /** `peer` asked for `index` at `now`. */
  requested(peer: Peer, index: number, now: number): void {
    const who = this.#fetchers.get(index) ?? new Map<Peer, number>();
    who.set(peer, now);
    this.#fetchers.set(index, who);
  }

  /** `peer`'s request for `index` ended (answered, failed or timed out). */
  settled(peer: Peer, index: number): void {
    const who = this.#fetchers.get(index);
    who?.delete(peer);
    if (who?.size === 0) this.#fetchers.delete(index);
    else if (who !== undefined) this.#noHedgeBefore = 0; // a hedged pair lost one: it may be due now
  }

  /**
   * Puts `index` back, unless it is in or still being fetched: first (a
   * lie's or a lost request's chunk is asked of another peer at once), or
   * with `last` after every queued chunk (a `BUSY` one: a peer that cannot
   * serve that chunk now, say a damaged record, is not asked for it again
   * before the chunks it can serve).
   */
  requeue(index: number, last = false): void {
    if (this.#received.has(index) || (this.#fetchers.get(index)?.size ?? 0) > 0) return;
    this.refetches += 1;
    if (!last) this.#head.unshift(index);
    else if (this.#chunkCount === undefined) this.#head.push(index); // before the range, which is not known yet
    else this.#tail.push(index);
  }

  /**
   * The next chunk for `peer` at `now`: from the queue, or, in the endgame,
   * a hedge. `askedBefore`: whether the peer was ever asked anything (a
   * peer never asked, whose connection opened late, gets the oldest
   * outstanding request at once: every reachable peer is tried, and a liar
   * shows itself, for one duplicate).
   */
  next(peer: Peer, askedBefore: boolean, now: number): NextChunk | undefined {
    const free = (index: number): boolean => !this.#received.has(index) && !this.#fetchers.has(index);
    while (this.#head.length > 0) {
      const index = this.#head.shift()!;
      if (free(index)) return { index, hedge: false };
    }
    // Each turn moves the cursor on: at most the count's worth in all, and
    // only restored (or, never in practice, out) indices are passed over.
    while (this.#cursor < this.#end) {
      const index = this.#cursor++;
      if (free(index)) return { index, hedge: false };
    }
    while (this.#tail.length > 0) {
      const index = this.#tail.shift()!;
      if (free(index)) return { index, hedge: false };
    }
    // Before the first chunk tells the total, any number of peers may race
    // for chunk 0, so that stallers listed first cannot hold the start.
    if (this.#chunkCount === undefined) {
      for (const [index, who] of this.#fetchers) if (!who.has(peer)) return { index, hedge: true };
      return undefined;
    }
    // Endgame: ask a second peer for a request that is overdue, oldest
    // first, so that a staller cannot hold the sync hostage; one that is
    // not overdue yet sets when to look again.
    const after = askedBefore ? Math.max(HEDGE_MIN_MS, HEDGE_LATENCY_FACTOR * (this.#latencyMs ?? 0)) : 0;
    if (now < this.#noHedgeBefore && after >= this.#noHedgeDelay) {
      this.hedgeDueAt = Math.min(this.hedgeDueAt, this.#noHedgeBefore);
      return undefined;
    }
    let pick: number | undefined;
    let pickSince = Infinity;
    let firstDue = Infinity;
    for (const [index, who] of this.#fetchers) {
      if (who.size >= 2) continue;
      let since = Infinity;
      for (const t of who.values()) since = Math.min(since, t);
      firstDue = Math.min(firstDue, since + after);
      if (who.has(peer)) continue;
      if (now - since >= after) {
        if (since < pickSince) {
          pick = index;
          pickSince = since;
        }
      } else {
        this.hedgeDueAt = Math.min(this.hedgeDueAt, since + after);
      }
    }
    if (pick === undefined) {
      this.#noHedgeBefore = firstDue;
      this.#noHedgeDelay = after;
    }
    return pick === undefined ? undefined : { index: pick, hedge: true };
  }
}
