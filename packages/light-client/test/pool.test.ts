// PeerPool alone (no network): the choice by latency and load, back-off
// after timeouts and BUSY, drops after repeated failures, bans, and lazy
// shared connections.
import { describe, expect, it } from 'vitest';
import { PeerPool } from '../src/client/pool.js';
import type { PeerConnection } from '../src/transport/types.js';

function fakeConnect(opened: string[]) {
  return async (address: string): Promise<PeerConnection> => {
    opened.push(address);
    let closed = false;
    const listeners: ((e: Error) => void)[] = [];
    return {
      address,
      get isClosed() {
        return closed;
      },
      request: () => Promise.reject(new Error('not used')),
      close() {
        closed = true;
        for (const l of listeners.splice(0)) l(new Error('closed'));
      },
      onClose: (l) => void listeners.push(l),
    };
  };
}

describe('PeerPool', () => {
  it('asks unmeasured peers first, then the fastest, weighted by requests in flight', () => {
    const pool = new PeerPool(['a', 'b', 'c'], { connect: fakeConnect([]) });
    const [a, b, c] = pool.peers;
    expect(pool.pick(new Set())).toBe(a);
    pool.onSuccess(a!, 5);
    pool.onSuccess(b!, 1);
    expect(pool.pick(new Set())).toBe(c); // not measured yet
    pool.onSuccess(c!, 3);
    expect(pool.pick(new Set())).toBe(b);
    b!.inflight = 4; // 1 ms × 5 > 3 ms × 1
    expect(pool.pick(new Set())).toBe(c);
    expect(pool.pick(new Set([c!]))).toBe(a);
  });

  it('backs a peer off after a timeout or BUSY, drops it after maxFailures, and bans it for good', () => {
    const bans: string[] = [];
    const pool = new PeerPool(['a', 'b'], { connect: fakeConnect([]), maxFailures: 2, onBan: (p, code) => bans.push(`${p.address} ${code}`) });
    const [a, b] = pool.peers;
    pool.onBusy(a!, 1000);
    expect(pool.pick(new Set(), 1000)).toBe(b);
    expect(pool.readyIn(new Set([b!]), 1000)).toBe(50);
    expect(pool.pick(new Set(), 1050)).toBe(a);
    pool.onFailure(a!, 2000);
    expect(a!.status).toBe('slow');
    pool.onFailure(a!, 2000);
    expect(a!.status).toBe('failed');
    expect(pool.usable()).toEqual([b]);
    pool.ban(b!, 'ROOT_MISMATCH', 'test');
    pool.ban(b!, 'ROOT_MISMATCH', 'again');
    expect(bans).toEqual(['b ROOT_MISMATCH']);
    expect(pool.pick(new Set(), 10_000)).toBeUndefined();
    expect(pool.readyIn(new Set())).toBeUndefined();
  });

  it('opens one connection per peer, shared, and again after it closes', async () => {
    const opened: string[] = [];
    const pool = new PeerPool(['a', 'a', 'b'], { connect: fakeConnect(opened) });
    expect(pool.peers.map((p) => p.address)).toEqual(['a', 'b']);
    const [a] = pool.peers;
    const [c1, c2] = await Promise.all([pool.connection(a!), pool.connection(a!)]);
    expect(c1).toBe(c2);
    c1.close();
    const c3 = await pool.connection(a!);
    expect(c3).not.toBe(c1);
    expect(opened).toEqual(['a', 'a']);
    pool.close();
    await Promise.resolve(); // the close runs once the connection's promise settles
    expect(c3.isClosed).toBe(true);
    await expect(pool.connection(a!)).rejects.toMatchObject({ name: 'TransportError', code: 'CONNECTION_CLOSED' });
  });
});
