// The demo's event folding and peer-list parsing (the DOM parts are covered
// end to end by tests/e2e).
import { describe, expect, it } from 'vitest';
import { SyncModel, throughput } from '../src/model.js';
import { dials, parsePeerList, peerListText, type DemoPeer } from '../src/peers.js';

const A = 'ws://127.0.0.1:1';
const B = 'ws://127.0.0.1:2';

describe('SyncModel', () => {
  it('folds a sync with a rejected, then refetched chunk', () => {
    const m = new SyncModel([A, B], 0);
    m.apply({ type: 'peer', peer: A, status: 'active' }, 1);
    m.apply({ type: 'request', index: 0, peer: A, hedge: false }, 2);
    m.apply({ type: 'request', index: 0, peer: B, hedge: true }, 2);
    m.apply({ type: 'chunk-rejected', index: 0, peer: B, code: 'ROOT_MISMATCH' }, 3);
    m.apply({ type: 'peer-banned', peer: B, reason: 'sent an invalid chunk', code: 'ROOT_MISMATCH' }, 3);
    m.apply({ type: 'peer', peer: B, status: 'banned', reason: 'sent an invalid chunk', code: 'ROOT_MISMATCH' }, 3);
    expect(m.cells.get(0)!.state).toBe('rejected');
    expect(m.log[0]).toMatchObject({ index: 0, peer: B, code: 'ROOT_MISMATCH' });
    m.apply({ type: 'chunk-verified', index: 0, peer: A, ms: 5, bytes: 100 }, 10);
    m.apply({ type: 'progress', done: 1, chunkCount: 2, bytes: 100, bytesPerSecond: 10_000, etaSeconds: 0.01 }, 10);
    expect(m.cells.get(0)).toMatchObject({ state: 'verified', peer: A, bytes: 100, ms: 5 });
    expect(m.cells.get(0)!.rejections).toHaveLength(1);
    expect(m.log[0]!.refetchedFrom).toBe(A);
    expect(m.chunkCount).toBe(2);
    expect(m.totalChanged).toBe(true);
    expect(m.peers.get(A)).toMatchObject({ status: 'active', chunks: 1, bytes: 100 });
    expect(m.peers.get(B)).toMatchObject({ status: 'banned', code: 'ROOT_MISMATCH', rejected: 1 });
    expect(SyncModel.latency(m.peers.get(A)!)).toBe(5);
    // A ban is final, whatever comes later.
    m.apply({ type: 'peer', peer: B, status: 'failed', reason: 'connection lost' }, 11);
    expect(m.peers.get(B)!.status).toBe('banned');
  });

  it("folds a catch-up: lies are listed with their bans, refusals only counted", () => {
    const C = 'ws://127.0.0.1:3';
    const m = new SyncModel([A, B, C], 0);
    m.apply({ type: 'peer', peer: A, status: 'active' }, 0);
    m.applyCatchUp({ type: 'request', peer: A, kind: 'nodes', count: 1, hedge: false }, 1);
    m.applyCatchUp({ type: 'rejected', peer: A, kind: 'nodes', code: 'BUSY', count: 1 }, 1);
    m.applyCatchUp({ type: 'rejected', peer: C, kind: 'nodes', code: 'CONNECT_FAILED', count: 1 }, 1);
    m.applyCatchUp({ type: 'rejected', peer: A, kind: 'leaves', code: 'BUSY', count: 1 }, 1);
    // A lie: the ban follows its rejection at once.
    m.applyCatchUp({ type: 'rejected', peer: B, kind: 'leaves', code: 'NODE_MISMATCH', count: 1 }, 2);
    m.applyCatchUp({ type: 'banned', peer: B, code: 'NODE_MISMATCH', reason: 'lied' }, 2);
    // A request that was out when B was banned.
    m.applyCatchUp({ type: 'rejected', peer: B, kind: 'leaves', code: 'NODE_MISMATCH', count: 1 }, 3);
    // A code that is mostly a refusal, a lie this time (a root the peer listed).
    m.applyCatchUp({ type: 'rejected', peer: C, kind: 'nodes', code: 'UNKNOWN_ROOT', count: 1 }, 4);
    m.applyCatchUp({ type: 'banned', peer: C, code: 'UNKNOWN_ROOT', reason: 'denied a root it listed' }, 4);
    // A ban with no rejected answer (found when the catch-up commits).
    m.applyCatchUp({ type: 'banned', peer: A, code: 'KEY_COPY_MISMATCH', reason: 'bad key copy' }, 5);
    expect(m.log.map((e) => [e.peer, e.code, e.ban])).toEqual([
      [B, 'NODE_MISMATCH', 'banned'],
      [B, 'NODE_MISMATCH', 'already'],
      [C, 'UNKNOWN_ROOT', 'banned'],
      [A, 'KEY_COPY_MISMATCH', 'banned'],
    ]);
    expect([...m.transient]).toEqual([
      ['BUSY', 2],
      ['CONNECT_FAILED', 1],
    ]);
    expect(m.rejected).toBe(3);
    expect(m.peers.get(A)).toMatchObject({ status: 'banned', rejected: 0 });
  });

  it('shows the version a catch-up made: its changed chunks, and the others kept', () => {
    const m = new SyncModel([], 0);
    m.showVersion(4, Uint32Array.of(1, 3));
    expect([...m.cells.values()].map((c) => c.state)).toEqual(['kept', 'changed', 'kept', 'changed']);
    expect(m.chunkCount).toBe(4);
    expect(m.totalChanged).toBe(true);
    m.showVersion(3, new Uint32Array(0));
    expect([...m.cells.values()].map((c) => c.state)).toEqual(['kept', 'kept', 'kept']);
    expect([...m.cells.keys()]).toEqual([0, 1, 2]);
  });

  it('notes a rejection that came after the chunk verified', () => {
    const m = new SyncModel([A, B], 0);
    m.apply({ type: 'chunk-verified', index: 3, peer: A, ms: 1, bytes: 1 }, 1);
    m.apply({ type: 'chunk-rejected', index: 3, peer: B, code: 'CHUNK_INDEX_MISMATCH' }, 2);
    expect(m.cells.get(3)!.state).toBe('verified');
    expect(m.log[0]).toMatchObject({ late: true, refetchedFrom: A });
  });

  it('puts in-flight chunks back to pending when the sync ends unfinished', () => {
    const m = new SyncModel([A], 0);
    m.apply({ type: 'request', index: 1, peer: A, hedge: false }, 1);
    m.end(2000);
    expect(m.cells.get(1)!.state).toBe('pending');
    expect(m.endedAt).toBe(2);
  });
});

