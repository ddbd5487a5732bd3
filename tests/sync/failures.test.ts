// Peers that die or stall mid-sync, and aborting a sync: the sync still
// completes with the exact tree, or fails with a typed error in bounded
// time, or (abort) rejects with the signal's reason and closes every
// connection on the serving side.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SyncError, syncState } from '../../packages/light-client/src/sync/index.js';
import {
  BoundExceeded,
  closeAll,
  expectCleanSync,
  kill,
  runSync,
  type Served,
  serve,
  sources,
  summary,
  waitFor,
} from './support.js';

beforeAll(() => {
  sources();
});

afterAll(closeAll, 30_000);

/** Waits (bounded) until no peer serves a connection any more; returns the counts. */
async function drained(peers: Served[], ms = 5000): Promise<number[]> {
  await waitFor(() => peers.every((p) => p.peer.server.connectionCount === 0), ms);
  return peers.map((p) => p.peer.server.connectionCount);
}

describe('peers that die or stall', () => {
  it('completes when honest peers are killed mid-sync while a staller never answers', async () => {
    const [h1, h2, v1, v2, staller] = await Promise.all([
      serve('ws'),
      serve('libp2p'),
      serve('ws'),
      serve('libp2p'),
      serve('ws', { mode: 'silent' }),
    ]);
    const victims = [v1!, v2!];
    const victimAddrs = new Set(victims.map((v) => v.address));
    let verified = 0;
    let killedAt = -1;
    const run = await runSync({
      // The staller first, so that it is asked for chunk 0 and hedges.
      peers: [staller!, v1!, h1!, v2!, h2!].map((p) => p.address),
      barrier: 5,
      requestTimeoutMs: 500,
      onEvent: (e, r) => {
        if (e.type !== 'chunk-verified' || ++verified !== 60) return;
        killedAt = r.events.length;
        for (const v of victims) void kill(v);
      },
    });
    summary('2 of 5 peers killed after 60 chunks, 1 staller', run);
    expect(killedAt).toBeGreaterThan(0);
    const res = expectCleanSync(run);
    expect(res.banned).toEqual([]);
    // Each victim had served before it died, and the engine saw at least one of them go.
    const before = run.events.slice(0, killedAt);
    for (const v of victims) expect(before.some((e) => e.type === 'chunk-verified' && e.peer === v.address), v.address).toBe(true);
    const lost = run.rec.exchanges.filter((x) => victimAddrs.has(x.peer) && x.outcome === 'transport-error');
    expect(lost.length).toBeGreaterThan(0);
    expect(await drained([h1!, h2!, staller!])).toEqual([0, 0, 0]);
  }, 30_000);

  it('fails with NO_HONEST_PEERS in bounded time when the only honest peer dies beside a staller', async () => {
    const [h, staller] = await Promise.all([serve('libp2p'), serve('ws', { mode: 'silent' })]);
    let verified = 0;
    const run = await runSync({
      peers: [h!.address, staller!.address],
      barrier: 2,
      requestTimeoutMs: 400,
      boundMs: 15_000,
      onEvent: (e) => {
        if (e.type === 'chunk-verified' && ++verified === 50) void kill(h!);
      },
    });
    summary('the only honest peer killed after 50 chunks', run);
    expect(run.err, String(run.err)).toBeInstanceOf(SyncError);
    expect((run.err as SyncError).code).toBe('NO_HONEST_PEERS');
    expect((run.err as SyncError).banned).toEqual([]);
    expect(run.ms).toBeLessThan(10_000);
  }, 30_000);

  // A peer closes a connection that has nothing in flight (here its idle
  // timeout; a restart, or a peer at its connection cap closing a socket it
  // just accepted, does the same). The engine only learns that a connection
  // closed from a pending request failing, so this peer stays "active" with
  // a dead connection: it is never reconnected and it keeps `checkStuck`
  // from firing, so once the staller is dropped the sync hangs for ever
  // (bounded here by the test's abort).
  it('reopens a connection the peer closed while it had nothing in flight (no hang)', async () => {
    const [staller, h] = await Promise.all([serve('ws', { mode: 'silent' }), serve('libp2p', undefined, 1n, { idleTimeoutMs: 100 })]);
    const run = await runSync({
      peers: [h!.address, staller!.address],
      requestTimeoutMs: 400,
      boundMs: 6_000, // the staller is dropped after ~2.5 s; a healthy engine finishes long before
      // The honest peer's connection reaches the engine once the peer has
      // closed it as idle and the client has seen it close.
      gate: (a, conn) =>
        a === h!.address
          ? waitFor(() => h!.peer.server.stats.idleClosed > 0 && conn.isClosed, 3000).then((ok) => {
              if (!ok) throw new Error('the peer did not close the idle connection');
            })
          : undefined,
    });
    summary('honest connection closed while idle, 1 staller', run);
    expect(h!.peer.server.stats.idleClosed).toBeGreaterThan(0);
    expect(run.err instanceof BoundExceeded ? run.err.message : run.err).toBeUndefined();
    expectCleanSync(run);
  }, 30_000);

  // Before the first chunk is verified only chunk 0 exists, and the engine
  // lets at most two peers fetch an index; peers are tried in list order. So
  // stallers listed first take both slots, round after round, until each has
  // failed `maxFailures` times, and an honest peer further down the list is
  // not asked at all meanwhile: about (stallers / 2) × maxFailures × timeout
  // (8 stallers, 500 ms: about 8 s; 160 s with the default 10 s timeout).
  it('is not held back by stallers listed before the honest peer', async () => {
    const stallers = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((k) => serve(k % 2 ? 'ws' : 'libp2p', { mode: 'silent' }, BigInt(k))));
    const h = await serve('ws');
    const run = await runSync({ peers: [...stallers, h].map((p) => p.address), barrier: 9, requestTimeoutMs: 500 });
    summary('8 silent stallers listed before 1 honest peer', run);
    expectCleanSync(run);
    const firstAsk = run.events.findIndex((e) => e.type === 'request' && e.peer === h.address);
    expect(firstAsk).toBeGreaterThanOrEqual(0);
    // A staller should cost about one request timeout, not a multiple per staller.
    expect(run.ms).toBeLessThan(4 * 500);
  }, 30_000);
});

