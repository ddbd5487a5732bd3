// The collection after a burst of answers (src/release.ts), on a fake clock
// and a fake collector: once after each burst that has gone quiet, never
// while answers are queued, never without a burst.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { collectAfterBursts } from '../src/release.ts';

// Only the interval and the clock are fake: the last case needs a real turn of the event loop.
beforeEach(() => vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] }));
afterEach(() => vi.useRealTimers());

describe('collectAfterBursts', () => {
  it('collects once when a burst has been quiet for quietMs, and again after the next burst', () => {
    let bytes = 0;
    const collect = vi.fn();
    const stop = collectAfterBursts(() => bytes, { burstBytes: 100, quietMs: 2_000, collect });
    vi.advanceTimersByTime(10_000);
    expect(collect).not.toHaveBeenCalled(); // no burst yet
    bytes = 150;
    vi.advanceTimersByTime(5_000);
    expect(collect).not.toHaveBeenCalled(); // answers still queued
    bytes = 0;
    vi.advanceTimersByTime(1_000);
    expect(collect).not.toHaveBeenCalled(); // not quiet for long enough
    vi.advanceTimersByTime(2_000);
    expect(collect).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(30_000);
    expect(collect).toHaveBeenCalledTimes(1); // once per burst
    bytes = 99; // below a burst
    vi.advanceTimersByTime(1_000);
    bytes = 0;
    vi.advanceTimersByTime(5_000);
    expect(collect).toHaveBeenCalledTimes(1);
    bytes = 100;
    vi.advanceTimersByTime(1_000);
    bytes = 0;
    vi.advanceTimersByTime(3_000);
    expect(collect).toHaveBeenCalledTimes(2);
    stop();
    bytes = 500;
    vi.advanceTimersByTime(1_000);
    bytes = 0;
    vi.advanceTimersByTime(5_000);
    expect(collect).toHaveBeenCalledTimes(2); // stopped
  });

  it('a quiet spell is broken by any queued answer', () => {
    let bytes = 200;
    const collect = vi.fn();
    const stop = collectAfterBursts(() => bytes, { burstBytes: 100, quietMs: 2_000, collect });
    vi.advanceTimersByTime(1_000);
    bytes = 0;
    vi.advanceTimersByTime(1_500);
    bytes = 1;
    vi.advanceTimersByTime(500);
    bytes = 0;
    vi.advanceTimersByTime(1_500);
    expect(collect).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1_000);
    expect(collect).toHaveBeenCalledTimes(1);
    stop();
  });

  it("by default runs V8's full collection, without --expose-gc", async () => {
    let bytes = 0;
    const stop = collectAfterBursts(() => bytes, { burstBytes: 1, quietMs: 0 });
    const ref = (() => new WeakRef({ garbage: new Array(1000).fill(1) }))();
    await new Promise((resolve) => setImmediate(resolve)); // the job that made the target ends
    expect(ref.deref()).toBeDefined(); // nothing has collected it yet
    await new Promise((resolve) => setImmediate(resolve)); // …and that look ends too
    bytes = 1;
    vi.advanceTimersByTime(500);
    bytes = 0;
    vi.advanceTimersByTime(1_000);
    expect(ref.deref()).toBeUndefined();
    stop();
  });
});
