// Every Byzantine mode of the real serving peer (packages/testnet/src/byzantine.ts)
// against the sync engine, with 9 peers of which 1, then 4, lie; WebSocket
// and libp2p peers mixed in every run. Each sync must finish with the exact
// tree; not one invalid chunk may be accepted (every chunk-verified event is
// backed by a byte-identical answer, checked outside the engine); every peer
// that sent invalid data is banned with the code of its first invalid answer
// (as the independent pure-TS verifier, or the frame decoder, reports it),
// and that code is the one the mode promises; no honest peer is banned; and
// modes that only delay, stall, truncate or hang up ban nobody.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BYZANTINE_MODES, type ByzantineMode } from '../../packages/testnet/src/byzantine.ts';
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
  VERIFIER_CODES,
} from './support.js';

/** The codes a ban for each mode may carry; `null`: the mode sends nothing invalid and must ban nobody. */
const BAN_CODES: Record<ByzantineMode, ReadonlySet<string> | null> = {
  'corrupt-value': new Set(['ROOT_MISMATCH']),
  // Flipping the first key's low bit keeps the keys sorted unless two keys
  // differ only there; never so for SHA-256 keys, so always ROOT_MISMATCH here.
  'corrupt-key': new Set(['ROOT_MISMATCH']),
  // The last path sibling hash is flipped (multi-chunk tree).
  'corrupt-proof': new Set(['ROOT_MISMATCH']),
  'wrong-index': new Set(['CHUNK_INDEX_MISMATCH']),
  'wrong-root': new Set(['ROOT_MISMATCH']),
  // Any decoding code (FORMAT_UNSUPPORTED unless the first byte happens to be 0x05), or ROOT_MISMATCH.
  'random-bytes': new Set([...VERIFIER_CODES].filter((c) => c !== 'CHUNK_INDEX_MISMATCH' && c !== 'KEY_HEIGHT_MISMATCH')),
  oversize: new Set(['FRAME_TOO_LARGE']),
  truncate: null, // half a frame, then silence: timeouts
  slow: null, // late but valid
  silent: null, // timeouts
  disconnect: null, // half a frame, then a close: a lost connection
  // The query client's lies: PROOF and RANGE answers only, so chunks are answered honestly; BUSY only delays.
  'wrong-key': null,
  'absence-for-present': null,
  'existence-for-absent': null,
  'range-cut': null,
  'range-cut-empty': null,
  busy: null, // never serves: BUSY only
  twice: new Set(['RESPONSE_DUPLICATE']), // a second response on the same connection: a protocol fault
  'twice-corrupt': new Set(['RESPONSE_DUPLICATE']),
  'swap-kinds': null, // a catch-up's NODES answers only: chunks are answered honestly
};
/** Lies about other answers than CHUNK: a sync takes the liar's chunks. */
const CHUNKS_HONEST: ReadonlySet<ByzantineMode> = new Set(['wrong-key', 'absence-for-present', 'existence-for-absent', 'range-cut', 'range-cut-empty', 'swap-kinds']);

interface Case {
  name: string;
  liar: LiarSpec;
}

const CASES: Case[] = [
  ...BYZANTINE_MODES.map((mode) => ({ name: mode, liar: { mode, ...(mode === 'slow' ? { slowMs: 250 } : {}) } })),
  // Late answers past the 3,000 ms deadline: timeouts, down-weighting, no ban.
  { name: 'slow (past the deadline)', liar: { mode: 'slow', slowMs: 5000 } },
  // Liars that tell the truth most of the time are still caught at their first lie.
  { name: 'corrupt-value at rate 0.3', liar: { mode: 'corrupt-value', rate: 0.3 } },
  { name: 'wrong-index at rate 0.5', liar: { mode: 'wrong-index', rate: 0.5 } },
  { name: 'oversize at rate 0.3', liar: { mode: 'oversize', rate: 0.3 } },
];

let honest: Served[] = [];

beforeAll(async () => {
  sources();
  // Eight honest peers shared by every run, half dialled over WebSocket, half over libp2p.
  honest = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) => serve(i % 2 === 0 ? 'ws' : 'libp2p')));
}, 60_000);

