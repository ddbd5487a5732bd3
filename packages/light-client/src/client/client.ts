/**
 * The query client: verified reads from untrusted peers that trusts only a
 * root. Every answer is checked against the root *and* the asked key or
 * range (`spec/proof-format.md`); a peer whose answer fails is banned with
 * the code and the read asked of another (`./ask.ts`, `./pool.ts`).
 * @module
 */

import { checkKey, compareBytes } from '../codec.js';
import { isProofError } from '../errors.js';
import { rootArg, bytesArg, optBytesArg, optCountArg, optMsArg, peersArg } from '../input.js';
import { notify } from '../listener.js';
import { checkRangeQuery, rangeWindowCount, type AbsenceResult, type EntryPosition, type KeyValue, type RangeResult } from '../proofs.js';
import { connectAuto } from '../transport/auto.js';
import { TransportError, type Connect, type PeerConnection } from '../transport/types.js';
import { tsVerifier, wasmVerifier, type Verifier, type WasmVerifierModule } from '../verifier.js';
import { Kind, MAX_MULTIPROOF_REQUEST_KEYS, MAX_REQUEST_BYTES, Status } from '../wire/constants.js';
import { WireError } from '../wire/errors.js';
import { decodeMultiproofPayload, decodeProofPayload, type Response } from '../wire/messages.js';
import { ask, connectionOf, statusName, type AskContext, type QueryEvent } from './ask.js';
import { QueryError, type BannedPeer } from './errors.js';
import { PeerPool, type PoolPeer } from './pool.js';

/** Options of {@link createClient}. */
export interface ClientOptions {
  /** The trusted root: 32 bytes (not a Uint8Array: `TypeError`; another length: `RangeError`, at `createClient`). */
  root: Uint8Array;
  /** Peer addresses: `ws://host:port` URLs and libp2p multiaddrs. */
  peers: readonly string[];
  /** Opens connections; the default picks WebSocket or libp2p (loaded only when used) by address. */
  connect?: Connect;
  /** An initialized `@bpavl/wasm` module: proofs are then verified in WASM, `getMany`'s as a batch. */
  wasm?: WasmVerifierModule;
  /** Per-request deadline in ms, connect included (default 2,000). */
  requestTimeoutMs?: number;
  /** Whole-read deadline in ms, after which a read fails with `NO_HONEST_PEERS` (default 10,000). */
  deadlineMs?: number;
  /** An unanswered request is also asked of a second peer after max(this, 4 × the peer's latency) ms (default 50; ≥ 0, the other durations > 0; each at most 2^31 − 1 ms: a bad number is a `TypeError` or `RangeError` at `createClient`). `getMany` hedges in its endgame: once every key is asked, a peer with nothing left asks an overdue round trip of another peer again. */
  hedgeAfterMs?: number;
  /** Consecutive timeouts or lost connections after which a peer is dropped (default 4). */
  maxFailures?: number;
  /** Receives every {@link QueryEvent}; what it throws is ignored (it cannot break a read). */
  onEvent?: (event: QueryEvent) => void;
}

