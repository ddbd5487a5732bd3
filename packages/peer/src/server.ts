/**
 * `SyncServer`: the transport-agnostic serving side of `spec/wire.md`. It
 * takes `ByteConnection`s (WebSockets, libp2p streams, in-memory pipes) and
 * answers every request frame with exactly one response frame, from a
 * `TreeSource`.
 *
 * Limits (`spec/wire.md`, "Server limits"): at the connection cap a new
 * connection evicts the longest-idle one with nothing in flight; every answer
 * queued in any transport counts against one memory budget, in bytes, and a
 * connection waits for budget before an answer is built (a client that does
 * not read its answers is closed to make room); a `RANGE` answer is cut to
 * fit the response limit (`./range.ts`).
 *
 * Per connection: one `FrameDecoder(MAX_REQUEST_BYTES)`; a bad length prefix
 * (`FRAME_TOO_LARGE`, `FRAME_MALFORMED`) or a body whose header (version,
 * kind, id) does not parse closes the connection; any other malformed
 * request is answered `BAD_REQUEST` (version 1). At most
 * `MAX_IN_FLIGHT_PER_CONNECTION` requests are in flight (received, not yet
 * answered); the excess is answered `BUSY`. Output is bounded: once
 * `OUTPUT_HIGH_WATER_BYTES` are waiting in the transport, the connection is
 * neither read nor answered until they drain. Exceptions never escape and
 * internal error text never goes on the wire: an unexpected failure is
 * answered `BUSY` ("retry later") and logged.
 *
 * A `ServerHook` (`./hook.ts`) may wrap connections and replace answers;
 * tests, benchmarks and the demo plug lies, the Baseline and link emulation
 * in that way (`packages/testnet`).
 * @module
 */

import {
  decodeRequest,
  encodeProofPayload,
  encodeResponseFrame,
  encodeRootsPayload,
  FrameDecoder,
  Kind,
  MAX_IN_FLIGHT_PER_CONNECTION,
  MAX_REQUEST_BYTES,
  MAX_RESPONSE_BYTES,
  type Request,
  Status,
  WireError,
} from '@bpavl/light-client/wire';
import { MAX_TIMER_MS } from '@bpavl/light-client/sync';
import type { ByteConnection } from './connection.ts';
import { FramePool, type FrameSpace } from './frame-pool.ts';
import type { Answer, IncomingRequest, Reply, ServerHook } from './hook.ts';
import { multiAnswer, storedMultiAnswer } from './multi.ts';
import { answerOf, proofOf, storedMultiproofPayload } from './proofs.ts';
import { fittingRangeProof, fittingStoredRangeProof } from './range.ts';
import {
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MEMORY_BUDGET_BYTES,
  OUTPUT_HIGH_WATER_BYTES,
  OUTPUT_LOW_WATER_BYTES,
  REQUESTS_PER_TURN,
} from './constants.ts';
import type { AnyServedTree, StoredTree, TreeSource } from './source.ts';

/** Options of `SyncServer`; every field has a default. */
export interface SyncServerOptions {
  /**
   * Connections served at once (default 256). At the cap a new connection
   * evicts the longest-idle one with nothing in flight; if every connection
   * has requests in flight, the new one is closed on arrival.
   */
  maxConnections?: number;
  /**
   * Bytes of answers queued in transports, across all connections, at most
   * (default 256 MiB; at least 2 × 8 MiB). An answer is built only when a
   * maximal one (8 MiB) still fits.
   */
  memoryBudget?: number;
  /** Close a connection after this long without receiving anything (default 120 s). */
  idleTimeoutMs?: number;
  /** Requests in flight per connection (default 64, at most what `spec/wire.md` allows, 64). Each count here is an integer ≥ 1 (`idleTimeoutMs` at most 2^31 − 1): another is a `RangeError`. */
  maxInFlight?: number;
  /** Wraps connections and may replace answers (tests, benchmarks and the demo; `./hook.ts`). */
  hook?: ServerHook;
  /** Diagnostics (connection faults, internal errors); silent by default. */
  log?: (message: string) => void;
}

