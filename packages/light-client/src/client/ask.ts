/**
 * One verified answer from a pool of untrusted peers: ask the best peer,
 * fail over on a timeout, `BUSY` or a lost connection, ban a peer whose
 * answer does not verify and ask another, hedge an overdue request on a
 * second peer, and give up with `NO_HONEST_PEERS` when no usable peer is
 * left or the deadline passes (`spec/wire.md`, "What the client checks").
 * @module
 */

import { isProofError } from '../errors.js';
import { TransportError, type PeerConnection, type RequestBody } from '../transport/types.js';
import { Kind, Status } from '../wire/constants.js';
import { WireError } from '../wire/errors.js';
import { decodeRootsPayload, type Response } from '../wire/messages.js';
import { equalBytes } from '../codec.js';
import { QueryError } from './errors.js';
import type { PeerPool, PoolPeer } from './pool.js';

/** What is asked: the query client's proofs and ranges, and a catch-up's pieces (`spec/wire.md`, "Catch-up"). */
export type AskKind = 'proof' | 'range' | 'nodes' | 'leaves' | 'entries' | 'chunk';

/**
 * What the query client (and a catch-up, `CatchUpEvent`) reports while it
 * works. Each `request` is followed by its outcome: `verified` (an answer
 * that verified: only then does the peer's latency count, and its failures
 * reset) or `rejected` (nothing verified from it), whatever other requests
 * asked meanwhile (a hedge answered first does not make a timed-out request
 * `verified`). Only a `getMany` round trip of several requests (`PROOF`s to
 * a peer from before `MULTIPROOF`, or a hedge of those) may have both, for
 * its verified and its unanswered keys.
 * An outcome may come after the read settled (a hedge that lost); nothing is
 * reported of requests failed by the client's own `close()` (or the end of a
 * catch-up).
 *
 * `count` is a number of keys, or 1:
 * - `getMany`: `request` the keys its round trip asks (one `MULTIPROOF`, or
 *   up to 8 `PROOF`s to a peer from before it, or a hedge of those); `verified` the keys its
 *   answer proved (fewer than asked for an answer cut to fit the response
 *   limit: the rest is asked again, no rejection); `rejected` the keys it
 *   does not answer (all of them for a lie).
 * - `get`, `has`, `proof` (one key), a `range` page, a catch-up's piece or
 *   batch of pieces (one `MULTILEAVES`/`MULTIENTRIES`) or chunk: always 1.
 */
export type QueryEvent =
  | { type: 'request'; peer: string; kind: AskKind; count: number; hedge: boolean }
  | { type: 'verified'; peer: string; kind: AskKind; count: number; ms: number }
  /**
   * A request whose answer is not taken, one event per request however
   * many keys it asked (`count`): a lie, its code (then `banned`, right
   * after this event, unless the peer was banned already: a request that
   * was out then); or `BUSY`, `UNKNOWN_ROOT` (a root the peer does not
   * serve), `BAD_REQUEST` (a kind the peer does not serve), `TIMEOUT`,
   * `CONNECTION_CLOSED` (also: requests out when their peer was banned,
   * whose connection the ban closed), `CONNECT_FAILED`. A peer that breaks
   * the wire protocol (a `WireError` code) is banned as its connection
   * fails, before this event.
   */
  | { type: 'rejected'; peer: string; kind: AskKind; code: string; count: number }
  | { type: 'banned'; peer: string; code: string; reason: string };

/** Timing and reporting shared by every request of a client. */
export interface AskContext {
  readonly pool: PeerPool;
  /** Per-attempt deadline in ms (connect included). */
  readonly timeoutMs: number;
  /** Whole-call deadline in ms: then `NO_HONEST_PEERS`. */
  readonly deadlineMs: number;
  /** Hedge an attempt on a second peer after max(this, 4 × the peer's latency) ms. */
  readonly hedgeAfterMs: number;
  readonly emit: (e: QueryEvent) => void;
  readonly noHonestPeers: (why: string) => Error;
  /** Peers not to ask (e.g. those that do not serve a kind). */
  readonly skip?: ReadonlySet<PoolPeer>;
}

/** What `ask` may do besides taking an OK answer. */
export interface AskOptions {
  signal?: AbortSignal | undefined;
  /** Statuses other than OK handed to `check` (with an empty payload) instead of counting as a lie. */
  accept?: ReadonlySet<Status>;
  /**
   * `BAD_REQUEST` means the peer does not serve this kind (an older peer,
   * `spec/wire.md`): it is called here and not asked again in this call,
   * never banned.
   */
  onRefused?: (peer: PoolPeer) => void;
}

/** Thrown by a `check` for an answer that is a lie but not a ProofError or WireError. */
export class Lie extends Error {
  readonly code: string;
  constructor(code: string, message?: string) {
    super(message ?? code);
    this.name = 'Lie';
    this.code = code;
  }
}

