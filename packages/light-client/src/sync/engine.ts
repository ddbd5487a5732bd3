/**
 * The state-sync engine (B+AVL paper §V-E; AVL* paper §4–5.4): fetch chunks
 * in parallel from many peers, verify each on arrival against the trusted
 * root, ban a peer at its first invalid chunk and fetch that chunk elsewhere,
 * and rebuild the identical tree. The same code runs in Node and browsers.
 * @module
 */

import type { Rebuilder, Tree, VerifiedChunk } from '@bpavl/wasm';
import { equalBytes } from '../codec.js';
import { MAX_CAPACITY, MIN_CAPACITY } from '../constants.js';
import { emptyRoot } from '../hash.js';
import { optCountArg, optMsArg, peersArg, rootArg } from '../input.js';
import { notify } from '../listener.js';
import { connectAuto } from '../transport/auto.js';
import type { Connect, PeerConnection } from '../transport/types.js';
import { DEFAULT_CONNECT_TIMEOUT_MS, TransportError } from '../transport/types.js';
import { Kind, MAX_IN_FLIGHT_PER_CONNECTION, Status } from '../wire/constants.js';
import { WireError } from '../wire/errors.js';
import type { Response } from '../wire/messages.js';
import { PeerState } from './peer.js';
import { Scheduler } from './scheduler.js';
import {
  type BannedPeer,
  type ChunkSink,
  type PeerOutcome,
  type PeerReport,
  SyncError,
  type SyncEvent,
  type SyncFigures,
  type SyncOptions,
  type SyncResult,
  type StoreSyncOptions,
  type StoreSyncResult,
} from './types.js';

/**
 * Bytes a sink may hold before they are durable: above it no chunk is asked
 * for until its writes catch up, so a slow disk bounds memory, not the peers.
 */
const SINK_BACKLOG_BYTES = 32 << 20;

/** Default of `SyncOptions.stallTimeoutMs` (`spec/wire.md`, "Giving up"). */
export const DEFAULT_STALL_TIMEOUT_MS = 20_000;

/**
 * Syncs the whole state under `root` from `peers` and resolves with the
 * rebuilt tree. Rejects with `SyncError` (`NO_HONEST_PEERS`, with a report
 * per peer) when every peer is banned or unusable, with the signal's
 * reason on abort, and with the error itself when the sink cannot take a
 * chunk or the WASM module traps (`WebAssembly.RuntimeError`: no peer is
 * banned for it).
 *
 * @example
 * ```ts
 * const { tree } = await syncState({
 *   root, peers: ['ws://127.0.0.1:7001', '/ip4/127.0.0.1/tcp/7002/ws/p2p/12D3…'],
 *   onEvent: (e) => e.type === 'peer-banned' && console.log(e.peer, e.code),
 * });
 * ```
 */
type Wasm = typeof import('@bpavl/wasm');
let wasmLoading: Promise<Wasm> | undefined;

/**
 * `@bpavl/wasm`, loaded and instantiated at the first sync: importing this
 * module loads no WebAssembly (a page that only verifies proofs in TS never
 * fetches it). A failed load is not kept, so a later sync tries again.
 */
function loadWasm(): Promise<Wasm> {
  if (wasmLoading === undefined) {
    const loading = import('@bpavl/wasm').then(async (m) => {
      await m.init();
      return m;
    });
    loading.catch(() => {
      if (wasmLoading === loading) wasmLoading = undefined;
    });
    wasmLoading = loading;
  }
  return wasmLoading;
}

export async function syncState(opts: StoreSyncOptions): Promise<StoreSyncResult>;
export async function syncState(opts: SyncOptions): Promise<SyncResult>;
export async function syncState(opts: SyncOptions | StoreSyncOptions): Promise<SyncResult | StoreSyncResult> {
  rootArg(opts.root);
  checkSyncOptions(opts);
  if (opts.signal?.aborted) throw opts.signal.reason;
  const wasm = await loadWasm();
  if ('store' in opts && opts.store !== undefined) {
    const sink = await opts.store.syncSink(opts.root);
    return new SyncSession(opts, wasm.verifyChunk, sink, (r, figures) => ({ ...figures, version: r.version })).run();
  }
  const version = (opts as SyncOptions).version ?? 1;
  return new SyncSession(opts, wasm.verifyChunk, new MemorySink(wasm, opts.root, version), (tree, figures) => ({ ...figures, tree })).run();
}