/** `value`, or a `RangeError` unless it is an integer in `min … max`. */
function countOption(value: number, name: string, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new RangeError(`${name} must be an integer in ${min} … ${max}, got ${value}`);
  return value;
}

/** Counters, for tests and logs. */
export interface SyncServerStats {
  /** Connections accepted so far. */
  connections: number;
  /** Connections refused because `maxConnections` were open, all with requests in flight. */
  refused: number;
  /** Idle connections closed to admit a new one at the cap. */
  evicted: number;
  /** Connections closed because they did not read their answers while the memory budget was spent. */
  budgetEvicted: number;
  /** Answer bytes queued in transports now, and at most so far (never above `memoryBudget`). */
  answerBytes: number;
  peakAnswerBytes: number;
  /** Request frames received. */
  requests: number;
  /** Responses by status. */
  ok: number;
  unknownRoot: number;
  outOfRange: number;
  busy: number;
  badRequest: number;
  /** Connections closed for a protocol fault (bad prefix, unparsable header, text message). */
  faults: number;
  /** Connections closed for idleness. */
  idleClosed: number;
  /** Unexpected exceptions while answering (answered BUSY). */
  internalErrors: number;
}

/** The most payload bytes a response carries: the limit less the largest header (version, kind, 8-byte id, status). */
const MAX_PAYLOAD_BYTES = MAX_RESPONSE_BYTES - 11;

/**
 * A chunk whose envelope does not fit a response (large values: C keys and
 * values above 8 MiB) cannot go by `CHUNK` (`spec/wire.md`, "Chunks too large for a response").
 */
const TOO_LARGE_CHUNK: Answer = { status: Status.BadRequest };

/** Core errors that mean the request broke a limit: `BAD_REQUEST`. */
const SIZE_LIMITED_CODES = new Set(['QUERY_INVALID', 'KEY_EMPTY', 'KEY_TOO_LONG', 'VALUE_TOO_LONG']);

type CatchUpRequest = Extract<Request, { kind: typeof Kind.Nodes | typeof Kind.Leaves | typeof Kind.Entries }>;

/**
 * A catch-up answer (`spec/wire.md`, "Catch-up") of `tree`, or `undefined`
 * if it serves none (answered `BAD_REQUEST`, as an older peer would).
 */
function catchUpAnswer<T extends Uint8Array | Promise<Uint8Array>>(
  tree: { exportSubtree?(p: Uint8Array, l: number, m: number): T; exportLeaves?(p: Uint8Array): T; exportEntries?(p: Uint8Array, b: Uint8Array, m: number): T },
  req: CatchUpRequest,
  maxBytes: number,
): T | undefined {
  switch (req.kind) {
    case Kind.Nodes:
      return tree.exportSubtree?.(req.path, req.levels, maxBytes);
    case Kind.Leaves:
      return tree.exportLeaves?.(req.path);
    case Kind.Entries:
      return tree.exportEntries?.(req.path, req.bitmap, maxBytes);
  }
}

/**
 * Serves a `TreeSource` to any number of `ByteConnection`s.
 *
 * @example
 * ```ts
 * const server = new SyncServer(new StaticTreeSource([tree.head()]));
 * wss.on('connection', (ws) => server.handleConnection(wsConnection(ws)));
 * ```
 */
export class SyncServer {
  readonly source: TreeSource;
  readonly stats: SyncServerStats = {
    connections: 0,
    refused: 0,
    evicted: 0,
    budgetEvicted: 0,
    answerBytes: 0,
    peakAnswerBytes: 0,
    requests: 0,
    ok: 0,
    unknownRoot: 0,
    outOfRange: 0,
    busy: 0,
    badRequest: 0,
    faults: 0,
    idleClosed: 0,
    internalErrors: 0,
  };
  readonly maxConnections: number;
  readonly memoryBudget: number;
  readonly idleTimeoutMs: number;
  readonly maxInFlight: number;
  readonly hook: ServerHook | undefined;
  readonly #log: (message: string) => void;
  readonly #sessions = new Set<Session>();
  /** Sessions waiting for memory budget, first come first served. */
  readonly #waiting = new Set<Session>();
  /** @internal Output buffers of response frames, shared by every connection (`./frame-pool.ts`). */
  readonly frames = new FramePool();
  #closed = false;