/** Per-call options. */
export interface CallOptions {
  /** Abandons the call: it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** Options of {@link Client.range}. */
export interface RangeOptions extends CallOptions {
  /** Entries per page, 1 … 65536 (default 1,000). */
  limit?: number;
}

/** One verified page of a range. */
export interface RangePage {
  /** The entries, in key order. */
  entries: KeyValue[];
  /** True on the last page. */
  complete: boolean;
  /** Where the next page starts, when not complete. */
  resumeKey: Uint8Array | undefined;
}

/** A verified `PROOF` answer, for a dapp that forwards it. */
export interface VerifiedProof {
  /** The root it verified against. */
  root: Uint8Array;
  key: Uint8Array;
  /** The value, or `undefined` if the key is absent. */
  value: Uint8Array | undefined;
  /** The proof's bytes (`spec/proof-format.md`: 0x01 existence, 0x02 absence). */
  proof: Uint8Array;
  /** Where the entry sits (present keys). */
  position: EntryPosition | undefined;
  /** The proven neighbours (absent keys). */
  absence: AbsenceResult | undefined;
}

/** A query client; see {@link createClient}. */
export interface Client {
  /** The root reads are verified against now. */
  readonly root: Uint8Array;
  /** The value of `key`, or `undefined` if absent; either way proven. */
  get(key: Uint8Array, opts?: CallOptions): Promise<Uint8Array | undefined>;
  /** Whether `key` is present, proven. */
  has(key: Uint8Array, opts?: CallOptions): Promise<boolean>;
  /** The values of `keys`, in order, pipelined across peers and verified as batches. */
  getMany(keys: readonly Uint8Array[], opts?: CallOptions): Promise<(Uint8Array | undefined)[]>;
  /** Verified pages of every entry with `start ≤ key < end` (`end` undefined: to the last key). */
  range(start: Uint8Array, end?: Uint8Array, opts?: RangeOptions): AsyncIterableIterator<RangePage>;
  /** The verified proof of `key`, with its bytes. */
  proof(key: Uint8Array, opts?: CallOptions): Promise<VerifiedProof>;
  /**
   * Follows a new head: reads from now on verify against `root`; reads
   * already started finish against the old one. `root` must be 32 bytes:
   * not a Uint8Array is a `TypeError`, another length a `RangeError`
   * (thrown, the root unchanged).
   */
  setRoot(root: Uint8Array): void;
  /** Calls `listener` with every event until the returned function is called; what it throws is ignored (it cannot break a read). */
  subscribe(listener: (event: QueryEvent) => void): () => void;
  /** The peers banned so far, with their codes. */
  readonly banned: readonly BannedPeer[];
  /**
   * Closes every connection. Reads in flight reject at once with
   * `QueryError` `CLIENT_CLOSED`, and so does every read called after
   * (arguments are checked first); a second call does nothing.
   */
  close(): void;
}

/** Keys that `getMany` asks one by one at a time, once its lanes ended early. */
const KEYS_ASKED_ONE_BY_ONE = 16;

/** `getMany` round trips in flight per peer (each one `MULTIPROOF` request, as many keys as fit). */
const LANE_DEPTH = 4;

/** `PROOF` requests per round trip, to a peer that predates `MULTIPROOF`: 32 in flight per peer (a peer serves 64 at once, `spec/wire.md`). */
const SINGLE_PROOFS_PER_TRIP = 8;

/** A `MULTIPROOF` request body without its keys: version, kind, id (≤ 8 bytes), root, count (≤ 2 bytes). */
const MULTIPROOF_REQUEST_OVERHEAD = 1 + 1 + 8 + 32 + 2;

/**
 * A query client over `peers` that trusts only `root`. Throws before any
 * peer is dialed: `TypeError` or `RangeError` for a bad option (a `root`
 * that is not 32 bytes is a `RangeError`), `QueryError` `NO_PEERS` for
 * no peer. Reads reject with `QueryError` `NO_HONEST_PEERS`, or
 * `CLIENT_CLOSED` once {@link Client.close} is called, or with their
 * signal's reason.
 *
 * @example
 * ```ts
 * const client = createClient({ root, peers: ['ws://127.0.0.1:7001', 'ws://127.0.0.1:7002'] });
 * const value = await client.get(key);               // undefined if proven absent
 * for await (const page of client.range(a, b)) show(page.entries);
 * client.close();
 * ```
 */
export function createClient(opts: ClientOptions): Client {
  let root = rootArg(opts.root);
  peersArg(opts.peers, opts.connect);
  optMsArg(opts.requestTimeoutMs, 'requestTimeoutMs');
  optMsArg(opts.deadlineMs, 'deadlineMs');
  optMsArg(opts.hedgeAfterMs, 'hedgeAfterMs', true);
  optCountArg(opts.maxFailures, 'maxFailures', 1);
  if (opts.peers.length === 0) throw new QueryError('NO_PEERS', 'a client needs at least one peer');
  const verifier: Verifier = opts.wasm ? wasmVerifier(opts.wasm) : tsVerifier;
  const listeners = new Set<(e: QueryEvent) => void>();
  if (opts.onEvent) listeners.add(opts.onEvent);
  // A listener's error must not break a read: each listener is isolated from the others and from the client.
  const emit = (e: QueryEvent) => {
    for (const l of listeners) notify(l, e);
  };
  const banned: BannedPeer[] = [];
  const pool = new PeerPool(opts.peers, {
    connect: opts.connect ?? connectAuto,
    ...(opts.maxFailures !== undefined ? { maxFailures: opts.maxFailures } : {}),
    onBan: (peer, code, reason) => {
      banned.push({ peer: peer.address, code });
      emit({ type: 'banned', peer: peer.address, code, reason });
    },
  });
  const ctx: AskContext = {
    pool,
    timeoutMs: opts.requestTimeoutMs ?? 2000,
    deadlineMs: opts.deadlineMs ?? 10_000,
    hedgeAfterMs: opts.hedgeAfterMs ?? 50,
    emit,
    noHonestPeers: (why) => new QueryError('NO_HONEST_PEERS', `no honest peer answered: ${why}`, [...banned]),
  };

  let closed = false;
  /** One controller per read in flight: `close()` aborts each with `CLIENT_CLOSED`. */
  const reads = new Set<AbortController>();
  const closedError = () => new QueryError('CLIENT_CLOSED', 'the client is closed', [...banned]);
  /**
   * Runs one read (or one range page) with a signal that the caller's
   * `signal` aborts with its reason and `close()` with `CLIENT_CLOSED`;
   * on a closed client it rejects at once.
   */
  const guarded = async <T>(signal: AbortSignal | undefined, read: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    if (closed) throw closedError();
    signal?.throwIfAborted();
    const ctl = new AbortController();
    const forward = () => ctl.abort(signal!.reason);
    signal?.addEventListener('abort', forward, { once: true });
    reads.add(ctl);
    try {
      return await read(ctl.signal);
    } finally {
      reads.delete(ctl);
      signal?.removeEventListener('abort', forward);
    }
  };

  /** Checks a PROOF payload for `key` against `at`; throws the lie's code. */
  const checkProof = (at: Uint8Array, key: Uint8Array, payload: Uint8Array): VerifiedProof => {
    const { present, value, proof } = decodeProofPayload(payload);
    if (present) {
      const position = verifier.verifyExistence(at, key, value!, proof);
      return { root: at, key, value, proof, position, absence: undefined };
    }
    const absence = verifier.verifyAbsence(at, key, proof);
    return { root: at, key, value: undefined, proof, position: undefined, absence };
  };

  const proof = async (key: Uint8Array, o?: CallOptions): Promise<VerifiedProof> => {
    key = keyArg(key);
    const at = root;
    return guarded(o?.signal, (signal) => ask(ctx, { kind: Kind.Proof, root: at, key }, 'proof', (p) => checkProof(at, key, p), signal));
  };

  /** Peers that answered `MULTIPROOF` with `BAD_REQUEST` (they predate it): asked one `PROOF` per key. */
  const singleProofPeers = new WeakSet<PoolPeer>();

  const getMany = async (keys: readonly Uint8Array[], o?: CallOptions): Promise<(Uint8Array | undefined)[]> => {
    const given = keys.map(keyArg);
    const at = root;
    return guarded(o?.signal, (signal) => getManyAt(at, given, signal));
  };

  /**
   * `getMany` of checked keys against `at`; `caller` is the read's signal
   * (its caller's, or `close()`). The read ends by its deadline whatever its
   * requests do (a transport's request may never settle), and leaves no
   * timer behind once it settles.
   */
  const getManyAt = async (at: Uint8Array, given: Uint8Array[], caller: AbortSignal): Promise<(Uint8Array | undefined)[]> => {
    // The read's own signal: aborted with the caller's reason, with
    // `NO_HONEST_PEERS` at the deadline, and once the read has settled (so
    // that a lane still waiting stops at its next step).
    const read = new AbortController();
    const signal = read.signal;
    const forward = () => read.abort(caller.reason);
    caller.addEventListener('abort', forward, { once: true });
    const deadline = setTimeout(() => read.abort(ctx.noHonestPeers(`no verified answer within ${ctx.deadlineMs} ms`)), ctx.deadlineMs);
    /** Back-off and hedging waits in progress, cleared when the read settles. */
    const timers = new Set<ReturnType<typeof setTimeout>>();
    try {
      return await getManyWith(at, given, signal, timers);
    } finally {
      clearTimeout(deadline);
      for (const t of timers) clearTimeout(t);
      timers.clear();
      caller.removeEventListener('abort', forward);
      if (!signal.aborted) read.abort(new Error('the read has settled'));
    }
  };

  /** `getManyAt`'s work; `signal` is the read's own, `timers` its waits. */
  const getManyWith = async (
    at: Uint8Array,
    given: Uint8Array[],
    signal: AbortSignal,
    timers: Set<ReturnType<typeof setTimeout>>,
  ): Promise<(Uint8Array | undefined)[]> => {
    // Each distinct key once, in key order: a multiproof asks for strictly
    // increasing keys, and keys close together share the most of its tree.
    const order = given.map((_, i) => i).sort((a, b) => compareBytes(given[a]!, given[b]!));
    const asked: Uint8Array[] = [];
    const slot: number[] = new Array(given.length); // given index → asked index
    for (const i of order) {
      if (asked.length === 0 || compareBytes(asked[asked.length - 1]!, given[i]!) !== 0) asked.push(given[i]!);
      slot[i] = asked.length - 1;
    }
    /** The read's deadline: lanes that a `BUSY` backed off go on until then. */
    const until = performance.now() + ctx.deadlineMs;
    /** Whether a lane of this round stopped at a `BUSY`. */
    let backedOff = false;
    const values: (Uint8Array | undefined)[] = new Array(asked.length);
    /** Whether each asked key's value is verified (a value may be `undefined`: proven absent). */
    const done: boolean[] = new Array(asked.length).fill(false);
    let remaining = asked.length;
    /** Resolves once every key is verified, or the call is aborted: a lane still waiting on a stalled peer is not waited for. */
    let over = false;
    let resolveSettled!: () => void;
    const settled = new Promise<void>((resolve) => (resolveSettled = resolve));
    const settle = () => {
      over = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      resolveSettled();
    };
    if (remaining === 0) settle();
    if (signal.aborted) settle();
    const onAbort = () => settle();
    signal.addEventListener('abort', onAbort, { once: true });
    const verified = (i: number, value: Uint8Array | undefined) => {
      values[i] = value;
      if (done[i]) return;
      done[i] = true;
      if (--remaining === 0) settle();
    };
    /** Waits `ms`, or less if the call settles first (its timer is then cleared; none is set once it has). */
    const pause = (ms: number): Promise<void> =>
      over
        ? Promise.resolve()
        : Promise.race([
            settled,
            new Promise<void>((resolve) => {
              const t = setTimeout(() => {
                timers.delete(t);
                resolve();
              }, ms);
              timers.add(t);
            }),
          ]);
    /** Keys given back by a lane (a lie, a cut answer, trouble): taken before new ones. */
    const requeued: number[] = [];
    let next = 0;
    const take = (): number | undefined => {
      // A requeued key may have been answered since by a hedge of its round trip.
      for (let i = requeued.pop(); i !== undefined; i = requeued.pop()) if (!done[i]) return i;
      return next < asked.length ? next++ : undefined;
    };
    const anyLeft = () => requeued.some((i) => !done[i]) || next < asked.length;
    /** Round trips in flight, for the endgame: a lane with nothing left to take asks an overdue one of another peer again. */
    const inflight = new Set<{ peer: PoolPeer; groups: number[][]; since: number; hedged: boolean }>();
    /** When `trip`'s answer is overdue: as `ask` hedges, after max(hedgeAfterMs, 4 × its peer's latency). */
    const overdueAt = (trip: { peer: PoolPeer; since: number }) => trip.since + Math.max(ctx.hedgeAfterMs, 4 * (trip.peer.latencyMs ?? 0));
    /**
     * A round trip of another peer to ask again, once every key is taken:
     * the first one overdue, marked so that it is hedged once; or, while
     * some are not overdue yet, how long until the first is; `undefined`:
     * nothing left in flight elsewhere.
     */
    const hedgeFor = (peer: PoolPeer): number[][] | number | undefined => {
      let wait: number | undefined;
      for (const trip of inflight) {
        if (trip.peer === peer || trip.hedged) continue;
        const groups = trip.groups.map((g) => g.filter((i) => !done[i])).filter((g) => g.length > 0);
        if (groups.length === 0) continue;
        const ms = overdueAt(trip) - performance.now();
        if (ms <= 0) {
          trip.hedged = true;
          return groups;
        }
        wait = Math.min(wait ?? ms, ms);
      }
      return wait;
    };

    /** A round trip's groups of keys: one `MULTIPROOF` request filled to the request limit (keys in order), or one key per `PROOF`. */
    const window = (single: boolean): number[][] => {
      const groups: number[][] = [];
      if (single) {
        for (let i = take(); i !== undefined; i = groups.length < SINGLE_PROOFS_PER_TRIP ? take() : undefined) groups.push([i]);
        return groups;
      }
      const group: number[] = [];
      let bytes = MULTIPROOF_REQUEST_OVERHEAD;
      for (let i = take(); i !== undefined; i = take()) {
        const size = asked[i]!.length + 2; // a key's varint length prefix is at most 2 bytes
        if (group.length === MAX_MULTIPROOF_REQUEST_KEYS || bytes + size > MAX_REQUEST_BYTES) {
          requeued.push(i);
          break;
        }
        group.push(i);
        bytes += size;
      }
      // Indices follow key order; requeued ones may come out of it.
      return group.length > 0 ? [group.sort((a, b) => a - b)] : [];
    };

    /**
     * One peer's share: `LANE_DEPTH` round trips in flight at a time, each
     * checked as a batch as soon as it is answered, so that verifying one
     * answer overlaps the peer's proving of the next.
     */
    const lane = async (peer: PoolPeer): Promise<void> => {
      let conn: PeerConnection;
      try {
        conn = await connectionOf(ctx, peer, signal);
      } catch {
        if (!signal.aborted) pool.onFailure(peer);
        return;
      }
      // A lane ends at its peer's first trouble (ban, back-off): its keys go to another lane, to the next round
      // of lanes (after a BUSY), or to `ask`, which fails over.
      const trips = async (): Promise<void> => {
        for (;;) {
          if (signal.aborted || peer.status !== 'active' || performance.now() < peer.notBefore) return;
          const single = singleProofPeers.has(peer);
          let groups = anyLeft() ? window(single) : [];
          const hedge = groups.length === 0;
          if (hedge) {
            // The endgame: keys another peer holds past their due time are asked here too, and the first verified answer counts.
            const found = hedgeFor(peer);
            if (found === undefined) return;
            if (typeof found === 'number') {
              await pause(found);
              continue;
            }
            // A peer from before MULTIPROOF is asked one key per PROOF.
            groups = single ? found.flat().map((i) => [i]) : found;
          }
          const count = groups.reduce((n, g) => n + g.length, 0);
          const t0 = performance.now();
          const trip = { peer, groups, since: t0, hedged: hedge };
          inflight.add(trip);
          emit({ type: 'request', peer: peer.address, kind: 'proof', count, hedge });
          peer.inflight += groups.length;
          const answers = await Promise.allSettled(
            groups.map((g) =>
              conn.request(single ? { kind: Kind.Proof, root: at, key: asked[g[0]!]! } : { kind: Kind.Multiproof, root: at, keys: g.map((i) => asked[i]!) }, {
                timeoutMs: ctx.timeoutMs,
              }),
            ),
          );
          peer.inflight -= groups.length;
          inflight.delete(trip);
          // Its keys that are still needed go back; the outcome is what this round trip's own answers were,
          // whether or not a hedge has answered its keys meanwhile.
          requeued.push(...checkWindow(peer, single, groups, answers, performance.now() - t0).filter((i) => !done[i]));
        }
      };
      await Promise.all(Array.from({ length: LANE_DEPTH }, trips));
    };

    /**
     * Records the verified answers of a round trip, reports its outcome and
     * tells the pool; returns the indices to ask again. A lie: one `rejected`
     * (every key of the round trip), then the ban. Otherwise `verified` for
     * the keys its answers proved, and one `rejected` for the keys a `BUSY`,
     * a denial, a timeout or a lost connection left unanswered; the peer's
     * success (its latency, `ms`) counts only with no such trouble.
     */
    const checkWindow = (peer: PoolPeer, single: boolean, groups: number[][], answers: PromiseSettledResult<Response>[], ms: number): number[] => {
      const retry: number[] = [];
      let lie: { code: string; reason: string } | undefined;
      let trouble: 'busy' | 'failure' | undefined;
      /** The first code of a request not answered (no lie), and how many keys those requests asked. */
      let refusal: string | undefined;
      let refused = 0;
      let proven = 0;
      const refuse = (code: string, group: number[]) => {
        refusal ??= code;
        refused += group.length;
        retry.push(...group);
      };
      for (const [j, a] of answers.entries()) {
        const group = groups[j]!;
        if (a.status === 'rejected') {
          if (a.reason instanceof WireError) {
            lie ??= { code: a.reason.code, reason: a.reason.message };
            retry.push(...group);
          } else {
            trouble = 'failure';
            // A transport rejects with TransportError or WireError only; anything else is counted as a lost connection.
            refuse(a.reason instanceof TransportError ? a.reason.code : 'CONNECTION_CLOSED', group);
          }
          continue;
        }
        const res = a.value;
        if (res.status !== Status.Ok) {
          if (res.status === Status.Busy) {
            trouble ??= 'busy';
            refuse('BUSY', group);
          } else if (res.status === Status.UnknownRoot) {
            trouble = 'failure'; // `ask` tells a denial from a lie
            refuse('UNKNOWN_ROOT', group);
          } else if (res.status === Status.BadRequest && !single) {
            singleProofPeers.add(peer); // a peer from before MULTIPROOF
            refuse('BAD_REQUEST', group);
          } else {
            lie ??= { code: statusName(res.status), reason: 'status' };
            retry.push(...group);
          }
          continue;
        }
        try {
          if (single) {
            verified(group[0]!, checkProof(at, asked[group[0]!]!, res.payload).value);
            proven += 1;
            continue;
          }
          const { count, proof: bytes } = decodeMultiproofPayload(res.payload, group.length);
          const values = verifier.verifyMultiproof(at, group.slice(0, count).map((i) => asked[i]!), bytes).values;
          for (const [n, v] of values.entries()) verified(group[n]!, v);
          proven += count;
          retry.push(...group.slice(count)); // a cut answer: the rest is asked again
        } catch (e) {
          if (!(e instanceof WireError) && !isProofError(e)) throw e;
          lie ??= { code: e.code, reason: e.message };
          retry.push(...group);
        }
      }
      // Requests failed by the client's own close(): nobody's doing, not reported.
      if (pool.closed) return retry;
      if (lie) {
        const count = groups.reduce((n, g) => n + g.length, 0);
        emit({ type: 'rejected', peer: peer.address, kind: 'proof', code: lie.code, count });
        pool.ban(peer, lie.code, lie.reason);
        return retry;
      }
      if (proven > 0) emit({ type: 'verified', peer: peer.address, kind: 'proof', count: proven, ms });
      if (refusal !== undefined) emit({ type: 'rejected', peer: peer.address, kind: 'proof', code: refusal, count: refused });
      if (trouble === 'failure') pool.onFailure(peer);
      else if (trouble === 'busy') {
        pool.onBusy(peer);
        backedOff = true;
      } else if (proven > 0) pool.onSuccess(peer, ms);
      return retry;
    };

    if (pool.usable().length === 0) throw ctx.noHonestPeers('every peer is banned or dropped');
    try {
      for (;;) {
        backedOff = false;
        await Promise.race([Promise.all(pool.usable().map(lane)), settled]);
        if (signal.aborted || !anyLeft() || !backedOff) break;
        // A lane stopped at a BUSY, "retry later" (spec/wire.md), not a sign
        // that its peer predates MULTIPROOF: the lanes go on once a peer's
        // back-off ends, within the read's deadline.
        // (A timer may fire a fraction of a millisecond early: wait until a peer is ready.)
        for (let wait = pool.readyIn(new Set()); wait !== undefined && wait > 0 && remaining > 0 && !signal.aborted; wait = pool.readyIn(new Set())) {
          if (performance.now() + wait >= until) {
            await pause(until - performance.now());
            if (signal.aborted) break; // the caller's reason, or the deadline's
            if (remaining > 0) throw ctx.noHonestPeers(`no verified answer within ${ctx.deadlineMs} ms`);
          }
          await pause(wait);
        }
        if (signal.aborted) break;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) throw signal.reason;
    // What no lane finished (every lane ended early) is asked key by key,
    // with failover: a few keys at a time, so that peers answering BUSY are
    // not flooded, and none after the first failure.
    const left: number[] = [];
    for (let i = take(); i !== undefined; i = take()) left.push(i);
    let failure: { error: unknown } | undefined;
    const oneByOne = async (): Promise<void> => {
      for (let i = left.pop(); i !== undefined && failure === undefined; i = left.pop()) {
        const key = asked[i]!;
        try {
          verified(i, (await ask(ctx, { kind: Kind.Proof, root: at, key }, 'proof', (p) => checkProof(at, key, p), signal)).value);
        } catch (error) {
          failure ??= { error };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(KEYS_ASKED_ONE_BY_ONE, left.length) }, oneByOne));
    if (failure !== undefined) throw failure.error;
    return slot.map((i) => values[i]);
  };

  async function* range(start: Uint8Array, end?: Uint8Array, o?: RangeOptions): AsyncIterableIterator<RangePage> {
    let cursor = bytesArg(start, 'start');
    const stop = optBytesArg(end, 'end');
    const limit = o?.limit ?? 1000;
    checkRangeQuery(cursor, stop, limit);
    const at = root;
    for (;;) {
      const from = cursor;
      const req = { kind: Kind.Range, root: at, start: from, limit, ...(stop ? { end: stop } : {}) } as const;
      const page = await guarded(o?.signal, (signal) => ask(ctx, req, 'range', (p) => verifyRangePage(verifier, at, from, stop, limit, p), signal));
      yield { entries: page.entries, complete: page.complete, resumeKey: page.resumeKey };
      if (page.complete) return;
      cursor = page.resumeKey!;
    }
  }

  return {
    get root() {
      return root;
    },
    get: async (key, o) => (await proof(key, o)).value,
    has: async (key, o) => (await proof(key, o)).value !== undefined,
    getMany,
    range,
    proof,
    setRoot(next) {
      root = rootArg(next);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get banned() {
      return [...banned];
    },
    close() {
      if (closed) return;
      closed = true;
      const error = closedError();
      for (const ctl of reads) ctl.abort(error);
      pool.close();
    },
  };
}

/**
 * Checks a `RANGE` answer for `(start, end, limit)`. A peer cuts an answer
 * that would exceed the response limit to its first k results (`spec/wire.md`,
 * "Requests"): such an answer is verified as the proof for `limit = k`. An
 * incomplete answer with no results is a lie (one result always fits), and so
 * is one with more than `limit`; both throw `RANGE_INVALID`.
 */
function verifyRangePage(
  verifier: Verifier,
  root: Uint8Array,
  start: Uint8Array,
  end: Uint8Array | undefined,
  limit: number,
  proof: Uint8Array,
): RangeResult {
  try {
    return verifier.verifyRange(root, start, end, limit, proof);
  } catch (e) {
    if (!(isProofError(e) && e.code === 'RANGE_INVALID')) throw e;
    const k = rangeWindowCount(proof, start, end) - 1; // the results; the last entry is the successor
    if (k < 1 || k >= limit) throw e;
    // Only an incomplete proof verifies for a smaller limit than one it failed for.
    return verifier.verifyRange(root, start, end, k, proof);
  }
}

/** A key argument: a Uint8Array of 1 … 1024 bytes (else TypeError, or ProofError KEY_EMPTY / KEY_TOO_LONG) before any peer is asked. */
function keyArg(key: unknown): Uint8Array {
  const k = bytesArg(key, 'key');
  checkKey(k);
  return k;
}