/** The peers and numbers `syncState` takes, before anything starts: `TypeError` or `RangeError` for a bad one. */
function checkSyncOptions(opts: SyncOptions | StoreSyncOptions): void {
  peersArg(opts.peers, opts.connect);
  if (!('store' in opts && opts.store !== undefined)) optCountArg((opts as SyncOptions).version, 'version', 1);
  optCountArg(opts.initialWindow, 'initialWindow', 1, MAX_IN_FLIGHT_PER_CONNECTION);
  optCountArg(opts.maxWindow, 'maxWindow', 1, MAX_IN_FLIGHT_PER_CONNECTION);
  optCountArg(opts.maxFailures, 'maxFailures', 1);
  for (const name of ['requestTimeoutMs', 'connectTimeoutMs', 'stallTimeoutMs'] as const) optMsArg(opts[name], name);
}

/** Checks a chunk envelope against the root and the index asked for (`verifyChunk` of `@bpavl/wasm`). */
type VerifyChunk = (root: Uint8Array, index: number, envelope: Uint8Array) => VerifiedChunk;

/** The default sink: the in-memory rebuilder, finishing into a `Tree`. */
class MemorySink implements ChunkSink<Tree> {
  readonly restored: readonly number[] = [];
  readonly chunkCount = undefined;
  readonly backlogBytes = 0;
  readonly #wasm: Wasm;
  readonly #root: Uint8Array;
  readonly #version: number;
  /** Until `finish` takes it or `close` frees it. */
  #rebuilder: Rebuilder | undefined;

  constructor(wasm: Wasm, root: Uint8Array, version: number) {
    this.#wasm = wasm;
    this.#root = root;
    this.#version = version;
    this.#rebuilder = new wasm.Rebuilder(root);
  }

  add(chunk: VerifiedChunk): void {
    this.#rebuilder!.addVerified(chunk);
  }

  watch(): void {}

