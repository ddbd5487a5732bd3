/**
 * Catch-up (`docs/catchup.md`, `spec/wire.md` "Catch-up"): moves a stored
 * state to a newer trusted root, fetching only what changed, from many
 * untrusted peers at once. The store's session (a port: `@bpavl/store`'s
 * `State.catchUpSession`) says what to ask and checks every answer against
 * the root; this module asks peers, bans a peer at its first bad answer and
 * asks another, and treats a peer that answers the catch-up kinds with
 * `BAD_REQUEST` as one that predates them (not asked again, not banned).
 * The leaves and entries of many chunks go in one request (`MULTILEAVES`,
 * `MULTIENTRIES`), asked of the peers that serve those kinds. With no peer
 * left that serves `NODES`, it falls back to a sync of every chunk, whole,
 * into the store as its next version (`syncState` with the store's sink).
 * @module
 */

import { ask, type AskContext, type QueryEvent } from '../client/ask.js';
import { equalBytes } from '../codec.js';
import { PeerPool, type PoolPeer } from '../client/pool.js';
import { connectAuto } from '../transport/auto.js';
import type { Connect, RequestBody } from '../transport/types.js';
import { optCountArg, optMsArg, peersArg, rootArg } from '../input.js';
import { notify } from '../listener.js';
import { Kind, MAX_IN_FLIGHT_PER_CONNECTION, MAX_MULTI_CHUNKS, MAX_REQUEST_BYTES, Status } from '../wire/constants.js';
import { multiParts } from '../wire/messages.js';
import { DEFAULT_STALL_TIMEOUT_MS, syncState } from './engine.js';
import { type BannedPeer, type ChunkSink, type PeerReport, SyncError } from './types.js';

/** A piece a catch-up asks a peer for: `path` is an encoded tree path (`spec/wire.md`, "Catch-up"). */
export type CatchUpPiece =
  | { kind: 'nodes'; path: Uint8Array; levels: number }
  | { kind: 'leaves'; path: Uint8Array }
  | { kind: 'entries'; path: Uint8Array; bitmap: Uint8Array };

/** A store's side of a catch-up (a port; `@bpavl/store`'s `StoreCatchUp` is one). */
export interface CatchUpSession {
  /** The head caught up from, and the version the catch-up commits. */
  readonly fromVersion: number;
  readonly version: number;
  /** Whether every piece of the new tree is in. */
  readonly isFetched: boolean;
  /** Chunks of the new tree that differ from every chunk of the head, found so far. */
  readonly changedChunks: number;
  /** Record bytes the catch-up wrote so far. */
  readonly writtenBytes: number;
  /** Changed chunks an interrupted run of this catch-up stored, taken back instead of fetched. */
  readonly restoredChunks: number;
  /** What to ask now, at most `limit` pieces in a stable order; a piece in flight may be listed again. */
  pieces(limit: number): CatchUpPiece[];
  /** Adds an answer from the peer tagged `source`; throws an error with the ban `code` for a lie. */
  add(piece: CatchUpPiece, payload: Uint8Array, source: number): void;
  /** The first chunk's envelope after the top's `NODES` was answered `OUT_OF_RANGE`: false if the tree has more chunks. */
  addTopChunk(envelope: Uint8Array): boolean;
  /** The index of the changed chunk at `path`, once known. */
  chunkIndex(path: Uint8Array): number | undefined;
  /** The changed chunk at `path` whole, as chunk `index`'s envelope (throws an error with the ban `code` for a lie). */
  addChunk(path: Uint8Array, index: number, envelope: Uint8Array): void;
  /** Does the store work the answers so far lead to. */
  settle(): Promise<void>;
  /**
   * Commits the new version; returns it, the tags of peers whose key copies
   * lied, and the indices of its changed chunks (as `CatchUpResult.changedIndices`).
   */
  finish(): Promise<{ version: number; liars: number[]; changedIndices: Uint32Array }>;
  /** Stops; nothing is committed, and what was verified is kept for the next run. */
  close(): Promise<void>;
}