describe('throughput', () => {
  it('is bytes per second over a sliding window', () => {
    const samples = [0, 0.5, 1, 1.5, 2].map((t) => ({ t, bytes: t * 1e6 }));
    const { t, rate } = throughput(samples, 1);
    expect(t).toEqual([0, 0.5, 1, 1.5, 2]);
    expect(rate.slice(1)).toEqual([1e6, 1e6, 1e6, 1e6]);
    expect(rate[0]).toBe(0);
  });
});

describe('peer list', () => {
  const demo: DemoPeer[] = [
    { name: 'peer 1', ws: A, libp2p: '/ip4/127.0.0.1/tcp/3/ws/p2p/x', mode: null },
    { name: 'peer 2', ws: B, libp2p: '/ip4/127.0.0.1/tcp/4/ws/p2p/y', mode: 'wrong-index' },
  ];

  it('round-trips the demo peers and keeps their modes', () => {
    const { lines, bad } = parsePeerList(peerListText(demo), demo);
    expect(bad).toEqual([]);
    expect(lines.map((l) => [l.name, l.mode])).toEqual([
      ['peer 1', null],
      ['peer 2', 'wrong-index'],
    ]);
    expect(dials(lines, 'ws').map((d) => d.address)).toEqual([A, B]);
    expect(dials(lines, 'libp2p').map((d) => d.transport)).toEqual(['libp2p', 'libp2p']);
    expect(dials(lines, 'both')).toHaveLength(4);
  });

  it('accepts edits, comments and unknown peers, and reports junk', () => {
    const { lines, bad } = parsePeerList(`# mine\n${B}\n\nws://10.0.0.1:9  nonsense\n/ip4/127.0.0.1/tcp/9/ws/p2p/z`, demo);
    expect(lines.map((l) => [l.name, l.mode])).toEqual([
      ['peer 2', 'wrong-index'],
      ['peer 2', undefined],
      ['peer 3', undefined],
    ]);
    expect(bad).toEqual(['nonsense']);
    expect(dials(lines, 'ws').map((d) => d.address)).toEqual([B, 'ws://10.0.0.1:9']);
  });
});