afterAll(closeAll, 30_000);

it('covers every Byzantine mode of the peer', () => {
  expect(Object.keys(BAN_CODES).sort()).toEqual([...BYZANTINE_MODES].sort());
});

describe.each(CASES.map((c, i) => ({ ...c, i })))('Byzantine $name', ({ name, liar, i }) => {
  let liars: Served[] = [];
  const codes = BAN_CODES[liar.mode];

  beforeAll(async () => {
    // Four liars: WebSocket and libp2p alternately, each with its own RNG seed.
    liars = await Promise.all([0, 1, 2, 3].map((k) => serve((k + i) % 2 === 0 ? 'ws' : 'libp2p', liar, BigInt(100 * i + k))));
  }, 30_000);

  afterAll(async () => {
    await Promise.all(liars.map((l) => kill(l)));
  }, 30_000);

  it.each([1, 4])('%i of 9 peers lie', async (n) => {
    const bad = liars.slice(0, n);
    const good = honest.slice(0, 9 - n);
    // Interleave so that liars sit among honest peers in the list.
    const all: Served[] = [];
    for (let k = 0; all.length < 9; k++) {
      if (k < bad.length) all.push(bad[k]!);
      if (k < good.length) all.push(good[k]!);
    }
    expect(all).toHaveLength(9);
    expect(new Set(all.map((s) => s.transport))).toEqual(new Set<Transport>(['ws', 'libp2p']));
    const liarAddrs = new Set(bad.map((s) => s.address));
    // 3,000 ms: honest peers run in this process, and on a loaded 2-core
    // machine (a clean clone's first vitest run, with the liars' processes
    // starting) 600 and then 1,200 ms let four timeouts in a row drop every
    // honest peer.
    const run = await runSync({ peers: all.map((s) => s.address), barrier: 9, requestTimeoutMs: 3000 });
    summary(`${name}, ${n} of 9 lie (${bad.map((b) => b.transport).join('+')})`, run);

    const res = expectCleanSync(run);
    // Every liar took part: it was asked for at least one chunk.
    for (const b of bad) expect(run.rec.exchanges.some((x) => x.peer === b.address), `${b.address} was asked`).toBe(true);
    const bans = new Map(res.banned.map((b) => [b.peer, b.code]));
    const faults = firstFaults(run);

    // No honest peer sent anything invalid or was banned.
    for (const h of good) {
      expect(faults.has(h.address), `honest ${h.address} sent invalid data`).toBe(false);
      expect(bans.has(h.address), `honest ${h.address} banned`).toBe(false);
    }
    // Exactly the peers that sent invalid data are banned, each with the code of its first invalid answer.
    expect(Object.fromEntries(bans)).toEqual(Object.fromEntries(faults));

    if (codes === null) {
      expect(res.banned).toEqual([]);
      expect(res.rejected).toBe(0);
    } else {
      for (const [peer, code] of bans) {
        expect(liarAddrs.has(peer)).toBe(true);
        expect(codes.has(code), `${peer} banned with ${code}`).toBe(true);
      }
      // Every liar was asked (all peers start together) and lies at rate 1
      // on every chunk, so every liar is caught; at lower rates, at least one.
      if ((liar.rate ?? 1) === 1) expect(new Set(bans.keys())).toEqual(liarAddrs);
      else expect(bans.size).toBeGreaterThan(0);
    }

    // A liar at rate 1 never has a chunk accepted, unless its lie is only a
    // delay, a second copy after the honest answer, or about other answers than CHUNK.
    if ((liar.rate ?? 1) === 1 && !['slow', 'twice', 'twice-corrupt'].includes(liar.mode) && !CHUNKS_HONEST.has(liar.mode)) {
      const fromLiars = run.events.filter((e) => e.type === 'chunk-verified' && liarAddrs.has(e.peer));
      expect(fromLiars).toEqual([]);
    }
    // Peer status events never mark an honest peer banned or failed.
    const honestTrouble = run.events.filter(
      (e) => e.type === 'peer' && (e.status === 'banned' || e.status === 'failed') && !liarAddrs.has(e.peer),
    );
    expect(honestTrouble).toEqual([]);
  }, 30_000);
});