/** The sink of a sync as a store's next version: what it wrote, and which chunks the head lacked. */
export interface NextVersionSink extends ChunkSink<{ version: number }> {
  readonly writtenBytes: number;
  readonly changedChunks: number;
  /** The indices of those chunks (stored with their records, restored ones included), increasing. */
  readonly changedIndices: Uint32Array;
}

/** A store a catch-up can move forward (`@bpavl/store`'s `State`). */
export interface CatchUpTarget {
  catchUpSession(root: Uint8Array): Promise<CatchUpSession>;
  /** The sink of a sync of `root` as the store's next version, sharing every chunk the head holds (the fallback: no peer serves `NODES`). */
  syncSink(root: Uint8Array, options: { asNextVersion: true }): Promise<NextVersionSink>;
  /** The root of an unfinished sync the store holds (a fallback that was stopped), if any. */
  pendingSync(): Promise<{ root: Uint8Array } | undefined>;
}

/**
 * What a catch-up reports while it runs: the query client's events (each
 * `count` 1: a piece, a batch of pieces or a chunk is one request), and
 * progress. Requests still out when the catch-up ends (hedges that lost)
 * are not reported: nothing comes after the last `progress`, nor after the
 * promise settles.
 *
 * The whole-chunk fallback (after a `whole-chunks` event) reports only
 * `progress` and `banned`: no `request`, `verified` or `rejected`.
 */
export type CatchUpEvent =
  | QueryEvent
  /**
   * After each answer is settled into the store. `bytes`: payload bytes
   * received so far, rejected answers included (as `CatchUpResult.bytes`);
   * in the fallback, the walk's plus the chunk envelopes the sync newly
   * verified (its `progress.bytes`: not its rejected or duplicate ones, so
   * it may end below the result's). `changedChunks`: the changed chunks
   * found so far. `inflight`: the pieces in flight (asked and not settled;
   * a `MULTILEAVES`/`MULTIENTRIES` request counts each of its pieces), 0 in
   * the fallback. `wholeChunks`: in the fallback, the chunks in so far
   * (restored ones included) and their count once known.
   */
  | { type: 'progress'; bytes: number; changedChunks: number; inflight: number; wholeChunks?: { done: number; chunkCount: number | undefined } }
  /** No peer serves the catch-up requests (`NODES`): every chunk is fetched whole, and only those the store lacks are stored. */
  | { type: 'whole-chunks'; resumed: boolean };

/** Options of {@link catchUp}. */
export interface CatchUpOptions {
  /** The store to move forward; it holds an older version. */
  store: CatchUpTarget;
  /** The trusted root to catch up to. */
  root: Uint8Array;
  /** Peer addresses: `ws://host:port` URLs and libp2p multiaddrs. */
  peers: readonly string[];
  /** Stops the catch-up: it rejects with the signal's reason (already aborted: before the store is touched). */
  signal?: AbortSignal;
  /**
   * Receives every {@link CatchUpEvent}; what it throws is ignored. In the
   * whole-chunk fallback (`whole-chunks`) only `progress` and `banned`
   * follow: no `request`, `verified` or `rejected`.
   */
  onEvent?: (event: CatchUpEvent) => void;
  connect?: Connect;
  /** Per-attempt deadline in ms (default 10,000). */
  requestTimeoutMs?: number;
  /** Deadline of one connection attempt, handshakes included (default 5,000 ms). */
  connectTimeoutMs?: number;
  /** The longest one piece may take over every peer before the catch-up fails with `NO_HONEST_PEERS` (default 60,000 ms). */
  pieceDeadlineMs?: number;
  /** A peer with no valid answer for this long while it only answered `BUSY` or failed is given up (default 20,000 ms; `spec/wire.md`, "Giving up"). */
  stallTimeoutMs?: number;
  /** Requests in flight per usable peer (default 8; 1 … 64, what a peer serves). */
  inflightPerPeer?: number;
  /** Chunks whose leaves (entries) one request asks for, at most (default 32; 1 … 256; 1 asks `LEAVES` and `ENTRIES`). Durations must be above 0 and at most 2^31 − 1 ms: a bad number is a `TypeError` or `RangeError` before anything starts. */
  chunksPerRequest?: number;
}

