// The extremes: all peers but one Byzantine (the sync completes from the one
// honest peer), and all peers Byzantine (a typed `SyncError`
// `NO_HONEST_PEERS` within a bounded time, never a hang). WebSocket and
// libp2p peers are mixed in every run.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ByzantineMode } from '../../packages/testnet/src/byzantine.ts';
import { SyncError } from '../../packages/light-client/src/sync/index.js';
import {
  closeAll,
  expectCleanSync,
  firstFaults,
  kill,
  type LiarSpec,
  runSync,
  type Served,
  serve,
  sources,
  summary,
  type Transport,
} from './support.js';

/** Modes whose every answer is invalid data (a ban is due at the first one). */
const INVALID: ReadonlySet<ByzantineMode> = new Set([
  'corrupt-value',
  'corrupt-key',
  'corrupt-proof',
  'wrong-index',
  'wrong-root',
  'random-bytes',
  'oversize',
]);

const PAYLOAD_LIES: LiarSpec[] = [
  { mode: 'corrupt-value' },
  { mode: 'corrupt-key' },
  { mode: 'corrupt-proof' },
  { mode: 'wrong-index' },
  { mode: 'wrong-root' },
  { mode: 'random-bytes' },
  { mode: 'oversize' },
  { mode: 'corrupt-value', rate: 0.5 },
  { mode: 'wrong-index', rate: 0.5 },
];

const WITH_STALLERS: LiarSpec[] = [
  { mode: 'silent' },
  { mode: 'truncate' },
  { mode: 'disconnect' },
  { mode: 'slow', slowMs: 1000 }, // always past the 500 ms deadline
  { mode: 'corrupt-proof' },
  { mode: 'wrong-root' },
  { mode: 'oversize' },
  { mode: 'random-bytes' },
  { mode: 'silent' },
];

const started: Served[] = [];
async function fleet(specs: (LiarSpec | undefined)[], firstTransport: Transport): Promise<Served[]> {
  const out = await Promise.all(
    specs.map((l, k) => serve((k % 2 === 0) === (firstTransport === 'ws') ? 'ws' : 'libp2p', l, BigInt(500 + k))),
  );
  started.push(...out);
  return out;
}

beforeAll(() => {
  sources();
});

afterAll(closeAll, 30_000);

describe.each([
  { name: 'payload and frame lies', liars: PAYLOAD_LIES.slice(0, 8), honestOver: 'ws' as Transport },
  { name: 'lies mixed with stallers', liars: WITH_STALLERS.slice(0, 8), honestOver: 'libp2p' as Transport },
])('8 of 9 peers Byzantine ($name)', ({ liars, honestOver }) => {
  let peers: Served[] = [];
  beforeAll(async () => {
    // The honest peer sits in the middle of the list.
    const specs: (LiarSpec | undefined)[] = [...liars.slice(0, 4), undefined, ...liars.slice(4)];
    peers = await fleet(specs, honestOver === 'ws' ? 'ws' : 'libp2p');
  }, 30_000);
  afterAll(async () => {
    await Promise.all(peers.map((p) => kill(p)));
  });

  it('the sync completes from the one honest peer', async () => {
    const honest = peers[4]!;
    expect(honest.liar).toBeUndefined();
    expect(honest.transport).toBe(honestOver);
    const run = await runSync({ peers: peers.map((p) => p.address), barrier: 9, requestTimeoutMs: 500 });
    summary(`8 of 9 Byzantine, honest over ${honestOver}`, run);
    const res = expectCleanSync(run);
    const bans = new Map(res.banned.map((b) => [b.peer, b.code]));
    expect(bans.has(honest.address)).toBe(false);
    expect(Object.fromEntries(bans)).toEqual(Object.fromEntries(firstFaults(run)));
    // Every rate-1 liar sending invalid data was caught; stallers were not banned.
    for (const p of peers) {
      if (!p.liar) continue;
      if (INVALID.has(p.liar.mode) && (p.liar.rate ?? 1) === 1) expect(bans.has(p.address), `${p.liar.mode} banned`).toBe(true);
      if (!INVALID.has(p.liar.mode)) expect(bans.has(p.address), `${p.liar.mode} not banned`).toBe(false);
    }
    expect(run.events.some((e) => e.type === 'chunk-verified' && e.peer === honest.address)).toBe(true);
  }, 30_000);
});

describe.each([
  { name: 'payload and frame lies', liars: PAYLOAD_LIES, boundS: 5 },
  { name: 'lies mixed with stallers', liars: WITH_STALLERS, boundS: 10 },
])('all 9 peers Byzantine ($name)', ({ liars, boundS }) => {
  let peers: Served[] = [];
  beforeAll(async () => {
    peers = await fleet(liars, 'libp2p');
  }, 30_000);
  afterAll(async () => {
    await Promise.all(peers.map((p) => kill(p)));
  });

  it(`fails with SyncError NO_HONEST_PEERS in under ${boundS} s`, async () => {
    const run = await runSync({ peers: peers.map((p) => p.address), barrier: 9, requestTimeoutMs: 500, boundMs: 20_000 });
    summary(`all 9 Byzantine (${liars.map((l) => l.mode).join(',')})`, run);
    expect(run.res).toBeUndefined();
    expect(run.err).toBeInstanceOf(SyncError);
    const err = run.err as SyncError;
    expect(err.code).toBe('NO_HONEST_PEERS');
    expect(run.ms).toBeLessThan(boundS * 1000);
    // No chunk was ever accepted from a liar that always lies.
    const always = new Set(peers.filter((p) => p.liar && (p.liar.rate ?? 1) === 1 && p.liar.mode !== 'slow').map((p) => p.address));
    expect(run.events.filter((e) => e.type === 'chunk-verified' && always.has(e.peer))).toEqual([]);
    expect(run.rec.problems).toEqual([]);
    // Those that sent invalid data are banned with the first fault's code; the rest were dropped, not banned.
    const bans = new Map(err.banned.map((b) => [b.peer, b.code]));
    const faults = firstFaults(run);
    for (const [peer, code] of bans) expect(faults.get(peer), peer).toBe(code);
    for (const p of peers) {
      const statuses = run.events.filter((e) => e.type === 'peer' && e.peer === p.address).map((e) => (e as { status: string }).status);
      if (bans.has(p.address)) continue;
      expect(INVALID.has(p.liar!.mode) && (p.liar!.rate ?? 1) === 1, `${p.liar!.mode} (${p.address}) should have been banned`).toBe(false);
      expect(statuses.at(-1), `${p.liar!.mode} ends dropped`).toBe('failed');
    }
  }, 30_000);
});
