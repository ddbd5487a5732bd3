// The sync's scheduling policy alone (src/sync/scheduler.ts): no sockets, no
// timers, no sleeps; time is a number the test sets, peers are strings.
import { describe, expect, it } from 'vitest';
import { HEDGE_LATENCY_FACTOR, HEDGE_MIN_MS, Scheduler } from '../src/sync/scheduler.js';

/** Hands out everything the queue holds to `peer` at `now`, as the engine would. */
function drain(s: Scheduler<string>, peer: string, now: number): number[] {
  const got: number[] = [];
  for (let next = s.next(peer, true, now); next && !next.hedge; next = s.next(peer, true, now)) {
    s.requested(peer, next.index, now);
    got.push(next.index);
  }
  return got;
}

/** Hands out at most `n` chunks to `peer` at `now`. */
function drainSome(s: Scheduler<string>, peer: string, now: number, n: number): number[] {
  const got: number[] = [];
  while (got.length < n) {
    const next = s.next(peer, true, now);
    if (next === undefined || next.hedge) break;
    s.requested(peer, next.index, now);
    got.push(next.index);
  }
  return got;
}

describe('Scheduler', () => {
  it('asks for chunk 0 first; until its count is known, other peers race for it, each once', () => {
    const s = new Scheduler<string>();
    expect(s.next('a', false, 0)).toEqual({ index: 0, hedge: false });
    s.requested('a', 0, 0);
    expect(s.next('a', true, 1)).toBeUndefined();
    expect(s.next('b', false, 1)).toEqual({ index: 0, hedge: true });
    s.requested('b', 0, 1);
    expect(s.next('b', true, 2)).toBeUndefined();
    expect(s.next('c', false, 2)).toEqual({ index: 0, hedge: true });
  });

  it('queues every other chunk once the count is known, and never one already in or out', () => {
    const s = new Scheduler<string>();
    s.requested('a', s.next('a', false, 0)!.index, 0);
    s.learnChunkCount(5);
    s.learnChunkCount(9); // the first count stands
    expect(drain(s, 'b', 1)).toEqual([1, 2, 3, 4]);
    expect(s.chunkCount).toBe(5);
  });

  it('never hands out restored chunks, and is complete once the others are in', () => {
    const s = new Scheduler<string>([0, 2, 3], 5);
    expect(s.done).toBe(3);
    expect(drain(s, 'a', 0)).toEqual([1, 4]);
    for (const i of [1, 4]) {
      s.settled('a', i);
      expect(s.receive(i)).toBe(true);
    }
    expect(s.receive(4)).toBe(false); // a hedged duplicate
    expect(s.complete).toBe(true);
  });

  it('puts a failed chunk back first and counts it, unless it is in or another peer still fetches it', () => {
    const s = new Scheduler<string>([], 4);
    expect(drain(s, 'a', 0)).toEqual([0, 1, 2, 3]);
    s.settled('a', 2);
    s.requeue(2);
    expect(s.refetches).toBe(1);
    expect(s.next('b', true, 1)).toEqual({ index: 2, hedge: false });
    s.requested('b', 2, 1);
    s.settled('a', 1);
    s.receive(1);
    s.requeue(1); // in: not again
    s.requested('c', 3, 1); // a hedge of 3 is out
    s.settled('a', 3);
    s.requeue(3); // c still fetches it
    expect(s.refetches).toBe(1);
  });

  it('puts a chunk answered BUSY back last: the chunks still queued are asked first', () => {
    const s = new Scheduler<string>([], 4);
    s.requested('a', s.next('a', true, 0)!.index, 0);
    s.settled('a', 0);
    s.requeue(0, true);
    expect(drain(s, 'a', 1)).toEqual([1, 2, 3, 0]);
  });

  it('hedges in the endgame only once a request is overdue, oldest first, with at most two fetchers and never the same peer', () => {
    const s = new Scheduler<string>([], 3);
    s.requested('a', s.next('a', true, 0)!.index, 0); // 0 since t = 0
    s.requested('a', s.next('a', true, 5)!.index, 5); // 1 since t = 5
    s.requested('b', s.next('b', true, 6)!.index, 6); // 2 since t = 6
    s.observeLatency(20); // overdue after max(10, 2 · 20) = 40 ms
    const due = HEDGE_LATENCY_FACTOR * 20;
    expect(due).toBeGreaterThan(HEDGE_MIN_MS);
    s.beginRound();
    expect(s.next('c', true, due - 1)).toBeUndefined();
    expect(s.hedgeDueAt).toBe(due); // the oldest, 0, is due at t = 40
    expect(s.next('c', true, due)).toEqual({ index: 0, hedge: true });
    s.requested('c', 0, due);
    expect(s.next('b', true, due + 10)).toEqual({ index: 1, hedge: true }); // 0 has two fetchers now
    s.requested('b', 1, due + 10);
    expect(s.next('a', true, due + 10)).toEqual({ index: 2, hedge: true });
    s.requested('a', 2, due + 10);
    expect(s.next('d', true, 1000)).toBeUndefined(); // every request has two fetchers
  });

  it('gives a peer never asked anything the oldest outstanding request at once', () => {
    const s = new Scheduler<string>([], 2);
    s.requested('a', s.next('a', true, 0)!.index, 0);
    s.requested('a', s.next('a', true, 1)!.index, 1);
    s.observeLatency(500);
    expect(s.next('b', true, 2)).toBeUndefined();
    expect(s.next('late', false, 2)).toEqual({ index: 0, hedge: true });
  });

  it('a hedged pair that loses one is looked at again at once, not at the cached due time', () => {
    const s = new Scheduler<string>([], 1);
    s.requested('a', s.next('a', true, 0)!.index, 0);
    s.observeLatency(100);
    expect(s.next('b', true, 200)).toEqual({ index: 0, hedge: true });
    s.requested('b', 0, 200);
    expect(s.next('c', true, 201)).toBeUndefined(); // two fetchers: nothing can be due, and that is cached
    s.settled('a', 0); // a timed out: b alone fetches 0, since t = 200
    s.beginRound();
    expect(s.next('c', true, 202)).toBeUndefined();
    expect(s.hedgeDueAt).toBe(400); // 200 + 2 · 100
    expect(s.next('c', true, 400)).toEqual({ index: 0, hedge: true });
  });
  it('keeps its queue small whatever the chunk count: a root naming 2^32 - 1 chunks allocates nothing per chunk', () => {
    const max = 2 ** 32 - 1;
    const s = new Scheduler<string>();
    s.requested('a', s.next('a', false, 0)!.index, 0);
    s.learnChunkCount(max); // returns at once: no entry per chunk
    expect(s.chunkCount).toBe(max);
    expect(s.queueEntries).toBe(0);
    const first: number[] = [];
    for (let k = 0; k < 1000; k++) {
      const next = s.next('b', true, 1)!;
      expect(next.hedge).toBe(false);
      s.requested('b', next.index, 1);
      first.push(next.index);
    }
    expect(first).toEqual(Array.from({ length: 1000 }, (_, k) => k + 1));
    // Put back: first (a lost request) and last (BUSY) go before and after the untouched range.
    s.settled('b', 7);
    s.requeue(7);
    s.settled('b', 8);
    s.requeue(8, true);
    expect(s.queueEntries).toBe(2);
    expect(s.next('c', true, 2)).toEqual({ index: 7, hedge: false });
    expect(s.next('c', true, 2)).toEqual({ index: 1001, hedge: false });
    expect(s.queueEntries).toBe(1);
    expect(s.complete).toBe(false);
  });

  it('a schedule restored with a huge known count hands out the gaps in order, with no entry per chunk', () => {
    const s = new Scheduler<string>([0, 1, 3], 2 ** 32 - 1);
    expect(s.queueEntries).toBe(0);
    expect(drainSome(s, 'a', 0, 4)).toEqual([2, 4, 5, 6]);
  });

  it('a chunk put back last before the count is known comes before the rest of the chunks, as it always did', () => {
    const s = new Scheduler<string>();
    s.requested('a', s.next('a', false, 0)!.index, 0);
    s.settled('a', 0);
    s.requeue(0, true);
    s.learnChunkCount(3);
    expect(drain(s, 'b', 1)).toEqual([0, 1, 2]);
  });
});
