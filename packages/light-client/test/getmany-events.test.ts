// What `getMany` reports (`QueryEvent`), against in-memory connections: each
// round trip's `request` is followed by its own outcome, `verified` only for
// an answer that verified, `rejected` (one per round trip, `count` its keys)
// for a `BUSY`, a denial, a timeout, a lost connection or a lie, then the
// lie's `banned`; a round trip whose keys a hedge already answered is no
// success of its peer. Requests failed by the client's own `close()` are not
// reported. Time is vitest's fake clock (`setTimeout` and `performance`).

import { init, Tree } from '@bpavl/wasm';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { QueryEvent } from '../src/client/index.js';
import { TransportError, type Connect, type PeerConnection, type RequestBody } from '../src/transport/types.js';
import { Kind, MAX_RESPONSE_BYTES, Status } from '../src/wire/constants.js';
import type { Response } from '../src/wire/messages.js';
import { fakeConnect, honestAnswers, never, trackedClients } from './support/fake-peers.js';

beforeAll(() => init());

const client = trackedClients();

const fakeClock = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });

/** `f()`'s response, `ms` later on the (fake) clock. */
const after = (ms: number, f: () => Promise<Response>) => new Promise<void>((r) => setTimeout(r, ms)).then(f);

const status = (s: Status) => (): Promise<Response> => Promise.resolve({ id: 0, kind: Kind.Multiproof, status: s, payload: new Uint8Array(0) });
const failing = (code: 'TIMEOUT' | 'CONNECTION_CLOSED') => (): Promise<Response> => Promise.reject(new TransportError(code));

/** The same keys as `honestAnswers`' tree with other values: its proofs are lies against that tree's root. */
function otherTree() {
  let snap: ReturnType<Tree['head']> | undefined;
  const build = () => {
    const tree = new Tree(16);
    for (let i = 0; i < 300; i++) tree.insert(new TextEncoder().encode(`key-1-${String(i).padStart(8, '0')}`), new Uint8Array(64).fill(0xee));
    tree.commit();
    return tree.head();
  };
  // Built at the first request (after the WASM module is initialized).
  return (req: RequestBody): Promise<Response> =>
    req.kind === Kind.Multiproof ? Promise.resolve({ id: 0, kind: Kind.Multiproof, status: Status.Ok, payload: (snap ??= build()).proveMulti([...req.keys], MAX_RESPONSE_BYTES - 64) }) : never();
}

/** The events about `peer`, without what varies (`ms`, `reason`). */
const about = (events: QueryEvent[], peer: string) =>
  events.filter((e) => e.peer === peer).map((e) => (e.type === 'verified' ? { ...e, ms: 0 } : e.type === 'banned' ? { ...e, reason: '' } : e));

/**
 * A client, on the fake clock, of peer `name` (listed first: it takes every
 * key in one round trip), which answers with `bad(req)` `delay` ms later, and
 * `honest`, which answers at once, by hedging `name`'s round trip once
 * overdue (100 ms) or taking the keys `name` gave back; the events it reports.
 */
function hedgedClient(name: string, bad: (req: RequestBody) => Promise<Response>, delay: number) {
  fakeClock();
  const { root, keys, prove } = honestAnswers(new Set());
  const events: QueryEvent[] = [];
  const c = client({
    root,
    peers: [name, 'honest'],
    connect: fakeConnect((address, req) => (address === 'honest' ? prove(req) : after(delay, () => bad(req)))),
    deadlineMs: 5000,
    hedgeAfterMs: 100,
    onEvent: (e) => events.push(e),
  });
  return { c, events, keys };
}

/** One `getMany` of {@link hedgedClient}'s keys, with peer `bad`: every value right; the events. */
async function scenario(bad: (req: RequestBody) => Promise<Response>, delay: number) {
  const { c, events, keys } = hedgedClient('bad', bad, delay);
  let values: (Uint8Array | undefined)[] | undefined;
  const read = c.getMany(keys).then((v) => (values = v));
  await vi.advanceTimersByTimeAsync(delay + 200);
  await read;
  expect(values!.every((v) => v?.length === 64)).toBe(true);
  return { events, keys };
}

const refusals = [
  ['BUSY', status(Status.Busy)],
  ['UNKNOWN_ROOT', status(Status.UnknownRoot)],
  // A peer from before MULTIPROOF: not banned, asked one PROOF a key next (never answered here; the honest peer hedges those).
  ['BAD_REQUEST', (req: RequestBody) => (req.kind === Kind.Multiproof ? status(Status.BadRequest)() : never())],
  ['TIMEOUT', failing('TIMEOUT')],
  ['CONNECTION_CLOSED', failing('CONNECTION_CLOSED')],
] as const;