/** Roots a peer denied and then listed that it remembers (`PoolPeer.listed`). */
const LISTED_ROOTS = 8;

/** Why an attempt produced nothing; the ask moves on. */
const FAILED = Symbol('failed');

/** The reason an attempt still connecting stops once its call has finished. */
const FINISHED = Symbol('finished');

/**
 * Asks `req` until one peer's OK payload passes `check` (which throws a
 * ProofError, WireError or {@link Lie} for a lie) and resolves with its
 * result. Rejects with `QueryError` `NO_HONEST_PEERS`, or the signal's reason.
 */
export function ask<T>(
  ctx: AskContext,
  req: RequestBody & { root: Uint8Array },
  kind: AskKind,
  check: (payload: Uint8Array, status: Status, peer: PoolPeer) => T,
  options?: AbortSignal | AskOptions,
): Promise<T> {
  const { pool } = ctx;
  const opts: AskOptions = options instanceof AbortSignal || options === undefined ? { signal: options } : options;
  const signal = opts.signal;
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    /** Peers asked since the last round; `denied` (do not serve the root) stay out for the call. */
    const tried = new Set<PoolPeer>();
    const denied = new Set<PoolPeer>();
    const timers = new Set<ReturnType<typeof setTimeout>>();
    /** Aborted once the call has finished: an attempt still connecting stops waiting (and its timer goes). */
    const over = new AbortController();
    let running = 0;
    let done = false;
    const later = (ms: number, f: () => void) => {
      const t = setTimeout(() => {
        timers.delete(t);
        f();
      }, ms);
      timers.add(t);
      return t;
    };
    const finish = (f: () => void) => {
      if (done) return;
      done = true;
      for (const t of timers) clearTimeout(t);
      signal?.removeEventListener('abort', onAbort);
      over.abort(FINISHED);
      f();
    };
    const onAbort = () => finish(() => reject(signal!.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
    later(ctx.deadlineMs, () => finish(() => reject(ctx.noHonestPeers(`no verified answer within ${ctx.deadlineMs} ms`))));

    const attempt = async (peer: PoolPeer, hedge: boolean): Promise<T | typeof FAILED> => {
      ctx.emit({ type: 'request', peer: peer.address, kind, count: 1, hedge });
      const t0 = performance.now();
      peer.inflight++;
      let res: Response;
      try {
        const conn = await connectionOf(ctx, peer, over.signal);
        res = await conn.request(req, { timeoutMs: ctx.timeoutMs });
      } catch (e) {
        if (e === FINISHED) return FAILED; // the call finished while this attempt was connecting
        return failed(peer, e);
      } finally {
        peer.inflight--;
      }
      if (res.status === Status.Busy) {
        pool.onBusy(peer);
        ctx.emit({ type: 'rejected', peer: peer.address, kind, code: 'BUSY', count: 1 });
        return FAILED;
      }
      try {
        if (res.status === Status.UnknownRoot) {
          const listedBefore = peer.listed.find((l) => equalBytes(l.root, req.root) && l.at < t0);
          if (await lists(peer, req.root)) {
            // Listed before the request was sent and after the denial: a lie. Listed only after, the
            // root may have been committed meanwhile (a peer that follows its storage): asked again, it must serve it.
            if (listedBefore) throw new Lie('UNKNOWN_ROOT', 'denied a root it listed before and after');
            peer.listed = [...peer.listed.filter((l) => !equalBytes(l.root, req.root)).slice(1 - LISTED_ROOTS), { root: req.root, at: performance.now() }];
            pool.onRefused(peer, 'UNKNOWN_ROOT');
            ctx.emit({ type: 'rejected', peer: peer.address, kind, code: 'UNKNOWN_ROOT', count: 1 });
            return FAILED;
          }
          peer.listed = peer.listed.filter((l) => !equalBytes(l.root, req.root));
          denied.add(peer);
          pool.onRefused(peer, 'UNKNOWN_ROOT');
          ctx.emit({ type: 'rejected', peer: peer.address, kind, code: 'UNKNOWN_ROOT', count: 1 });
          return FAILED;
        }
        if (res.status === Status.BadRequest && opts.onRefused !== undefined) {
          opts.onRefused(peer);
          denied.add(peer);
          pool.onRefused(peer, 'BAD_REQUEST');
          ctx.emit({ type: 'rejected', peer: peer.address, kind, code: 'BAD_REQUEST', count: 1 });
          return FAILED;
        }
        // A well-formed request about a served root earns nothing but OK.
        if (res.status !== Status.Ok && !opts.accept?.has(res.status)) throw new Lie(statusName(res.status));
        const value = check(res.payload, res.status, peer);
        pool.onSuccess(peer, performance.now() - t0);
        ctx.emit({ type: 'verified', peer: peer.address, kind, count: 1, ms: performance.now() - t0 });
        return value;
      } catch (e) {
        return failed(peer, e);
      }
    };

    /**
     * Whether the peer's `ROOTS` lists `root` (a peer that does not answer,
     * or is `BUSY`, lists nothing). `ROOTS` is answered `OK`: another status,
     * or a body that does not parse, is a fault (`spec/wire.md`).
     */
    const lists = async (peer: PoolPeer, root: Uint8Array): Promise<boolean> => {
      let res: Response;
      try {
        const conn = await connectionOf(ctx, peer);
        res = await conn.request({ kind: Kind.Roots }, { timeoutMs: ctx.timeoutMs });
      } catch {
        return false;
      }
      if (res.status === Status.Busy) return false;
      if (res.status !== Status.Ok) throw new Lie(statusName(res.status), 'answered ROOTS with an error status');
      return decodeRootsPayload(res.payload).some((r) => equalBytes(r.root, root));
    };

    const failed = (peer: PoolPeer, e: unknown): typeof FAILED => {
      const code = lieCode(e);
      if (code !== undefined) {
        const reason = e instanceof Error ? e.message : String(e);
        ctx.emit({ type: 'rejected', peer: peer.address, kind, code, count: 1 });
        pool.ban(peer, code, reason);
      } else if (e instanceof TransportError) {
        // Failed by the pool's own close (the client's, or a finished catch-up's): no peer's doing, not reported.
        if (pool.closed) return FAILED;
        pool.onFailure(peer);
        ctx.emit({ type: 'rejected', peer: peer.address, kind, code: e.code, count: 1 });
      } else if (!signal?.aborted) {
        finish(() => reject(e)); // a bug, not a peer's fault: surface it
      }
      return FAILED;
    };

    const next = (hedge: boolean): void => {
      if (done) return;
      const peer = pool.pick(new Set([...tried, ...denied, ...(ctx.skip ?? [])]));
      if (peer === undefined) {
        if (running > 0) return; // an attempt is still out
        const wait = pool.readyIn(new Set([...denied, ...(ctx.skip ?? [])]));
        if (wait === undefined) return finish(() => reject(ctx.noHonestPeers('every peer is banned, dropped or lacks the root')));
        tried.clear();
        later(Math.max(1, wait), () => next(false));
        return;
      }
      tried.add(peer);
      running++;
      const hedgeTimer = later(Math.max(ctx.hedgeAfterMs, 4 * (peer.latencyMs ?? 0)), () => {
        if (running < 2) next(true);
      });
      const settled = () => {
        running--;
        clearTimeout(hedgeTimer);
        timers.delete(hedgeTimer);
      };
      void attempt(peer, hedge).then(
        (v) => {
          settled();
          if (v !== FAILED) finish(() => resolve(v));
          else next(false);
        },
        (e: unknown) => {
          // A bug, not a peer's fault: surfaced as the call's error, never left unhandled with the call hung.
          settled();
          finish(() => reject(e));
        },
      );
    };
    next(false);
  });
}