  async finish(): Promise<Tree> {
    const rebuilder = this.#rebuilder!;
    this.#rebuilder = undefined;
    const capacity = emptyTreeCapacity(this.#root);
    if (capacity === undefined) return rebuilder.finish(this.#version); // throws only on a bug: every chunk verified
    rebuilder.free();
    const tree = new this.#wasm.Tree(capacity);
    tree.commit();
    return tree;
  }

  async close(): Promise<void> {
    this.#rebuilder?.free();
    this.#rebuilder = undefined;
  }
}

/** The root of the empty tree of each capacity from MIN_CAPACITY: 4,095 hashes, computed once. */
let emptyRoots: Uint8Array[] | undefined;

/** The capacity whose empty tree has root `root`, if any. */
function emptyTreeCapacity(root: Uint8Array): number | undefined {
  emptyRoots ??= Array.from({ length: MAX_CAPACITY - MIN_CAPACITY + 1 }, (_, i) => emptyRoot(MIN_CAPACITY + i));
  const i = emptyRoots.findIndex((r) => equalBytes(r, root));
  return i < 0 ? undefined : MIN_CAPACITY + i;
}

class SyncSession<Out, Result> {
  private readonly root: Uint8Array;
  private readonly opts: Omit<SyncOptions, 'version'>;
  private readonly verify: VerifyChunk;
  private readonly sink: ChunkSink<Out>;
  private readonly toResult: (out: Out, figures: SyncFigures) => Result;
  private readonly connect: Connect;
  private readonly timeoutMs: number;
  private readonly maxFailures: number;
  private readonly connectTimeoutMs: number;
  private readonly stallMs: number;
  private readonly peers: PeerState[];
  private readonly started = performance.now();
  /** Which chunk each peer fetches next (the policy; this class does the I/O). */
  private readonly schedule: Scheduler<PeerState>;
  /**
   * The envelope accepted for an index while another request for it is
   * still out (a hedge), so that an identical late copy is recognised
   * without verifying it again. At most one per outstanding request.
   */
  private readonly held = new Map<number, Uint8Array>();
  private wakeAt = Infinity;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly banned: BannedPeer[] = [];
  /** Every peer given up on, and why. */
  private readonly reports: PeerReport[] = [];
  private bytes = 0;
  private verifiedBytes = 0;
  private rejected = 0;
  private finished = false;
  /**
   * Every chunk is verified, or the sync stopped, and the sink is writing
   * what it took: its writes are still reported until the promise settles.
   */
  private draining = false;
  private wake: ReturnType<typeof setTimeout> | undefined;
  private resolve!: (r: Result) => void;
  private reject!: (e: unknown) => void;

  constructor(opts: Omit<SyncOptions, 'version'>, verify: VerifyChunk, sink: ChunkSink<Out>, toResult: (out: Out, figures: SyncFigures) => Result) {
    this.opts = opts;
    this.verify = verify;
    this.sink = sink;
    this.toResult = toResult;
    this.root = opts.root;
    this.connect = opts.connect ?? connectAuto;
    this.timeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.maxFailures = opts.maxFailures ?? 4;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.stallMs = opts.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    const initial = opts.initialWindow ?? 4;
    const max = opts.maxWindow ?? 32;
    this.peers = [...new Set(opts.peers)].map((a) => new PeerState(a, initial, max, this.started));
    this.schedule = new Scheduler(sink.restored, sink.chunkCount);
  }

  run(): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.opts.signal?.addEventListener('abort', this.onAbort, { once: true });
      if (this.opts.signal?.aborted) return this.onAbort(); // aborted while WASM loaded
      this.sink.watch(
        (chunks) => {
          if (this.finished && !this.draining) return;
          this.emit({ type: 'stored', chunks });
          if (!this.finished) this.pump(); // the backlog shrank
        },
        (e) => this.failWith(e),
      );
      const s = this.schedule;
      if (s.done > 0) this.emit({ type: 'restored', chunks: s.done, chunkCount: s.chunkCount, indices: this.sink.restored });
      if (emptyTreeCapacity(this.root) !== undefined || s.complete) return this.complete();
      if (this.peers.length === 0) return this.fail(new SyncError('NO_PEERS', 'no peers given'));
      for (const p of this.peers) this.open(p);
      this.pump(); // arms the give-up timer even if no connection ever opens
    });
  }

  private emit(e: SyncEvent): void {
    notify(this.opts.onEvent, e); // a listener's error must not break the sync
  }

  private setPeer(p: PeerState, status: PeerState['status'], reason?: string, code?: string, outcome?: PeerOutcome): void {
    p.status = status;
    this.emit({ type: 'peer', peer: p.address, status, ...(reason && { reason }), ...(code && { code }), ...(outcome && { outcome }) });
  }

  private later(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      f();
    }, ms);
    this.timers.add(t);
  }

  private open(p: PeerState): void {
    if (this.finished || !p.usable || p.connecting) return;
    p.connecting = true;
    this.connect(p.address, this.opts.signal, { timeoutMs: this.connectTimeoutMs }).then(
      (conn) => {
        p.connecting = false;
        if (this.finished || !p.usable) return conn.close();
        p.conn = conn;
        p.connected = true;
        // An idle connection the peer closes has no request to fail: notice it
        // here. A protocol fault (a duplicate response, say) bans the peer
        // even when no request was pending.
        conn.onClose((reason) => {
          if (this.finished || !p.usable || p.conn !== conn) return;
          p.conn = undefined;
          if (reason instanceof WireError) this.ban(p, 'broke the wire protocol', reason.code);
          else this.lost(p, 'connection closed');
        });
        if (p.status === 'connecting') this.setPeer(p, 'active');
        this.pump();
      },
      () => {
        p.connecting = false;
        if (this.finished) return;
        this.lost(p, 'unreachable');
      },
    );
  }

  /** A failed connection or request: back off, reconnect, or drop. */
  private lost(p: PeerState, reason: string): void {
    p.onFailure(performance.now());
    if (p.failures >= this.maxFailures) {
      const { outcome, code } = p.stallOutcome;
      return this.drop(p, reason, outcome, code);
    }
    if (p.status === 'slow') this.setPeer(p, 'slow', reason);
    if (!p.conn || p.conn.isClosed) {
      p.conn = undefined;
      this.later(p.notBefore - performance.now(), () => this.open(p));
    }
    this.pump();
  }

  /** Gives up on a peer that is not lying but cannot help. */
  private drop(p: PeerState, reason: string, outcome: Exclude<PeerOutcome, 'banned'>, code: string): void {
    if (!p.usable) return;
    this.reports.push({ peer: p.address, outcome, reason, code });
    this.setPeer(p, 'failed', reason, code, outcome);
    p.conn?.close();
    this.checkStuck();
  }

  private ban(p: PeerState, reason: string, code: string): void {
    if (!p.usable) return;
    this.banned.push({ peer: p.address, reason, code });
    this.reports.push({ peer: p.address, outcome: 'banned', reason, code });
    this.setPeer(p, 'banned', reason, code, 'banned');
    this.emit({ type: 'peer-banned', peer: p.address, reason, code });
    p.conn?.close();
    this.checkStuck();
  }

  private checkStuck(): void {
    if (!this.finished && !this.peers.some((p) => p.usable)) {
      this.fail(
        new SyncError(
          'NO_HONEST_PEERS',
          `every peer is banned or unusable (${this.schedule.done} of ${this.schedule.chunkCount ?? '?'} chunks)`,
          this.banned,
          this.reports,
        ),
      );
    }
  }

  private pump(): void {
    if (this.finished) return;
    const now = performance.now();
    let soonest = Infinity;
    this.schedule.beginRound();
    // Healthy peers first, so that stallers do not take the scarce work.
    const order = this.peers.filter((p) => p.usable).sort((a, b) => a.failures - b.failures);
    for (const p of order) {
      // "Giving up": no valid chunk for stallMs while only BUSY, failures or a pending connect.
      if (p.stalled(now, this.stallMs)) {
        const { outcome, code } = p.stallOutcome;
        this.drop(p, `no valid chunk in ${this.stallMs} ms`, outcome, code);
        if (this.finished) return;
        continue;
      }
      if (now - p.lastProgress >= this.stallMs) p.lastProgress = now; // idle, not stalled: a new period
      soonest = Math.min(soonest, p.lastProgress + this.stallMs);
      if (p.notBefore > now) soonest = Math.min(soonest, p.notBefore);
      if (!p.wantsWork(now) || this.sink.backlogBytes > SINK_BACKLOG_BYTES) continue;
      while (p.canRequest(now)) {
        const next = this.schedule.next(p, p.requests > 0, now);
        if (!next) break;
        this.fetch(p, p.conn!, next.index, next.hedge, now);
      }
    }
    this.wakeUpAt(Math.min(soonest, this.schedule.hedgeDueAt), now);
  }

  /** Runs `pump` again at `at` (ms, performance.now()), unless it is due earlier anyway. */
  private wakeUpAt(at: number, now: number): void {
    if (at === Infinity || at >= this.wakeAt) return;
    if (this.wake !== undefined) clearTimeout(this.wake);
    this.wakeAt = at;
    // +1: timers have millisecond resolution, and an early wake finds nothing due.
    this.wake = setTimeout(() => {
      this.wake = undefined;
      this.wakeAt = Infinity;
      this.pump();
    }, Math.max(0, at - now) + 1);
  }

  private fetch(p: PeerState, conn: PeerConnection, index: number, hedge: boolean, now: number): void {
    p.inflight.add(index);
    p.requests += 1;
    this.schedule.requested(p, index, now);
    this.emit({ type: 'request', index, peer: p.address, hedge });
    conn.request({ kind: Kind.Chunk, root: this.root, index }, { timeoutMs: this.timeoutMs }).then(
      (res) => {
        if (this.settle(p, index)) this.onResponse(p, index, res, performance.now() - now);
        this.release(index);
      },
      (err) => {
        if (this.settle(p, index)) this.onError(p, conn, index, err);
        this.release(index);
      },
    );
  }

  /** Clears the request's bookkeeping; false if the session is over. */
  private settle(p: PeerState, index: number): boolean {
    p.inflight.delete(index);
    this.schedule.settled(p, index);
    return !this.finished;
  }

  /** Drops the envelope held for `index` once no request for it is out. */
  private release(index: number): void {
    if (!this.schedule.isOut(index)) this.held.delete(index);
  }

  private onResponse(p: PeerState, index: number, res: Response, ms: number): void {
    switch (res.status) {
      case Status.Ok:
        this.onChunk(p, index, res.payload, ms);
        break;
      case Status.Busy:
        p.onBusy(performance.now());
        this.schedule.requeue(index, true);
        break;
      case Status.OutOfRange:
        // The root proves the chunk exists (chunk 0 always does in a non-empty tree).
        this.ban(p, 'denied an existing chunk', 'OUT_OF_RANGE');
        this.schedule.requeue(index);
        break;
      case Status.UnknownRoot:
        this.drop(p, 'does not serve this root', 'refused', 'UNKNOWN_ROOT');
        this.schedule.requeue(index);
        break;
      default:
        this.drop(p, 'refused a valid request', 'refused', 'BAD_REQUEST');
        this.schedule.requeue(index);
    }
    this.pump();
  }

  private onChunk(p: PeerState, index: number, envelope: Uint8Array, ms: number): void {
    this.bytes += envelope.length;
    const accepted = this.held.get(index);
    if (accepted !== undefined && equalBytes(accepted, envelope)) {
      // A hedged duplicate, byte for byte the envelope that verified for this
      // index: verifyChunk is a function of (root, index, bytes), so it
      // verifies too. Anything else is verified below, and a liar banned.
      this.onServed(p, ms, envelope.length);
      return;
    }
    let chunk;
    try {
      chunk = this.verify(this.root, index, envelope);
    } catch (e) {
      // A trap (`WebAssembly.RuntimeError`: a panic in the module) is no peer's lie, and the
      // module is not to be used after it. (By name: not every project's lib types WebAssembly.)
      if (e instanceof Error && e.name === 'RuntimeError') return this.failWith(e);
      const code = (e as { code?: string }).code ?? 'VERIFY_FAILED';
      this.rejected += 1;
      this.emit({ type: 'chunk-rejected', index, peer: p.address, code });
      this.ban(p, 'sent an invalid chunk', code);
      this.schedule.requeue(index);
      return;
    }
    this.schedule.learnChunkCount(chunk.chunkCount);
    this.onServed(p, ms, envelope.length);
    if (!this.schedule.receive(index)) {
      chunk.free(); // a hedged duplicate
      return;
    }
    try {
      this.sink.add(chunk);
    } catch (e) {
      return this.failWith(e); // a write the sink cannot take: not a peer's fault
    }
    if (this.schedule.isOut(index)) this.held.set(index, envelope); // a hedge is still out
    this.verifiedBytes += envelope.length;
    this.emit({ type: 'chunk-verified', index, peer: p.address, ms, bytes: envelope.length });
    if (this.finished) return; // a listener aborted
    this.progress();
    if (!this.finished && this.schedule.complete) this.complete();
  }

  /** A valid chunk from `p`, new or not. */
  private onServed(p: PeerState, ms: number, bytes: number): void {
    this.schedule.observeLatency(ms);
    p.onSuccess(ms, bytes);
    if (p.status === 'active' && p.failures === 0) this.emit({ type: 'peer', peer: p.address, status: 'active' });
  }

  private onError(p: PeerState, conn: PeerConnection, index: number, err: unknown): void {
    if (p.usable) {
      if (err instanceof WireError) {
        this.ban(p, 'broke the wire protocol', err.code);
      } else if (err instanceof TransportError && err.code === 'TIMEOUT') {
        this.lost(p, 'timed out');
      } else if (p.conn === conn) {
        // The connection ended: count it once, not once per pending request.
        p.conn = undefined;
        this.lost(p, 'connection lost');
      }
    }
    this.schedule.requeue(index);
    this.pump();
  }

  private progress(): void {
    const seconds = (performance.now() - this.started) / 1000;
    const { done, chunkCount } = this.schedule;
    const rate = seconds > 0 ? this.verifiedBytes / seconds : 0;
    // The rate of this run: restored chunks took no time.
    const fetched = done - this.sink.restored.length;
    const eta = chunkCount === undefined || fetched === 0 ? undefined : ((chunkCount - done) * seconds) / fetched;
    this.emit({
      type: 'progress',
      done,
      chunkCount,
      bytes: this.verifiedBytes,
      bytesPerSecond: rate,
      etaSeconds: eta,
    });
  }

  private cleanup(): void {
    this.finished = true;
    this.opts.signal?.removeEventListener('abort', this.onAbort);
    if (this.wake !== undefined) clearTimeout(this.wake);
    this.held.clear();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const p of this.peers) p.conn?.close();
  }

  private readonly onAbort = (): void => {
    if (this.finished) return;
    this.failWith(this.opts.signal!.reason);
  };

  private fail(err: SyncError): void {
    this.failWith(err);
  }

  private failWith(err: unknown): void {
    if (this.finished) return;
    this.cleanup();
    this.draining = true;
    // Settle only once the sink's writes landed: a caller that reads the store
    // right after the rejection finds what the last `stored` event said.
    void this.sink
      .close()
      .catch(() => {}) // a sink's close does not reject; the sync's own error is the one to report
      .then(() => {
        this.draining = false;
        this.reject(err);
      });
  }

  private result(out: Out): Result {
    const seconds = (performance.now() - this.started) / 1000;
    this.emit({
      type: 'done',
      root: this.root,
      seconds,
      bytes: this.bytes,
      refetches: this.schedule.refetches,
      rejected: this.rejected,
    });
    return this.toResult(out, {
      root: this.root,
      seconds,
      bytes: this.bytes,
      chunkCount: this.schedule.done,
      restored: this.sink.restored.length,
      refetches: this.schedule.refetches,
      rejected: this.rejected,
      banned: this.banned,
    });
  }

  /** Every chunk is in (or the root is an empty tree's): the sink finishes the state. */
  private complete(): void {
    this.cleanup();
    this.draining = true;
    this.sink.finish().then(
      (out) => {
        this.draining = false;
        this.resolve(this.result(out));
      },
      (e: unknown) => {
        void this.sink
          .close()
          .catch(() => {})
          .then(() => {
            this.draining = false;
            this.reject(e);
          });
      },
    );
  }
}