describe('a round trip not answered: one rejected with its code and keys, never verified', () => {
  it.each(refusals)('%s, before any hedge', async (code, answer) => {
    const { events, keys } = await scenario(answer, 0);
    // (After BAD_REQUEST, the PROOF round trips that follow are never answered: requests with no outcome.)
    expect(about(events, 'bad').slice(0, 2)).toEqual([
      { type: 'request', peer: 'bad', kind: 'proof', count: keys.length, hedge: false },
      { type: 'rejected', peer: 'bad', kind: 'proof', code, count: keys.length },
    ]);
    expect(about(events, 'bad').slice(2).filter((e) => e.type !== 'request')).toEqual([]);
    // The honest peer's answers verified every key (in one round trip, or in several hedging the PROOFs after BAD_REQUEST).
    const outcomes = events.filter((e) => e.peer === 'honest' && e.type !== 'request');
    expect(outcomes.every((e) => e.type === 'verified')).toBe(true);
    expect(outcomes.reduce((n, e) => n + (e.type === 'verified' ? e.count : 0), 0)).toBe(keys.length);
  });

  it.each(refusals)('%s, after a hedge answered its keys (it used to be reported verified, a success of the peer)', async (code, answer) => {
    const { events, keys } = await scenario(answer, 300);
    expect(about(events, 'bad')).toEqual([
      { type: 'request', peer: 'bad', kind: 'proof', count: keys.length, hedge: false },
      { type: 'rejected', peer: 'bad', kind: 'proof', code, count: keys.length },
    ]);
    expect(events.filter((e) => e.type === 'request' && e.peer === 'honest')).toEqual([{ type: 'request', peer: 'honest', kind: 'proof', count: keys.length, hedge: true }]);
  });
});

describe('a lie: one rejected for the round trip (count: its keys), then banned', () => {
  const lies = [
    ['OUT_OF_RANGE', status(Status.OutOfRange)],
    ['ROOT_MISMATCH', otherTree()],
  ] as const;
  const cases = lies.flatMap(([code, answer]) => [
    [`${code}, before any hedge`, code, answer, 0],
    [`${code}, after a hedge answered its keys`, code, answer, 300],
  ] as const);
  it.each(cases)('%s', async (_name, code, answer, delayMs) => {
    const { events, keys } = await scenario(answer, delayMs);
    expect(about(events, 'bad')).toEqual([
      { type: 'request', peer: 'bad', kind: 'proof', count: keys.length, hedge: false },
      { type: 'rejected', peer: 'bad', kind: 'proof', code, count: keys.length },
      { type: 'banned', peer: 'bad', code, reason: '' },
    ]);
  });
});

it('a round trip that timed out after a hedge answered its keys is a failure of its peer, not a success: the next reads give it no round trip', async () => {
  const { c, events, keys } = hedgedClient('slow', failing('TIMEOUT'), 300);
  const asked: number[] = [];
  for (let i = 0; i < 3; i++) {
    const before = events.filter((e) => e.type === 'request' && e.peer === 'slow').length;
    const read = c.getMany(keys);
    // Past the round trip's timeout (300 ms) and the back-off after it (100 ms).
    await vi.advanceTimersByTimeAsync(1000);
    expect((await read).every((v) => v?.length === 64)).toBe(true);
    asked.push(events.filter((e) => e.type === 'request' && e.peer === 'slow').length - before);
  }
  // Marked slow by its timeout, it has no lane in the next reads (it used to be "active" again, its timeout taken for a success).
  expect(asked).toEqual([1, 0, 0]);
  expect(events.filter((e) => e.peer === 'slow' && e.type !== 'request').map((e) => e.type === 'rejected' && e.code)).toEqual(['TIMEOUT']);
});

describe('close(): requests it fails are not reported', () => {
  /** Connections whose requests are never answered, and fail with CONNECTION_CLOSED when closed (as a transport's do). */
  const closable = (): Connect => async (address) => {
    const pending = new Set<(e: Error) => void>();
    const conn: PeerConnection = {
      address,
      isClosed: false,
      close() {
        for (const reject of pending) reject(new TransportError('CONNECTION_CLOSED'));
        pending.clear();
      },
      onClose() {},
      request: () => new Promise<Response>((_, reject) => pending.add(reject)),
    };
    return conn;
  };

  it('getMany and get in flight at close(): no rejected after it', async () => {
    fakeClock();
    const events: QueryEvent[] = [];
    const c = client({ root: new Uint8Array(32), peers: ['a', 'b'], connect: closable(), deadlineMs: 5000, hedgeAfterMs: 100, onEvent: (e) => events.push(e) });
    const reads = Promise.allSettled([c.getMany([Uint8Array.of(1), Uint8Array.of(2)]), c.get(Uint8Array.of(3))]);
    await vi.advanceTimersByTimeAsync(150); // both peers asked (a hedge each)
    expect(events.filter((e) => e.type === 'request').length).toBeGreaterThanOrEqual(3);
    const seen = events.length;
    c.close();
    for (const r of await reads) expect(r).toMatchObject({ status: 'rejected', reason: { code: 'CLIENT_CLOSED' } });
    await vi.advanceTimersByTimeAsync(1000);
    expect(events.slice(seen)).toEqual([]);
  });
});