/** What a finished catch-up returns. */
export interface CatchUpResult {
  root: Uint8Array;
  /** The version caught up from, and the new one. */
  fromVersion: number;
  version: number;
  seconds: number;
  /** Payload bytes received, rejected answers included. */
  bytes: number;
  /** Record bytes written to the store. */
  writtenBytes: number;
  /** Chunks that differed from every chunk of the old version. */
  changedChunks: number;
  /**
   * Which chunks changed: the index, in the NEW version's chunk order
   * (0 … its chunk count − 1), of each of the `changedChunks` chunks that
   * differ from every chunk of the old version, in increasing order. These
   * are the chunks the catch-up stored at the new version, whether this
   * run fetched them (their leaves and missing entries, or whole) or took
   * them back from an interrupted run. Every other index of the new
   * version is a chunk of the old version, shared unchanged (by hash, its
   * entries the same), though maybe at another index: inserts and deletes
   * before it shift it. Empty when nothing changed (the store's head was
   * the root already, or the new version holds only the old one's chunks).
   * The same in the fallback (`wholeChunks`): the chunks it stored.
   */
  changedIndices: Uint32Array;
  /** Of those, the ones an interrupted run stored (never fetched again), and the ones whose leaves this run fetched. */
  restoredChunks: number;
  fetchedChunks: number;
  /**
   * Requests made, each counted once however many attempts it took
   * (failovers, retries and hedges are not counted): one per `NODES`,
   * `LEAVES` or `ENTRIES` piece, one per `MULTILEAVES` or `MULTIENTRIES`
   * batch (and one per piece of a batch asked again one by one), one per
   * changed chunk asked whole (`CHUNK`); not the first chunk asked after
   * the top's `OUT_OF_RANGE` (a tree of one chunk). In the fallback, the
   * walk's plus one per chunk the sync fetched and per refetch
   * (`SyncFigures.refetches`). 0 when nothing was asked.
   */
  requests: number;
  banned: BannedPeer[];
  /** Whether every chunk was fetched whole: no peer served the catch-up requests (`spec/wire.md`, "Catch-up"). */
  wholeChunks: boolean;
}

/** The request of a piece. */
function requestOf(root: Uint8Array, piece: CatchUpPiece): RequestBody & { root: Uint8Array } {
  switch (piece.kind) {
    case 'nodes':
      return { kind: Kind.Nodes, root, path: piece.path, levels: piece.levels };
    case 'leaves':
      return { kind: Kind.Leaves, root, path: piece.path };
    case 'entries':
      return { kind: Kind.Entries, root, path: piece.path, bitmap: piece.bitmap };
  }
}

/**
 * The `MULTILEAVES` or `MULTIENTRIES` request of pieces of one kind, or
 * `undefined` for nodes.
 */
function multiRequestOf(root: Uint8Array, pieces: readonly CatchUpPiece[]): (RequestBody & { root: Uint8Array }) | undefined {
  const kind = pieces[0]?.kind;
  if (kind === 'leaves') return { kind: Kind.MultiLeaves, root, paths: pieces.map((p) => p.path) };
  if (kind === 'entries') return { kind: Kind.MultiEntries, root, chunks: pieces.map((p) => ({ path: p.path, bitmap: (p as { bitmap: Uint8Array }).bitmap })) };
  return undefined;
}

/** Request bytes a piece adds to a `MULTILEAVES` or `MULTIENTRIES` (its path, and its bitmap with a length). */
function multiBytes(piece: CatchUpPiece): number {
  return piece.path.length + (piece.kind === 'entries' ? 2 + piece.bitmap.length : 0);
}

/** A request's worth of leaves or entries pieces; `full` once no more fit. */
interface Batch {
  pieces: CatchUpPiece[];
  bytes: number;
  full: boolean;
}

/**
 * Leaves and entries pieces grouped into requests, each kind apart and in
 * order: at most `perRequest` chunks a request, within the request size limit.
 */