/** The ban code of a lie, or undefined for a failure that is not one. */
/** The code a peer is banned with for an error status its request does not allow (`BUSY` is never one). */
export function statusName(status: number): string {
  return status === Status.OutOfRange ? 'OUT_OF_RANGE' : status === Status.UnknownRoot ? 'UNKNOWN_ROOT' : 'BAD_REQUEST';
}

function lieCode(e: unknown): string | undefined {
  if (isProofError(e) || e instanceof WireError || e instanceof Lie) return (e as { code: string }).code;
  return undefined;
}

/**
 * The peer's connection within the attempt deadline; any failure to connect
 * is a `TransportError` (retried with back-off, never a ban). Once `signal`
 * aborts, it stops waiting (its timer cleared) and rejects with the
 * signal's reason; the connection, if it opens, stays the pool's.
 */
export function connectionOf(ctx: AskContext, peer: PoolPeer, signal?: AbortSignal): Promise<PeerConnection> {
  return new Promise<PeerConnection>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const stop = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', stop);
    };
    const t = setTimeout(() => {
      done();
      reject(new TransportError('TIMEOUT', `no connection to ${peer.address} in ${ctx.timeoutMs} ms`));
    }, ctx.timeoutMs);
    signal?.addEventListener('abort', stop, { once: true });
    ctx.pool.connection(peer).then(
      (c) => {
        done();
        resolve(c);
      },
      (e: unknown) => {
        done();
        reject(e instanceof TransportError ? e : new TransportError('CONNECT_FAILED', `cannot connect to ${peer.address}`));
      },
    );
  });
}
