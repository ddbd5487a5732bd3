// Honest state sync from real serving peers (packages/peer, in-process, on
// 127.0.0.1): over plain WebSockets, over libp2p (WebSockets + noise +
// yamux), and over both in one sync. Each must rebuild exactly the source
// tree (root, every key, every chunk envelope).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addressOf, closeAll, expectCleanSync, expectSameTree, runSync, type Served, serve, sources, summary } from './support.js';

let peers: Served[] = [];

beforeAll(async () => {
  sources();
  peers = await Promise.all([0, 1, 2, 3].map(() => serve('ws')));
}, 30_000);

afterAll(closeAll, 30_000);

const verifiedBy = (events: { type: string; peer?: string }[]) =>
  new Set(events.filter((e) => e.type === 'chunk-verified').map((e) => e.peer!));

describe('honest sync from real peers', () => {
  it('over WebSocket', async () => {
    const addrs = peers.slice(0, 3).map((p) => addressOf(p.peer, 'ws'));
    const run = await runSync({ peers: addrs });
    summary('honest ws ×3', run);
    const res = expectCleanSync(run);
    expect(res.rejected).toBe(0);
    expect(res.banned).toEqual([]);
    expect(verifiedBy(run.events)).toEqual(new Set(addrs));
  }, 30_000);

  it('over libp2p', async () => {
    const addrs = peers.slice(0, 3).map((p) => addressOf(p.peer, 'libp2p'));
    expect(addrs.every((a) => a.startsWith('/ip4/127.0.0.1/tcp/') && a.includes('/ws/p2p/'))).toBe(true);
    const run = await runSync({ peers: addrs });
    summary('honest libp2p ×3', run);
    const res = expectCleanSync(run);
    expect(res.rejected).toBe(0);
    expect(res.banned).toEqual([]);
    expect(verifiedBy(run.events)).toEqual(new Set(addrs));
  }, 30_000);

  it('over WebSocket and libp2p in one sync', async () => {
    const addrs = [
      addressOf(peers[0]!.peer, 'ws'),
      addressOf(peers[1]!.peer, 'libp2p'),
      addressOf(peers[2]!.peer, 'ws'),
      addressOf(peers[3]!.peer, 'libp2p'),
    ];
    const run = await runSync({ peers: addrs });
    summary('honest ws ×2 + libp2p ×2', run);
    const res = expectCleanSync(run);
    expect(res.banned).toEqual([]);
    const by = verifiedBy(run.events);
    expect([...by].some((a) => a.startsWith('ws://'))).toBe(true);
    expect([...by].some((a) => a.startsWith('/ip4/'))).toBe(true);
  }, 30_000);

  it('with the default connect (no test wrapper), one peer reachable both ways', async () => {
    const p = peers[3]!.peer;
    const { source } = sources();
    const events: string[] = [];
    const { syncState } = await import('../../packages/light-client/src/sync/index.js');
    const res = await syncState({
      root: source.root,
      peers: [addressOf(p, 'ws'), addressOf(p, 'libp2p')],
      onEvent: (e) => e.type === 'chunk-verified' && events.push(e.peer),
    });
    expectSameTree(res);
    expect(new Set(events).size).toBe(2);
  }, 30_000);

  it('closes every sync connection on the peers once done', async () => {
    // Each sync closes its WebSockets and libp2p streams when it finishes.
    const ok = await Promise.all(
      peers.map(async (p) => {
        const until = performance.now() + 5000;
        while (p.peer.server.connectionCount > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 10));
        return p.peer.server.connectionCount;
      }),
    );
    expect(ok).toEqual([0, 0, 0, 0]);
  }, 10_000);
});
