// The peers and numbers syncState, catchUp and createClient take are checked before
// anything starts (noble's convention: TypeError for a type, RangeError for
// a value): no connection is opened, no store is touched. Before these
// checks a window of 0 never asked anything, a NaN deadline timed every
// request out at once, and a version of 0 failed only after the whole sync.
import { describe, expect, it } from 'vitest';
import { createClient } from '../src/client/index.js';
import { catchUp, syncState, type CatchUpTarget, type Connect } from '../src/sync/index.js';

const root = new Uint8Array(32).fill(7);
const peers = ['ws://127.0.0.1:9'];
let connects = 0;
const connect: Connect = () => {
  connects++;
  return Promise.reject(new Error('a check should have come first'));
};
/** A store that fails the test if the catch-up reaches it. */
const store = new Proxy({}, { get: () => () => Promise.reject(new Error('a check should have come first')) }) as CatchUpTarget;

/** [name, options, the error class] */
type Case = [string, Record<string, unknown>, typeof TypeError | typeof RangeError];

/** A peer list the default connect cannot dial (checked only when no `connect` is given). */
const badPeers: Case[] = [
  ['an http:// peer', { peers: ['ws://127.0.0.1:9', 'http://127.0.0.1:9'], connect: undefined }, RangeError],
  ['a bare host:port peer', { peers: ['127.0.0.1:9'], connect: undefined }, RangeError],
  ['a peer that is no string', { peers: [7] }, TypeError],
  ['peers that are no array', { peers: 'ws://127.0.0.1:9' }, TypeError],
];

const bad: Case[] = [
  ['requestTimeoutMs NaN', { requestTimeoutMs: NaN }, RangeError],
  ['requestTimeoutMs 0', { requestTimeoutMs: 0 }, RangeError],
  ['requestTimeoutMs -1', { requestTimeoutMs: -1 }, RangeError],
  ['requestTimeoutMs Infinity', { requestTimeoutMs: Infinity }, RangeError],
  ['requestTimeoutMs 2^31 (a timer would fire at once)', { requestTimeoutMs: 2 ** 31 }, RangeError],
  ['requestTimeoutMs "10"', { requestTimeoutMs: '10' }, TypeError],
];

describe('syncState', () => {
  it.each<Case>([
    ...bad,
    ...badPeers,
    ['connectTimeoutMs 0', { connectTimeoutMs: 0 }, RangeError],
    ['stallTimeoutMs -5', { stallTimeoutMs: -5 }, RangeError],
    ['stallTimeoutMs 1e11', { stallTimeoutMs: 1e11 }, RangeError],
    ['maxWindow 0', { maxWindow: 0 }, RangeError],
    ['maxWindow 65 (a peer serves 64)', { maxWindow: 65 }, RangeError],
    ['initialWindow 1.5', { initialWindow: 1.5 }, RangeError],
    ['maxFailures 0', { maxFailures: 0 }, RangeError],
    ['version 0', { version: 0 }, RangeError],
    ['version -1', { version: -1 }, RangeError],
    ['version 1n', { version: 1n }, TypeError],
  ])('%s', async (_name, options, type) => {
    connects = 0;
    await expect(syncState({ root, peers, connect, ...options })).rejects.toThrow(type);
    expect(connects).toBe(0);
  });
});

describe('catchUp', () => {
  it.each<Case>([
    ...bad,
    ...badPeers,
    ['root of 31 bytes', { root: new Uint8Array(31) }, RangeError],
    ['pieceDeadlineMs 0', { pieceDeadlineMs: 0 }, RangeError],
    ['inflightPerPeer 0', { inflightPerPeer: 0 }, RangeError],
    ['inflightPerPeer 65', { inflightPerPeer: 65 }, RangeError],
    ['chunksPerRequest 0', { chunksPerRequest: 0 }, RangeError],
    ['chunksPerRequest 257 (MULTILEAVES carries 256)', { chunksPerRequest: 257 }, RangeError],
  ])('%s', async (_name, options, type) => {
    connects = 0;
    await expect(catchUp({ store, root, peers, connect, ...options })).rejects.toThrow(type);
    expect(connects).toBe(0);
  });

  it('an aborted signal rejects with its reason before the store is touched, as syncState', async () => {
    connects = 0;
    await expect(catchUp({ store, root, peers, connect, signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    const reason = new Error('stopped');
    await expect(catchUp({ store, root, peers, connect, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(connects).toBe(0);
  });
});

describe('createClient', () => {
  it.each<Case>([
    ...bad,
    ...badPeers,
    ['root of 31 bytes', { root: new Uint8Array(31) }, RangeError],
    ['a root that is no Uint8Array', { root: Array.from(root) }, TypeError],
    ['deadlineMs 0', { deadlineMs: 0 }, RangeError],
    ['hedgeAfterMs -1', { hedgeAfterMs: -1 }, RangeError],
    ['maxFailures 2.5', { maxFailures: 2.5 }, RangeError],
  ])('%s', (_name, options, type) => {
    expect(() => createClient({ root, peers, connect, ...options })).toThrow(type);
  });

  it('setRoot: a root of 31 bytes is a RangeError, one that is no Uint8Array a TypeError; the root is unchanged', () => {
    const client = createClient({ root, peers, connect });
    try {
      expect(() => client.setRoot(new Uint8Array(31))).toThrow(RangeError);
      expect(() => client.setRoot('00'.repeat(32) as unknown as Uint8Array)).toThrow(TypeError);
      expect(client.root).toBe(root);
    } finally {
      client.close();
    }
  });

  it('takes any address when given its own connect', () => {
    createClient({ root, peers: ['memory:a'], connect }).close();
  });

  it('takes a hedge delay of 0 (hedge at once)', () => {
    createClient({ root, peers, connect, hedgeAfterMs: 0 }).close();
  });
});
