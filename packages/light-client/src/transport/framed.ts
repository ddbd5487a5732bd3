/**
 * Request/response over any byte pipe: ids, pipelining, timeouts and the
 * client-side checks of `spec/wire.md` ("What the client checks"). Each
 * transport only moves bytes; this class does the rest once for all.
 * @module
 */

import { MAX_RESPONSE_BYTES } from '../wire/constants.js';
import { WireError } from '../wire/errors.js';
import { encodeFrame, FrameDecoder } from '../wire/frame.js';
import { decodeResponse, encodeRequest, type Request, type Response } from '../wire/messages.js';
import { type PeerConnection, type RequestBody, TransportError } from './types.js';

/** Moves bytes to the peer. */
export interface BytePipe {
  send(bytes: Uint8Array): void;
  close(): void;
}

/**
 * Most bytes of requests sent in one piece; a bigger batch is split. Well
 * under what a peer accepts in one WebSocket message (64 maximal requests).
 */
const MAX_BATCH_BYTES = 64 * 1024;

/**
 * Ids of requests that timed out, remembered so that their late answers are
 * told from duplicates; the oldest are forgotten past this many (a late
 * answer to a forgotten one then counts as unexpected).
 */
const MAX_TIMED_OUT_IDS = 4096;

interface Pending {
  kind: number;
  resolve: (r: Response) => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * A {@link PeerConnection} over a {@link BytePipe}. The transport calls
 * {@link receive} with incoming bytes and {@link fail} when the pipe ends.
 */
export class FramedConnection implements PeerConnection {
  readonly address: string;
  private readonly pipe: BytePipe;
  private readonly decoder = new FrameDecoder(MAX_RESPONSE_BYTES);
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  /** Requests that timed out and whose answer may still arrive, once. */
  private readonly timedOut = new Set<number>();
  /** Request frames not sent yet (sent together at the end of the turn). */
  private outbox: Uint8Array[] = [];
  private outboxBytes = 0;
  private closedWith: Error | undefined;
  private readonly closeListeners: ((reason: Error) => void)[] = [];

  constructor(address: string, pipe: BytePipe) {
    this.address = address;
    this.pipe = pipe;
  }

  get isClosed(): boolean {
    return this.closedWith !== undefined;
  }

  request(req: RequestBody, opts: { timeoutMs: number }): Promise<Response> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = this.nextId++;
    return new Promise<Response>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.timedOut.add(id);
        if (this.timedOut.size > MAX_TIMED_OUT_IDS) this.timedOut.delete(this.timedOut.values().next().value!);
        reject(new TransportError('TIMEOUT', `no answer from ${this.address} in ${opts.timeoutMs} ms`));
      }, opts.timeoutMs);
      this.pending.set(id, { kind: req.kind, resolve, reject, timer });
      const frame = encodeFrame(encodeRequest({ ...req, id } as Request));
      if (this.outboxBytes + frame.length > MAX_BATCH_BYTES) this.flush();
      this.outbox.push(frame);
      this.outboxBytes += frame.length;
      if (this.outbox.length === 1) queueMicrotask(this.flush);
    });
  }

  /**
   * Sends the requests made since the last flush, in one piece: requests
   * made in one turn (a pump after a response) cost one message and one
   * write, not one each (`spec/wire.md`: a message carries whole frames).
   */
  private readonly flush = (): void => {
    const frames = this.outbox;
    const total = this.outboxBytes;
    this.outbox = [];
    this.outboxBytes = 0;
    if (this.closedWith || frames.length === 0) return;
    let bytes = frames[0]!;
    if (frames.length > 1) {
      bytes = new Uint8Array(total);
      let at = 0;
      for (const f of frames) {
        bytes.set(f, at);
        at += f.length;
      }
    }
    try {
      this.pipe.send(bytes);
    } catch {
      this.fail(new TransportError('CONNECTION_CLOSED', `cannot send to ${this.address}`));
    }
  };

  /** Incoming bytes from the transport. */
  receive(bytes: Uint8Array): void {
    if (this.closedWith) return;
    try {
      for (const body of this.decoder.frames(bytes)) {
        const res = decodeResponse(body);
        const p = this.pending.get(res.id);
        if (!p) {
          // A late answer to a request that timed out is harmless, once; a
          // second answer to a request, or an answer to one never sent, is a
          // protocol fault (`spec/wire.md`, "What the client checks").
          if (this.timedOut.delete(res.id)) continue;
          if (res.id < this.nextId) throw new WireError('RESPONSE_DUPLICATE', `second response to request ${res.id}`);
          throw new WireError('MESSAGE_MALFORMED', `response to unknown request ${res.id}`);
        }
        if (p.kind !== res.kind) throw new WireError('MESSAGE_MALFORMED', 'response kind differs from request');
        this.pending.delete(res.id);
        clearTimeout(p.timer);
        p.resolve(res);
      }
    } catch (e) {
      this.fail(e instanceof Error ? e : new WireError('MESSAGE_MALFORMED'));
    }
  }

  onClose(listener: (reason: Error) => void): void {
    if (this.closedWith) listener(this.closedWith);
    else this.closeListeners.push(listener);
  }

  /** Ends the connection: every pending request rejects with `err`. */
  fail(err: Error): void {
    if (this.closedWith) return;
    this.closedWith = err;
    for (const listener of this.closeListeners.splice(0)) listener(err);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    this.timedOut.clear();
    try {
      this.pipe.close();
    } catch {
      // already closed
    }
  }

  close(): void {
    this.fail(new TransportError('CONNECTION_CLOSED', `closed ${this.address}`));
  }
}