  constructor(source: TreeSource, opts: SyncServerOptions = {}) {
    this.source = source;
    this.maxConnections = countOption(opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS, 'maxConnections', 1, Number.MAX_SAFE_INTEGER);
    this.memoryBudget = opts.memoryBudget ?? DEFAULT_MEMORY_BUDGET_BYTES;
    if (!(this.memoryBudget >= 2 * MAX_RESPONSE_BYTES)) throw new RangeError('memoryBudget must be at least 2 × 8 MiB');
    // A timer's longest delay: a longer one fires at once.
    this.idleTimeoutMs = countOption(opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS, 'idleTimeoutMs', 1, MAX_TIMER_MS);
    // At most what spec/wire.md lets a peer serve.
    this.maxInFlight = countOption(opts.maxInFlight ?? MAX_IN_FLIGHT_PER_CONNECTION, 'maxInFlight', 1, MAX_IN_FLIGHT_PER_CONNECTION);
    this.hook = opts.hook;
    this.#log = opts.log ?? (() => {});
  }

  /** Connections currently served. */
  get connectionCount(): number {
    return this.#sessions.size;
  }

  /** Whether a new connection would be accepted now (maybe by evicting an idle one). */
  get hasRoom(): boolean {
    return !this.#closed && (this.#sessions.size < this.maxConnections || this.#idlest() !== undefined);
  }

  /** The connection with nothing in flight that has been idle longest. */
  #idlest(): Session | undefined {
    let pick: Session | undefined;
    for (const s of this.#sessions) if (s.isIdle && (pick === undefined || s.lastActive < pick.lastActive)) pick = s;
    return pick;
  }

  /**
   * Starts serving `conn`. At the cap, evicts the longest-idle connection
   * with nothing in flight; returns false (and aborts `conn`) when the
   * server is closed or every connection has requests in flight.
   */
  handleConnection(conn: ByteConnection): boolean {
    if (!this.#closed && this.#sessions.size >= this.maxConnections) {
      const idle = this.#idlest();
      if (idle !== undefined) {
        this.stats.evicted++;
        idle.abort();
      }
    }
    if (this.#closed || this.#sessions.size >= this.maxConnections) {
      this.stats.refused++;
      conn.attach({ bytes() {}, fault() {}, drain() {}, end() {}, closed() {} });
      conn.abort();
      return false;
    }
    this.stats.connections++;
    const session = new Session(this, this.hook?.connection?.(conn) ?? conn);
    this.#sessions.add(session);
    session.start();
    return true;
  }

