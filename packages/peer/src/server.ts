/**
 * `SyncServer`: the transport-agnostic serving side of `spec/wire.md`. It
 * takes `ByteConnection`s (WebSockets, libp2p streams, in-memory pipes) and
 * answers every request frame with exactly one response frame, from a
 * `TreeSource`.
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
import type { ByteConnection } from './connection.ts';
import { FramePool, type FrameSpace } from './frame-pool.ts';
import type { Answer, IncomingRequest, Reply, ServerHook } from './hook.ts';
import {
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_CONNECTIONS,
  OUTPUT_HIGH_WATER_BYTES,
  OUTPUT_LOW_WATER_BYTES,
  REQUESTS_PER_TURN,
} from './constants.ts';
import type { TreeSource } from './source.ts';

/** Options of `SyncServer`; every field has a default. */
export interface SyncServerOptions {
  /** Connections served at once (default 256); the excess is closed on arrival. */
  maxConnections?: number;
  /** Close a connection after this long without receiving anything (default 120 s). */
  idleTimeoutMs?: number;
  /** Requests in flight per connection (default 64, `spec/wire.md`). */
  maxInFlight?: number;
  /** Wraps connections and may replace answers (tests, benchmarks and the demo; `./hook.ts`). */
  hook?: ServerHook;
  /** Diagnostics (connection faults, internal errors); silent by default. */
  log?: (message: string) => void;
}

/** Counters, for tests and logs. */
export interface SyncServerStats {
  /** Connections accepted so far. */
  connections: number;
  /** Connections refused because `maxConnections` were open. */
  refused: number;
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

const SIZE_LIMITED_CODES = new Set(['QUERY_INVALID', 'KEY_EMPTY', 'KEY_TOO_LONG', 'VALUE_TOO_LONG']);

/**
 * Serves a `TreeSource` to any number of `ByteConnection`s.
 *
 * @example
 * ```ts
 * const server = new SyncServer(new StaticTreeSource([tree.snapshot()]));
 * wss.on('connection', (ws) => server.handleConnection(wsConnection(ws)));
 * ```
 */
export class SyncServer {
  readonly source: TreeSource;
  readonly stats: SyncServerStats = {
    connections: 0,
    refused: 0,
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
  readonly idleTimeoutMs: number;
  readonly maxInFlight: number;
  readonly hook: ServerHook | undefined;
  readonly #log: (message: string) => void;
  readonly #sessions = new Set<Session>();
  /** @internal Output buffers of response frames, shared by every connection (`./frame-pool.ts`). */
  readonly frames = new FramePool();
  #closed = false;

  constructor(source: TreeSource, opts: SyncServerOptions = {}) {
    this.source = source;
    this.maxConnections = opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.maxInFlight = opts.maxInFlight ?? MAX_IN_FLIGHT_PER_CONNECTION;
    this.hook = opts.hook;
    this.#log = opts.log ?? (() => {});
  }

  /** Connections currently served. */
  get connectionCount(): number {
    return this.#sessions.size;
  }

  /** Whether a new connection would be accepted now. */
  get hasRoom(): boolean {
    return !this.#closed && this.#sessions.size < this.maxConnections;
  }

  /**
   * Starts serving `conn`. Returns false (and aborts `conn`) when the server
   * is closed or `maxConnections` are already open.
   */
  handleConnection(conn: ByteConnection): boolean {
    if (!this.hasRoom) {
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
   * came from. Never throws.
   */
  answer(req: Request): Answer {
    try {
      if (req.kind === Kind.Roots) {
        const roots = this.source.trees().map((t) => ({ root: t.root, version: t.version, chunks: t.chunkCount }));
        return { status: Status.Ok, payload: encodeRootsPayload(roots) };
      }
      const tree = this.source.lookup(req.root);
      if (tree === undefined) return { status: Status.UnknownRoot };
      let payload: Uint8Array;
      switch (req.kind) {
        case Kind.Chunk:
          if (req.index >= tree.chunkCount) return { status: Status.OutOfRange };
          payload = tree.exportChunk(req.index);
          break;
        case Kind.Proof: {
          const value = tree.get(req.key);
          payload =
            value === undefined
              ? encodeProofPayload({ present: false, proof: tree.proveAbsence(req.key) })
              : encodeProofPayload({ present: true, value, proof: tree.proveExistence(req.key) });
          break;
        }
        case Kind.Range:
          payload = tree.proveRange(req.start, req.end, req.limit);
          break;
      }
      // The header is at most 11 bytes (version, kind, 8-byte id, status).
      // A RANGE with a big limit can exceed the response limit: the request
      // broke a limit, so BAD_REQUEST.
      if (payload.length + 11 > MAX_RESPONSE_BYTES) return { status: Status.BadRequest };
      return { status: Status.Ok, payload, tree };
    } catch (e) {
      const code = (e as { code?: unknown } | null)?.code;
      if (typeof code === 'string' && SIZE_LIMITED_CODES.has(code)) return { status: Status.BadRequest };
      if (code === 'CHUNK_OUT_OF_RANGE') return { status: Status.OutOfRange };
      this.stats.internalErrors++;
      this.log(`internal error answering kind ${req.kind}: ${e instanceof Error ? e.message : String(e)}`);
      return { status: Status.Busy };
    }
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
  #idle: NodeJS.Timeout | undefined;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(server: SyncServer, conn: ByteConnection) {
    this.#server = server;
    this.#conn = conn;
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
    let bodies: Uint8Array[];
    try {
      bodies = this.#decoder.push(data);
    } catch (e) {
      if (e instanceof WireError) return this.#fault(e.code);
      throw e;
    }
    for (const body of bodies) {
      this.#onRequest(body);
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
  }

  #schedule(): void {
    if (this.#scheduled || this.#closed || this.#waitingDrain || this.#head >= this.#queue.length) return;
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
      const req = this.#queue[this.#head++]!;
      n++;
      this.#respond(req);
      this.#checkBackpressure();
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
    const honest: Answer = req.request === undefined ? { status: Status.BadRequest } : this.#server.answer(req.request);
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