describe('abort', () => {
  it('rejects with an AbortError from inside an event and stops emitting work', async () => {
    const peers = await Promise.all([serve('ws'), serve('libp2p'), serve('ws', { mode: 'silent' }), serve('libp2p', { mode: 'slow', slowMs: 800 })]);
    const ctl = new AbortController();
    let at = -1;
    const run = await runSync({
      peers: peers.map((p) => p.address),
      barrier: 4,
      signal: ctl.signal,
      onEvent: (e, r) => {
        if (e.type === 'chunk-verified' && at < 0 && r.events.filter((x) => x.type === 'chunk-verified').length === 40) {
          at = r.events.length;
          ctl.abort();
        }
      },
    });
    summary('abort after 40 chunks (in the event)', run);
    expect(run.res).toBeUndefined();
    expect(run.err).toBeInstanceOf(DOMException);
    expect((run.err as DOMException).name).toBe('AbortError');
    const after = run.events.slice(at).map((e) => e.type);
    expect(after.filter((t) => t !== 'progress'), 'work after the abort').toEqual([]);
    expect(await drained(peers)).toEqual([0, 0, 0, 0]);
  }, 30_000);

  it('rejects with an AbortError when aborted in the event of the last chunk', async () => {
    const peers = await Promise.all([serve('ws'), serve('libp2p')]);
    const ctl = new AbortController();
    const total = sources().source.chunkCount;
    let n = 0;
    const run = await runSync({
      peers: peers.map((p) => p.address),
      signal: ctl.signal,
      onEvent: (e) => {
        if (e.type === 'chunk-verified' && ++n === total) ctl.abort();
      },
    });
    expect(n).toBe(total);
    expect(run.err).toBeInstanceOf(DOMException);
    expect((run.err as DOMException).name).toBe('AbortError');
    expect(run.events.some((e) => e.type === 'done')).toBe(false);
    expect(await drained(peers)).toEqual([0, 0]);
  }, 30_000);

  it('rejects with the signal reason when aborted from outside, and every connection closes', async () => {
    const peers = await Promise.all([serve('ws'), serve('libp2p'), serve('libp2p'), serve('ws', { mode: 'silent' }), serve('libp2p', { mode: 'truncate' })]);
    const ctl = new AbortController();
    const reason = new Error('user went away');
    let n = 0;
    const run = await runSync({
      peers: peers.map((p) => p.address),
      barrier: 5,
      signal: ctl.signal,
      onEvent: (e) => {
        if (e.type === 'chunk-verified' && ++n === 30) setImmediate(() => ctl.abort(reason));
      },
    });
    summary('abort after 30 chunks (from a later task)', run);
    expect(run.err).toBe(reason);
    // Every WebSocket and libp2p stream is closed on the serving side.
    expect(await drained(peers)).toEqual([0, 0, 0, 0, 0]);
    // The libp2p connections (not the streams) belong to the shared dialling
    // node, which stops once its last stream closed: they close too.
    const libp2pPeers = peers.filter((p) => p.transport === 'libp2p');
    const ok = await waitFor(() => libp2pPeers.every((p) => p.peer.libp2p!.node.getConnections().length === 0), 5000);
    expect(ok, 'libp2p connections closed once the sync let go of its streams').toBe(true);
  }, 30_000);

  it('a finished sync leaves no libp2p node running (a process can exit), and the next sync dials again', async () => {
    const peers = await Promise.all([serve('libp2p'), serve('libp2p')]);
    const connections = () => peers.map((p) => p.peer.libp2p!.node.getConnections().length);
    for (const round of [1, 2]) {
      expectCleanSync(await runSync({ peers: peers.map((p) => p.address) }));
      const ok = await waitFor(() => connections().every((n) => n === 0), 5000);
      expect(ok, `round ${round}: connections ${connections()} after the sync`).toBe(true);
    }
  }, 30_000);

  it('rejects at once with the reason of a signal already aborted', async () => {
    const ctl = new AbortController();
    ctl.abort(new Error('never mind'));
    const err = await syncState({ root: sources().source.root, peers: ['ws://127.0.0.1:9'], signal: ctl.signal }).catch((e) => e);
    expect(err).toBe(ctl.signal.reason);
  });

  // `syncState` checks `signal.aborted`, awaits `init()`, and only then adds
  // its abort listener; an abort in between is never seen (the event has
  // already fired), so the sync runs on with a dead signal: every connect
  // rejects, and after the back-off the promise rejects with
  // `SyncError NO_HONEST_PEERS` instead of the abort reason.
  it('rejects with an AbortError when aborted right after the call', async () => {
    const peers = await Promise.all([serve('ws'), serve('libp2p')]);
    const ctl = new AbortController();
    const t0 = performance.now();
    const p = syncState({ root: sources().source.root, peers: peers.map((x) => x.address), signal: ctl.signal });
    ctl.abort();
    const err = await p.then(
      () => new Error('resolved'),
      (e: unknown) => e,
    );
    const ms = performance.now() - t0;
    console.log(`[sync] abort right after the call: ${(err as Error).name} ${(err as { code?: unknown }).code ?? ''} after ${(ms / 1000).toFixed(2)} s`);
    expect(err).toBeInstanceOf(DOMException);
    expect((err as DOMException).name).toBe('AbortError');
    expect(ms).toBeLessThan(500);
    expect(await drained(peers)).toEqual([0, 0]);
  }, 30_000);
});