function batchesOf(pieces: readonly CatchUpPiece[], perRequest: number): Batch[] {
  const batches: Batch[] = [];
  const open = new Map<string, Batch>();
  for (const piece of pieces) {
    let batch = open.get(piece.kind);
    if (batch !== undefined && batch.bytes + multiBytes(piece) > MAX_REQUEST_BYTES) batch.full = true;
    if (batch === undefined || batch.full) {
      batch = { pieces: [], bytes: MULTI_HEAD_BYTES, full: false };
      batches.push(batch);
      open.set(piece.kind, batch);
    }
    batch.pieces.push(piece);
    batch.bytes += multiBytes(piece);
    batch.full = batch.pieces.length === perRequest;
  }
  return batches;
}

/** The longest a short batch waits for more pieces while peers are busy (ms). */
const GATHER_MS = 10;

/** Request bytes before the pieces: version, kind, id (≤ 8), root, count (≤ 2). */
const MULTI_HEAD_BYTES = 2 + 8 + 32 + 2;

function pieceKey(piece: CatchUpPiece): string {
  return `${piece.kind}:${piece.path.join(',')}:${piece.kind === 'entries' ? piece.bitmap.join(',') : ''}`;
}

/** The encoded path of the top (`depth 0`). */
const TOP = Uint8Array.of(0);

/**
 * Catches `store` up to `root`: the result is a new committed version of
 * the store whose root is `root`, sharing every record that did not change.
 * When no peer serves the catch-up requests (they predate them), every
 * chunk is fetched whole instead and only those the store lacks are stored
 * (`wholeChunks` in the result; a stopped run of it is resumed as such).
 * Rejects with `SyncError` `NO_PEERS`, or `NO_HONEST_PEERS` when some piece
 * finds no peer that serves it honestly; with the store's errors (e.g.
 * `CAPACITY_MISMATCH`, `VERSION_UNKNOWN`); or with the signal's reason,
 * at once and with the store untouched if it is aborted already. What an
 * `onEvent` listener throws is ignored (it cannot break the catch-up).
 *
 * @example
 * ```ts
 * const state = await openState({ path: 'state' });
 * const { version, bytes } = await catchUp({ store: state, root, peers: ['ws://127.0.0.1:7001'] });
 * ```
 */
export async function catchUp(opts: CatchUpOptions): Promise<CatchUpResult> {
  rootArg(opts.root);
  peersArg(opts.peers, opts.connect);
  optMsArg(opts.requestTimeoutMs, 'requestTimeoutMs');
  optMsArg(opts.pieceDeadlineMs, 'pieceDeadlineMs');
  optMsArg(opts.stallTimeoutMs, 'stallTimeoutMs');
  optMsArg(opts.connectTimeoutMs, 'connectTimeoutMs');
  optCountArg(opts.inflightPerPeer, 'inflightPerPeer', 1, MAX_IN_FLIGHT_PER_CONNECTION);
  optCountArg(opts.chunksPerRequest, 'chunksPerRequest', 1, MAX_MULTI_CHUNKS);
  if (opts.peers.length === 0) throw new SyncError('NO_PEERS', 'a catch-up needs at least one peer');
  // As `syncState`: an aborted signal rejects before the store is touched (no catch-up session is opened).
  if (opts.signal?.aborted) throw opts.signal.reason;
  const t0 = performance.now();
  const pending = await opts.store.pendingSync();
  if (pending !== undefined && equalBytes(pending.root, opts.root)) {
    // A fallback that was stopped: resumed as it was (a whole-chunk sync), whatever the peers serve now.
    return wholeChunks(opts, t0, { peers: opts.peers, bytes: 0, requests: 0, banned: [], reports: [] }, true);
  }
  const walked = await walk(opts, t0);
  return 'result' in walked ? walked.result : wholeChunks(opts, t0, walked, false);
}

/** What a walk that found no peer serving `NODES` leaves to its fallback. */
interface WalkLeftover {
  /** The peers to ask: those the walk found serving only whole chunks. */
  peers: readonly string[];
  bytes: number;
  requests: number;
  banned: BannedPeer[];
  /** The peers the walk gave up on. */
  reports: PeerReport[];
}

/**
 * The fallback when no peer serves the catch-up requests (they answered
 * `BAD_REQUEST`: they predate them): a sync of every chunk, whole, as the
 * store's next version, which stores only the chunks its head lacks
 * (`spec/wire.md`, "Catch-up").
 */
