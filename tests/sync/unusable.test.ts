// Peers that never lie but never help (spec/wire.md, "Giving up"): one that
// answers every request BUSY, and one that accepts TCP but never completes
// the WebSocket (or libp2p) handshake. Alone, or left after a liar is
// banned, they end the sync with SyncError NO_HONEST_PEERS, a report per
// peer with the right outcome and code, within the documented bound:
// max(stallTimeoutMs, requestTimeoutMs, connectTimeoutMs) after the start.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SyncError } from '../../packages/light-client/src/sync/index.js';
import { listenMute, type MuteListener } from '../../packages/testnet/src/mute.ts';
import { closeAll, runSync, type Served, serve, sources } from './support.js';

/** Short settings, so that the suite is quick; the rule is the same as with the defaults. */
const TIMING = { stallTimeoutMs: 2000, connectTimeoutMs: 1000, requestTimeoutMs: 600 };
/** The documented bound for TIMING, and slack for timers on a loaded machine. */
const BOUND_MS = Math.max(TIMING.stallTimeoutMs, TIMING.connectTimeoutMs, TIMING.requestTimeoutMs) + 1500;

let busy: Served;
let liar: Served;
let mute: MuteListener;
/** A libp2p address whose TCP port is the mute listener's (the peer id is a real one). */
let muteLibp2p: string;

beforeAll(async () => {
  sources();
  [busy, liar] = await Promise.all([serve('ws', { mode: 'busy' }), serve('libp2p', { mode: 'corrupt-value' })]);
  mute = await listenMute();
  muteLibp2p = liar.address.replace(/\/tcp\/\d+\//, `/tcp/${mute.port}/`);
}, 60_000);

afterAll(async () => {
  await mute?.close();
  await closeAll();
}, 30_000);

/** Runs a sync that must fail; returns its error and the per-peer outcomes. */
async function failing(peers: string[]) {
  const run = await runSync({ peers, ...TIMING, boundMs: 3 * BOUND_MS });
  expect(run.err).toBeInstanceOf(SyncError);
  const err = run.err as SyncError;
  expect(err.code).toBe('NO_HONEST_PEERS');
  expect(run.ms).toBeLessThan(BOUND_MS);
  const outcomes = Object.fromEntries(err.peers.map((p) => [p.peer, [p.outcome, p.code]]));
  return { err, outcomes };
}

describe('unusable peers end the sync with NO_HONEST_PEERS', () => {
  it('a peer that answers only BUSY', async () => {
    const { outcomes } = await failing([busy.address]);
    expect(outcomes).toEqual({ [busy.address]: ['busy', 'BUSY'] });
  });

  it('a peer that never completes the WebSocket or libp2p handshake', async () => {
    const { outcomes } = await failing([mute.url, muteLibp2p]);
    expect(outcomes).toEqual({ [mute.url]: ['unreachable', 'CONNECT_FAILED'], [muteLibp2p]: ['unreachable', 'CONNECT_FAILED'] });
    expect(mute.accepted).toBeGreaterThanOrEqual(2);
  });

  it('a BUSY-forever peer left after a liar is banned', async () => {
    const { err, outcomes } = await failing([liar.address, busy.address]);
    expect(outcomes).toEqual({ [liar.address]: ['banned', 'ROOT_MISMATCH'], [busy.address]: ['busy', 'BUSY'] });
    expect(err.banned.map((b) => b.code)).toEqual(['ROOT_MISMATCH']);
  });

  it('a never-handshaking peer left after a liar is banned', async () => {
    const { outcomes } = await failing([liar.address, mute.url]);
    expect(outcomes).toEqual({ [liar.address]: ['banned', 'ROOT_MISMATCH'], [mute.url]: ['unreachable', 'CONNECT_FAILED'] });
  });
});