  /** Aborts every connection and refuses new ones. */
  close(): void {
    this.#closed = true;
    for (const s of [...this.#sessions]) s.abort();
  }

  /** @internal */
  forget(session: Session): void {
    this.#sessions.delete(session);
    this.#waiting.delete(session);
  }

  /** @internal Counts `delta` answer bytes queued (negative: flushed or dropped). */
  charge(delta: number): void {
    if (delta === 0) return;
    const s = this.stats;
    s.answerBytes += delta;
    if (s.answerBytes > s.peakAnswerBytes) s.peakAnswerBytes = s.answerBytes;
    if (delta < 0) this.#wake();
  }

  /** Lets the sessions waiting for budget go on, once a maximal answer fits. */
  #wake(): void {
    if (this.#waiting.size > 0 && this.#fits()) {
      const waiting = [...this.#waiting];
      this.#waiting.clear();
      for (const w of waiting) w.budgetFreed();
    }
  }

  /** Answers from storage being built: each may grow to a maximal answer. */
  #building = 0;

  /** Whether a maximal answer still fits the budget, beside those being built. */
  #fits(): boolean {
    return this.stats.answerBytes + (this.#building + 1) * MAX_RESPONSE_BYTES <= this.memoryBudget;
  }

  /**
   * @internal Whether `session` may build an answer now. If the budget is
   * spent, closes the connection with the most unread answer bytes (one
   * that stopped reading: over the per-connection high-water mark); if that
   * is not enough, `session` waits (`budgetFreed`).
   */
  admit(session: Session): boolean {
    if (this.#fits()) return true;
    let hog: Session | undefined;
    for (const s of this.#sessions) if (s !== session && s.unread > OUTPUT_HIGH_WATER_BYTES && (hog === undefined || s.unread > hog.unread)) hog = s;
    if (hog !== undefined) {
      this.stats.budgetEvicted++;
      this.log(`${hog.label}: does not read its answers while the memory budget is spent, closing`);
      hog.abort();
      if (this.#fits()) return true;
    }
    this.#waiting.add(session);
    return false;
  }

  /** @internal */
  log(message: string): void {
    try {
      this.#log(message);
    } catch {
      // A broken logger must not break serving.
    }
  }

  /** @internal Counts a response status. */
  count(status: Status): void {
    const s = this.stats;
    if (status === Status.Ok) s.ok++;
    else if (status === Status.UnknownRoot) s.unknownRoot++;
    else if (status === Status.OutOfRange) s.outOfRange++;
    else if (status === Status.Busy) s.busy++;
    else s.badRequest++;
  }

  /**
   * The honest answer to `req`: a status, the OK payload, and the tree it
   * came from; a promise for a version read from storage. Never throws or
   * rejects.
   */
  answer(req: Request): Answer | Promise<Answer> {
    if (req.kind === Kind.Roots) {
      // A source that follows storage lists what other processes committed, pruned or rolled back meanwhile.
      const updated = this.source.update?.(false);
      return updated === undefined ? this.#roots(req) : updated.then(() => this.#roots(req));
    }
    const known = this.#lookedUp(req);
    if (known !== undefined) return known;
    // The root may have been committed by another process since the source last looked.
    const updated = this.source.update?.(true);
    if (updated === undefined) return { status: Status.UnknownRoot };
    return updated.then(() => this.#lookedUp(req) ?? { status: Status.UnknownRoot });
  }

  /** The answer from the tree `req` names, or `undefined` if the source serves no such root. */
  #lookedUp(req: Exclude<Request, { kind: typeof Kind.Roots }>): Answer | Promise<Answer> | undefined {
    let tree: AnyServedTree | undefined;
    try {
      tree = this.source.lookup(req.root);
    } catch (e) {
      return this.#failed(req, e);
    }
    return tree === undefined ? undefined : this.#answerTree(req, tree);
  }

  /** The `ROOTS` answer: every served root. */
  #roots(req: Request): Answer {
    try {
      const roots = this.source.trees().map((t) => ({ root: t.root, version: t.version, chunkCount: t.chunkCount }));
      return { status: Status.Ok, payload: encodeRootsPayload(roots) };
    } catch (e) {
      return this.#failed(req, e);
    }
  }

  /** `answer` from the served `tree` that `req` names. */
  #answerTree(req: Exclude<Request, { kind: typeof Kind.Roots }>, tree: AnyServedTree): Answer | Promise<Answer> {
    try {
      if ('stored' in tree) return this.#answerStored(req, tree);
      let payload: Uint8Array;
      switch (req.kind) {
        case Kind.Chunk:
          if (req.index >= tree.chunkCount) return { status: Status.OutOfRange };
          payload = tree.exportChunk(req.index);
          if (payload.length > MAX_PAYLOAD_BYTES) return TOO_LARGE_CHUNK;
          break;
        case Kind.Proof:
          payload = encodeProofPayload(proofOf(tree, req.key));
          break;
        case Kind.Multiproof:
          payload = tree.proveMulti(req.keys as Uint8Array[], MAX_PAYLOAD_BYTES);
          break;
        case Kind.Range: {
          // Cut to fit, as an incomplete proof.
          const proof = fittingRangeProof(tree, req.start, req.end, req.limit, MAX_PAYLOAD_BYTES);
          if (proof === undefined) return { status: Status.Busy };
          payload = proof;
          break;
        }
        case Kind.Nodes:
        case Kind.Leaves:
        case Kind.Entries:
        case Kind.MultiLeaves:
        case Kind.MultiEntries: {
          const answer = req.kind === Kind.MultiLeaves || req.kind === Kind.MultiEntries ? multiAnswer(tree, req, MAX_PAYLOAD_BYTES) : catchUpAnswer(tree, req, MAX_PAYLOAD_BYTES);
          if (answer === undefined) return { status: Status.BadRequest };
          payload = answer;
          break;
        }
      }
      return { status: Status.Ok, payload, tree };
    } catch (e) {
      return this.#failed(req, e);
    }
  }

  /** `answer` from a version read from storage; counted as a maximal answer while it is built. */
  async #answerStored(req: Exclude<Request, { kind: typeof Kind.Roots }>, tree: StoredTree): Promise<Answer> {
    this.#building++;
    try {
      switch (req.kind) {
        case Kind.Chunk: {
          if (req.index >= tree.chunkCount) return { status: Status.OutOfRange };
          const envelope = await tree.exportChunk(req.index);
          return envelope.length > MAX_PAYLOAD_BYTES ? TOO_LARGE_CHUNK : { status: Status.Ok, payload: envelope };
        }
        case Kind.Proof: {
          const { value, proof } = await tree.prove(req.key);
          return { status: Status.Ok, payload: encodeProofPayload(answerOf(value, proof)) };
        }
        case Kind.Multiproof:
          return { status: Status.Ok, payload: await storedMultiproofPayload(tree, req.keys, MAX_PAYLOAD_BYTES) };
        case Kind.Range: {
          const proof = await fittingStoredRangeProof(tree, req.start, req.end, req.limit, MAX_PAYLOAD_BYTES);
          return proof === undefined ? { status: Status.Busy } : { status: Status.Ok, payload: proof };
        }
        case Kind.Nodes:
        case Kind.Leaves:
        case Kind.Entries:
        case Kind.MultiLeaves:
        case Kind.MultiEntries: {
          const answer = await (req.kind === Kind.MultiLeaves || req.kind === Kind.MultiEntries ? storedMultiAnswer(tree, req, MAX_PAYLOAD_BYTES) : catchUpAnswer(tree, req, MAX_PAYLOAD_BYTES));
          return answer === undefined ? { status: Status.BadRequest } : { status: Status.Ok, payload: answer };
        }
      }
    } catch (e) {
      // A stored version the writer pruned or rolled back meanwhile (the state tells it from damage): no longer served, nor listed (`ROOTS`).
      if ('stored' in tree && (e as { code?: unknown } | null)?.code === 'VERSION_UNKNOWN') {
        this.source.drop?.(tree);
        this.log(`version ${tree.version} was pruned or rolled back by another process: no longer served`);
        return { status: Status.UnknownRoot };
      }
      return this.#failed(req, e);
    } finally {
      this.#building--;
      this.#wake();
    }
  }

  /** The status for an answer that threw: the request's fault, out of range, or ours (`BUSY`, logged). */
  #failed(req: Request, e: unknown): Answer {
    const code = (e as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && SIZE_LIMITED_CODES.has(code)) return { status: Status.BadRequest };
    if (code === 'CHUNK_OUT_OF_RANGE') return { status: Status.OutOfRange };
    this.stats.internalErrors++;
    this.log(`internal error answering kind ${req.kind}: ${e instanceof Error ? e.message : String(e)}`);
    return { status: Status.Busy };
  }
}

/** One served connection. */
class Session {
  readonly #server: SyncServer;
  readonly #conn: ByteConnection;
  readonly #decoder = new FrameDecoder(MAX_REQUEST_BYTES);
  /** Decoded requests waiting for an answer (a queue: `#head` is the next). */
  #queue: IncomingRequest[] = [];
  #head = 0;
  /** Requests received and not yet answered (queued, or delayed by a hook). */
  #inFlight = 0;
  /** Reading and answering stopped until output drains. */
  #waitingDrain = false;
  /** A hook sent a broken frame: nothing more may be sent. */
  #muted = false;
  /** The remote half-closed: close once everything is answered. */
  #ended = false;
  #closed = false;
  #scheduled = false;
  /** An answer from storage is being built: the next request waits for it. */
  #answering = false;
  /** Waiting for memory budget (`SyncServer.admit`). */
  #waitingBudget = false;
  /** The answer bytes this connection has counted against the budget (its transport's `bufferedAmount`). */
  #charged = 0;
  /** When it last received bytes or was sent an answer (ms, performance.now()). */
  lastActive = performance.now();
  #idle: NodeJS.Timeout | undefined;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(server: SyncServer, conn: ByteConnection) {
    this.#server = server;
    this.#conn = conn;
  }