async function wholeChunks(opts: CatchUpOptions, t0: number, before: WalkLeftover, resumed: boolean): Promise<CatchUpResult> {
  const emit = (e: CatchUpEvent) => notify(opts.onEvent, e); // a listener's error must not break the catch-up
  emit({ type: 'whole-chunks', resumed });
  let sink: NextVersionSink | undefined;
  const r = await syncState({
    ...(opts.stallTimeoutMs !== undefined && { stallTimeoutMs: opts.stallTimeoutMs }),
    ...(opts.connectTimeoutMs !== undefined && { connectTimeoutMs: opts.connectTimeoutMs }),
    root: opts.root,
    peers: before.peers,
    store: { syncSink: async (root) => (sink = await opts.store.syncSink(root, { asNextVersion: true })) },
    ...(opts.signal !== undefined && { signal: opts.signal }),
    ...(opts.connect !== undefined && { connect: opts.connect }),
    ...(opts.requestTimeoutMs !== undefined && { requestTimeoutMs: opts.requestTimeoutMs }),
    onEvent: (e) => {
      if (e.type === 'peer-banned') emit({ type: 'banned', peer: e.peer, code: e.code, reason: e.reason });
      else if (e.type === 'progress') {
        const wholeChunks = { done: e.done, chunkCount: e.chunkCount };
        emit({ type: 'progress', bytes: before.bytes + e.bytes, changedChunks: sink?.changedChunks ?? 0, inflight: 0, wholeChunks });
      }
    },
  }).catch((e: unknown) => {
    // The report names the peers the walk gave up on too.
    if (e instanceof SyncError && e.code === 'NO_HONEST_PEERS') throw new SyncError(e.code, e.message, [...before.banned, ...e.banned], [...before.reports, ...e.peers]);
    throw e;
  });
  return {
    root: opts.root.slice(),
    fromVersion: r.version - 1, // the next version of the head
    version: r.version,
    seconds: (performance.now() - t0) / 1000,
    bytes: before.bytes + r.bytes,
    writtenBytes: sink!.writtenBytes,
    changedChunks: sink!.changedChunks,
    changedIndices: sink!.changedIndices,
    restoredChunks: r.restored,
    fetchedChunks: r.chunkCount - r.restored,
    requests: before.requests + r.chunkCount - r.restored + r.refetches,
    banned: [...before.banned, ...r.banned],
    wholeChunks: true,
  };
}

