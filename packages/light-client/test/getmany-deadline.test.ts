// `getMany`'s bounds, against in-memory connections (no sockets):
// - the read as a whole ends by its documented deadline (`deadlineMs`, with
//   `NO_HONEST_PEERS`) even when a transport's request never settles;
// - once it settles (resolved, rejected or aborted), no timer of its own is
//   left: not its deadline, not a back-off or hedging wait, not a connect wait.
// Time is vitest's fake clock (`setTimeout` and `performance`), except in the
// one test that reads Node's active handles, which uses a short real read.

import { init } from '@bpavl/wasm';
import { beforeAll, expect, it, vi } from 'vitest';
import { fakeConnect, honestAnswers, trackedClients } from './support/fake-peers.js';

beforeAll(() => init());

const client = trackedClients();

it('a read whose requests never settle rejects with NO_HONEST_PEERS at its deadline, and leaves no timer', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  const c = client({ root: new Uint8Array(32), peers: ['a', 'b'], connect: fakeConnect(), deadlineMs: 1000, requestTimeoutMs: 200, hedgeAfterMs: 20 });
  let outcome: unknown;
  const read = c.getMany(Array.from({ length: 10 }, (_, i) => Uint8Array.of(1, i))).then(
    () => (outcome = 'resolved'),
    (e: unknown) => (outcome = e),
  );
  await vi.advanceTimersByTimeAsync(999);
  expect(outcome).toBeUndefined(); // still within its deadline: b hedged a's round trip, nothing answered
  await vi.advanceTimersByTimeAsync(1);
  await read;
  expect(outcome).toMatchObject({ name: 'QueryError', code: 'NO_HONEST_PEERS' });
  expect(vi.getTimerCount()).toBe(0);
});

it('an aborted read leaves no timer, and rejects with the signal\'s reason', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  const c = client({ root: new Uint8Array(32), peers: ['a', 'b'], connect: fakeConnect(), deadlineMs: 1000, hedgeAfterMs: 300 });
  const ctl = new AbortController();
  const read = c.getMany([Uint8Array.of(1), Uint8Array.of(2)], { signal: ctl.signal }).catch((e: unknown) => e);
  await vi.advanceTimersByTimeAsync(100); // b waits to hedge a's round trip
  expect(vi.getTimerCount()).toBeGreaterThan(0);
  const reason = new Error('stop');
  ctl.abort(reason);
  expect(await read).toBe(reason);
  expect(vi.getTimerCount()).toBe(0);
});

it('a read answered early by one peer, while another never answers, resolves and leaves no timer', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  const { root, keys, answer } = honestAnswers(new Set(['honest']));
  // The honest peer is listed first: it takes the keys, and the silent peer's lanes wait to hedge (500 ms).
  const c = client({ root, peers: ['honest', 'silent'], connect: fakeConnect(answer), deadlineMs: 5000, hedgeAfterMs: 500 });
  const values = await c.getMany(keys);
  expect(values.every((v) => v?.length === 64)).toBe(true);
  expect(vi.getTimerCount()).toBe(0);
});

it('a read hedged past a silent peer resolves once the hedge is answered, and leaves no timer', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  const { root, keys, answer } = honestAnswers(new Set(['honest']));
  // The silent peer is listed first: it takes the keys; the honest peer hedges its round trip once overdue.
  const c = client({ root, peers: ['silent', 'honest'], connect: fakeConnect(answer), deadlineMs: 5000, hedgeAfterMs: 100 });
  let values: (Uint8Array | undefined)[] | undefined;
  const read = c.getMany(keys).then((v) => (values = v));
  await vi.advanceTimersByTimeAsync(200);
  await read;
  expect(values!.every((v) => v?.length === 64)).toBe(true);
  expect(vi.getTimerCount()).toBe(0);
});

it('Node holds no timer of a read that settled early (process.getActiveResourcesInfo)', async () => {
  const { root, keys, answer } = honestAnswers(new Set(['honest']));
  const c = client({ root, peers: ['honest', 'silent'], connect: fakeConnect(answer), deadlineMs: 60_000, hedgeAfterMs: 30_000 });
  const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timeouts();
  const values = await c.getMany(keys);
  expect(values.every((v) => v?.length === 64)).toBe(true);
  // Before: the silent peer's lanes left 30 s hedging waits behind (and a 60 s deadline would have too).
  expect(timeouts()).toBeLessThanOrEqual(before);
});