  get label(): string {
    return this.#conn.label;
  }

  /** Nothing in flight: closing it loses no answer. */
  get isIdle(): boolean {
    return this.#inFlight === 0;
  }

  /** Answer bytes handed to the transport and not yet written. */
  get unread(): number {
    return this.#charged;
  }

  /** Brings this connection's share of the budget up to date with its transport. */
  #account(): void {
    if (this.#closed) return;
    const now = this.#conn.bufferedAmount;
    const delta = now - this.#charged;
    this.#charged = now;
    this.#server.charge(delta);
  }

  /** The budget has room again. */
  budgetFreed(): void {
    this.#waitingBudget = false;
    this.#schedule();
  }

  start(): void {
    this.#conn.attach({
      bytes: (data) => this.#guard(() => this.#onBytes(data)),
      fault: () => this.#guard(() => this.#fault('non-binary message')),
      drain: () => this.#guard(() => this.#onDrain()),
      end: () => this.#guard(() => this.#onEnd()),
      closed: () => this.#cleanup(),
    });
    this.#idle = setTimeout(() => {
      this.#server.stats.idleClosed++;
      this.abort();
    }, this.#server.idleTimeoutMs);
    this.#idle.unref();
  }

  abort(): void {
    if (this.#closed) return;
    this.#conn.abort();
    this.#cleanup();
  }

  /** Runs a handler; an unexpected exception closes this connection instead of escaping. */
  #guard(f: () => void): void {
    try {
      f();
    } catch (e) {
      this.#server.stats.internalErrors++;
      this.#server.log(`${this.#conn.label}: internal error: ${e instanceof Error ? e.message : String(e)}`);
      this.abort();
    }
  }

  #cleanup(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#server.charge(-this.#charged);
    this.#charged = 0;
    if (this.#idle) clearTimeout(this.#idle);
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#queue = [];
    this.#head = 0;
    this.#server.forget(this);
  }

  #fault(why: string): void {
    this.#server.stats.faults++;
    this.#server.log(`${this.#conn.label}: protocol fault (${why}), closing`);
    this.abort();
  }

  #onBytes(data: Uint8Array): void {
    if (this.#closed || this.#muted) return;
    this.#idle?.refresh();
    this.lastActive = performance.now();
    const bodies = this.#decoder.frames(data);
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = bodies.next();
      } catch (e) {
        if (e instanceof WireError) return this.#fault(e.code);
        throw e;
      }
      if (next.done) break;
      this.#onRequest(next.value);
      if (this.#closed) return;
    }
    this.#checkBackpressure();
    this.#schedule();
  }

  #onRequest(body: Uint8Array): void {
    this.#server.stats.requests++;
    let req: IncomingRequest;
    try {
      const request = decodeRequest(body);
      req = { id: request.id, kind: request.kind, body, request };
    } catch (e) {
      // No id to answer to.
      if (!(e instanceof WireError) || e.request === undefined) return this.#fault(e instanceof WireError ? e.code : 'undecodable request');
      // "A peer that receives a request with another version answers
      // BAD_REQUEST with version = 1"; so does any malformed request, at
      // once, unless a hook may know its kind.
      if (this.#server.hook?.reply === undefined) return this.#sendStatus(e.request.id, e.request.kind, Status.BadRequest);
      req = { id: e.request.id, kind: e.request.kind, body };
    }
    if (this.#inFlight >= this.#server.maxInFlight) {
      this.#sendStatus(req.id, req.kind, Status.Busy);
      return;
    }
    this.#inFlight++;
    this.#queue.push(req);
  }

  #sendStatus(id: number, kind: number, status: Status): void {
    this.#server.count(status);
    // The kind is echoed as sent, known or not.
    this.#write(encodeResponseFrame({ id, kind: kind as Kind, status }));
  }

  #write(frame: Uint8Array): void {
    if (this.#closed || this.#muted) return;
    this.#conn.send(frame);
    this.#account();
  }

  #schedule(): void {
    if (this.#scheduled || this.#closed || this.#waitingDrain || this.#waitingBudget || this.#answering || this.#head >= this.#queue.length) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#guard(() => this.#pump());
    });
  }

  /** Answers up to `REQUESTS_PER_TURN` queued requests, then yields to other connections. */
  #pump(): void {
    let n = 0;
    while (!this.#closed && !this.#waitingDrain && this.#head < this.#queue.length && n < REQUESTS_PER_TURN) {
      if (!this.#server.admit(this)) {
        this.#waitingBudget = true;
        break;
      }
      const req = this.#queue[this.#head++]!;
      n++;
      this.#respond(req);
      this.#checkBackpressure();
      if (this.#answering) break;
    }
    if (this.#head >= this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    } else if (this.#head > 1024) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    this.#schedule();
  }

  #respond(req: IncomingRequest): void {
    const honest = req.request === undefined ? { status: Status.BadRequest } : this.#server.answer(req.request);
    if (!(honest instanceof Promise)) return this.#reply(req, honest);
    this.#answering = true;
    void honest.then((answer) =>
      this.#guard(() => {
        this.#answering = false;
        this.#reply(req, answer);
        this.#checkBackpressure();
        this.#schedule();
      }),
    );
  }

  #reply(req: IncomingRequest, honest: Answer): void {
    this.#send(req, this.#server.hook?.reply?.(req, honest) ?? { kind: 'answer', status: honest.status, payload: honest.payload });
  }

  /** Carries out `reply` to `req`, which leaves the in-flight count (at once, or once a delayed reply is sent). */
  #send(req: IncomingRequest, reply: Reply): void {
    switch (reply.kind) {
      case 'answer':
        return this.#finish(req, reply.status, reply.payload);
      case 'drop':
        this.#inFlight--;
        this.#maybeEnd();
        return;
      case 'delay': {
        const t = setTimeout(() => {
          this.#timers.delete(t);
          this.#guard(() => this.#send(req, reply.reply));
        }, reply.ms);
        this.#timers.add(t);
        return;
      }
      case 'raw':
        this.#inFlight--;
        this.#write(reply.bytes);
        if (reply.then === 'mute') this.#muted = true;
        else if (reply.then === 'close') {
          this.#conn.close();
          this.#cleanup();
        } else this.#maybeEnd();
        return;
    }
  }

  #finish(req: IncomingRequest, status: Status, payload: Uint8Array | undefined): void {
    this.#inFlight--;
    if (this.#closed) return;
    this.#server.count(status);
    if (this.#closed || this.#muted) return;
    let space: FrameSpace | undefined;
    const frame = encodeResponseFrame({ id: req.id, kind: req.kind as Kind, status }, payload, (size) => (space = this.#server.frames.take(size)).bytes);
    this.#conn.send(frame, space?.release);
    this.lastActive = performance.now();
    this.#account();
    this.#checkBackpressure();
    this.#maybeEnd();
  }

  #checkBackpressure(): void {
    if (!this.#waitingDrain && !this.#closed && this.#conn.bufferedAmount > OUTPUT_HIGH_WATER_BYTES) {
      this.#waitingDrain = true;
      this.#conn.pause();
    }
  }

  #onDrain(): void {
    this.#account();
    if (this.#waitingDrain && !this.#closed && this.#conn.bufferedAmount <= OUTPUT_LOW_WATER_BYTES) {
      this.#waitingDrain = false;
      this.#conn.resume();
      this.#schedule();
    }
  }

  #onEnd(): void {
    this.#ended = true;
    this.#maybeEnd();
  }

  /** After a remote half-close, closes once nothing is left to answer. */
  #maybeEnd(): void {
    if (this.#ended && this.#inFlight === 0 && !this.#closed) {
      this.#conn.close();
      this.#cleanup();
    }
  }
}