/** The walk from the top: the catch-up itself, or (no peer serves `NODES`) what its fallback needs. */
async function walk(opts: CatchUpOptions, t0: number): Promise<{ result: CatchUpResult } | WalkLeftover> {
  const emit = (e: CatchUpEvent) => notify(opts.onEvent, e); // a listener's error must not break the catch-up
  // Aborted while the store was asked for a stopped fallback: no session is opened either.
  if (opts.signal?.aborted) throw opts.signal.reason;
  const session = await opts.store.catchUpSession(opts.root);
  const banned: BannedPeer[] = [];
  const pool = new PeerPool(opts.peers, {
    connect: opts.connect ?? connectAuto,
    stallMs: opts.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS,
    ...(opts.connectTimeoutMs !== undefined && { connectTimeoutMs: opts.connectTimeoutMs }),
    onBan: (peer, code, reason) => {
      banned.push({ peer: peer.address, reason, code });
      emit({ type: 'banned', peer: peer.address, code, reason });
    },
  });
  /** Peers that answered a catch-up kind with `BAD_REQUEST`: they predate it. */
  const old = new Set<PoolPeer>();
  const ctx: AskContext = {
    pool,
    timeoutMs: opts.requestTimeoutMs ?? 10_000,
    deadlineMs: opts.pieceDeadlineMs ?? 60_000,
    hedgeAfterMs: 2_000,
    emit,
    noHonestPeers: (why) => new SyncError('NO_HONEST_PEERS', `no honest peer serves the catch-up: ${why}`, [...banned], pool.reports()),
    skip: old,
  };
  const tags = new Map(pool.peers.map((p, i) => [p, i] as const));
  let bytes = 0;
  let requests = 0;
  let fetchedChunks = 0;
  /** Requests out, and the pieces they ask for (a piece is asked by one request at a time). */
  const running = new Set<Promise<void>>();
  const asked = new Set<string>();
  const perPeer = opts.inflightPerPeer ?? 8;
  const perRequest = opts.chunksPerRequest ?? 32;
  /** Peers that answered `MULTILEAVES` or `MULTIENTRIES` with `BAD_REQUEST` (asked one chunk a request), and the old ones. */
  const notMulti = new Set<PoolPeer>();
  /** Since when a short batch has been held back, waiting for more pieces. */
  let heldSince: number | undefined;
  try {
    /** Every peer, those that predate the catch-up kinds included: they serve whole chunks. */
    const anyPeer: AskContext = { ...ctx, skip: new Set() };
    /** Peers that serve the leaves and entries of many chunks a request. */
    const multiPeers: AskContext = { ...ctx, skip: notMulti };
    /**
     * A changed chunk whole (`CHUNK` by index) when no peer left serves its
     * leaves or entries, only peers that predate them (`spec/wire.md`,
     * "Catch-up"); the entries the store holds are still taken from it.
     */
    const whole = async (piece: CatchUpPiece, why: unknown): Promise<void> => {
      const index = piece.kind === 'nodes' || old.size === 0 ? undefined : session.chunkIndex(piece.path);
      if (index === undefined) throw why;
      requests++;
      await ask(anyPeer, { kind: Kind.Chunk, root: opts.root, index }, 'chunk', (payload) => {
        bytes += payload.length;
        session.addChunk(piece.path, index, payload);
        if (piece.kind === 'leaves') fetchedChunks++;
      }, opts.signal);
    };
    const progress = async () => {
      await session.settle();
      emit({ type: 'progress', bytes, changedChunks: session.changedChunks, inflight: asked.size });
    };
    /** Asks for one piece until an honest answer is in and settled. */
    const fetch = async (piece: CatchUpPiece): Promise<void> => {
      requests++;
      const top = piece.kind === 'nodes' && piece.path.length === 1 && piece.path[0] === TOP[0];
      const outOfRange = await ask(
        ctx,
        requestOf(opts.root, piece),
        piece.kind,
        (payload, status, peer) => {
          bytes += payload.length;
          if (status === Status.OutOfRange) return peer; // only the top's NODES: the tree may be one chunk
          session.add(piece, payload, tags.get(peer)!);
          if (piece.kind === 'leaves') fetchedChunks++;
          return undefined;
        },
        {
          signal: opts.signal,
          onRefused: (peer) => {
            old.add(peer);
            notMulti.add(peer);
          },
          ...(top && { accept: new Set([Status.OutOfRange]) }),
        },
      ).catch(async (e: unknown) => {
        if (!(e instanceof SyncError) || e.code !== 'NO_HONEST_PEERS' || opts.signal?.aborted) throw e;
        await whole(piece, e);
        return undefined;
      });
      if (outOfRange !== undefined) {
        const envelope = await ask(ctx, { kind: Kind.Chunk, root: opts.root, index: 0 }, 'chunk', (payload) => {
          bytes += payload.length;
          return payload;
        }, opts.signal);
        if (!session.addTopChunk(envelope)) pool.ban(outOfRange, 'OUT_OF_RANGE', 'said the top is no inner node');
      }
      await progress();
    };
    /**
     * Asks for the leaves (or entries) of several chunks in one request.
     * Each part is checked as its chunk's answer before the next is read;
     * chunks after the parts that came are asked again later. With no
     * peer left that serves these kinds, each chunk is asked alone.
     */
    const fetchMany = async (pieces: CatchUpPiece[]): Promise<void> => {
      requests++;
      const kind = pieces[0]!.kind;
      try {
        await ask(
          multiPeers,
          multiRequestOf(opts.root, pieces)!,
          kind,
          (payload, _status, peer) => {
            bytes += payload.length;
            let i = 0;
            for (const part of multiParts(payload, pieces.length)) {
              session.add(pieces[i++]!, part, tags.get(peer)!);
              if (kind === 'leaves') fetchedChunks++;
            }
          },
          { signal: opts.signal, onRefused: (peer) => notMulti.add(peer) },
        );
      } catch (e) {
        if (!(e instanceof SyncError) || e.code !== 'NO_HONEST_PEERS' || opts.signal?.aborted) throw e;
        await Promise.all(pieces.map((p) => fetch(p)));
        return;
      }
      await progress();
    };
    /** Whether `piece` goes in a request of its own: nodes always, everything when one chunk a request is asked. */
    const single = (piece: CatchUpPiece) => piece.kind === 'nodes' || perRequest === 1;
    const start = (pieces: CatchUpPiece[]) => {
      const keys = pieces.map(pieceKey);
      for (const k of keys) asked.add(k);
      const run: Promise<void> = (pieces.length === 1 && single(pieces[0]!) ? fetch(pieces[0]!) : fetchMany(pieces)).finally(() => {
        running.delete(run);
        for (const k of keys) asked.delete(k);
      });
      running.add(run);
    };
    while (!session.isFetched) {
      opts.signal?.throwIfAborted();
      const usable = pool.usable().filter((p) => !old.has(p)).length;
      const room = Math.max(1, perPeer * usable);
      if (running.size < room) {
        // The session lists pieces in flight again: ask for that many more than the requests there is room for
        // can take (one peer's worth of batches at a time), and leave out those in flight.
        const fresh = session.pieces(asked.size + Math.min(room - running.size, usable) * perRequest).filter((p) => !asked.has(pieceKey(p)));
        for (const piece of fresh.filter(single)) if (running.size < room) start([piece]);
        const batches = batchesOf(fresh.filter((p) => !single(p)), perRequest);
        // A batch goes out full; a short one while peers have little to do, or once it has waited
        // GATHER_MS for more pieces (busy peers answer meanwhile; a slow link keeps its requests in flight).
        const gathered = heldSince !== undefined && performance.now() - heldSince >= GATHER_MS;
        let held = false;
        for (const batch of batches) {
          if (running.size >= room) break;
          if (batch.full || gathered || running.size < Math.max(1, usable)) start(batch.pieces);
          else held = true;
        }
        heldSince = held ? (heldSince ?? performance.now()) : undefined;
      }
      if (running.size === 0) {
        await session.settle();
        if (session.isFetched) continue;
        if (session.pieces(1).length === 0) throw ctx.noHonestPeers('it has nothing left to ask but is not complete');
        // Pieces are left and nobody to ask them (the last peer was banned or dropped, or predates the walk).
        if (!pool.usable().some((p) => !old.has(p))) throw ctx.noHonestPeers('every peer is banned, dropped or predates the catch-up');
        continue;
      }
      await Promise.race(heldSince === undefined ? running : [...running, new Promise((r) => setTimeout(r, GATHER_MS))]);
    }
    await Promise.all(running);
    const { version, liars, changedIndices } = await session.finish();
    for (const tag of new Set(liars)) {
      const peer = pool.peers[tag];
      if (peer !== undefined) pool.ban(peer, 'KEY_COPY_MISMATCH', 'sent a key copy that is not the smallest key of its right subtree');
    }
    const result: CatchUpResult = {
      root: opts.root.slice(),
      fromVersion: session.fromVersion,
      version,
      seconds: (performance.now() - t0) / 1000,
      bytes,
      writtenBytes: session.writtenBytes,
      changedChunks: session.changedChunks,
      changedIndices,
      restoredChunks: session.restoredChunks,
      fetchedChunks,
      requests,
      banned,
      wholeChunks: false,
    };
    return { result };
  } catch (e) {
    // Pieces still out settle before the session closes (their rejections are this one's).
    await Promise.allSettled(running);
    // No peer left that serves NODES, only peers that predate them: they still serve whole chunks.
    const usable = pool.usable();
    const noWalk = e instanceof SyncError && e.code === 'NO_HONEST_PEERS' && usable.length > 0 && usable.every((p) => old.has(p));
    if (noWalk && !opts.signal?.aborted) return { peers: usable.map((p) => p.address), bytes, requests, banned, reports: pool.reports().filter((r) => r.outcome !== 'refused') };
    throw e;
  } finally {
    pool.close();
    await session.close();
  }
}
