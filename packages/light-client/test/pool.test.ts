// PeerPool alone (no network): the choice by latency and load, back-off
// after timeouts and BUSY, drops after repeated failures or at the stall
// deadline, bans, the report of each peer given up, and lazy shared
// connections.
import { describe, expect, it, vi } from 'vitest';
import { PeerPool } from '../src/client/pool.js';
import type { PeerConnection } from '../src/transport/types.js';
import { FramedConnection } from '../src/transport/framed.js';
import { Kind, Status } from '../src/wire/constants.js';
import { encodeResponseFrame } from '../src/wire/messages.js';

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
  it('bans a peer whose connection ends on a protocol fault while no request is open; a plain close is no fault', async () => {
    const bans: string[] = [];
    const conns = new Map<string, FramedConnection>();
    const connect = async (address: string): Promise<PeerConnection> => {
      const conn = new FramedConnection(address, { send: () => {}, close: () => {} });
      conns.set(address, conn);
      return conn;
    };
    const pool = new PeerPool(['a', 'b'], { connect, onBan: (p, code) => bans.push(`${p.address} ${code}`) });
    const [a, b] = pool.peers;
    await pool.connection(a!);
    await pool.connection(b!);
    // An answer to request 3, never sent (spec/wire.md, "Duplicates"): no request is open to fail.
    conns.get('a')!.receive(encodeResponseFrame({ id: 3, kind: Kind.Chunk, status: Status.Busy }));
    conns.get('b')!.close();
    expect(bans).toEqual(['a MESSAGE_MALFORMED']);
    expect([a!.status, b!.status]).toEqual(['banned', 'active']);
    expect(pool.pick(new Set())).toBe(b);
  });

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

  it('with a stall deadline, drops a peer with no valid answer for that long while it only answered BUSY or failed, and reports why', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const pool = new PeerPool(['busy', 'failing', 'fine', 'idle', 'liar', 'refusing'], { connect: fakeConnect([]), stallMs: 1000 });
      const [busy, failing, fine, idle, liar, refusing] = pool.peers;
      await pool.connection(busy!);
      await pool.connection(fine!);
      vi.advanceTimersByTime(400);
      pool.onBusy(busy!);
      pool.onFailure(failing!); // never connected
      pool.onBusy(fine!);
      pool.ban(liar!, 'ENTRY_MISMATCH', 'sent a wrong entry');
      pool.onRefused(refusing!, 'UNKNOWN_ROOT');
      vi.advanceTimersByTime(500);
      pool.onSuccess(fine!, 5); // a valid answer starts its clock again
      vi.advanceTimersByTime(100); // 1000 ms since the pool opened
      expect(pool.usable()).toEqual([fine, idle, refusing]);
      vi.advanceTimersByTime(2000);
      // An idle peer is not stalled; its first BUSY after a long wait starts a new deadline.
      pool.onBusy(idle!);
      vi.advanceTimersByTime(999);
      expect(idle!.status).not.toBe('failed');
      vi.advanceTimersByTime(1);
      expect(pool.usable()).toEqual([fine, refusing]);
      expect(pool.reports()).toEqual([
        { peer: 'busy', outcome: 'busy', reason: 'no valid answer in 1000 ms', code: 'BUSY' },
        { peer: 'failing', outcome: 'unreachable', reason: 'no valid answer in 1000 ms', code: 'CONNECT_FAILED' },
        { peer: 'idle', outcome: 'unreachable', reason: 'no valid answer in 1000 ms', code: 'CONNECT_FAILED' },
        { peer: 'liar', outcome: 'banned', reason: 'sent a wrong entry', code: 'ENTRY_MISMATCH' },
        { peer: 'refusing', outcome: 'refused', reason: 'answered UNKNOWN_ROOT', code: 'UNKNOWN_ROOT' },
      ]);
      pool.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
