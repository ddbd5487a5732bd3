// Test clients for the serving peer: a raw WebSocket client and a raw libp2p
// client (a second libp2p node dialling the peer's multiaddr), both speaking
// spec/wire.md through @bpavl/light-client/wire, plus an in-memory
// ByteConnection for unit tests of SyncServer, and the `bpavl` CLI as a child
// process. Every wait is bounded.

import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import {
  decodeResponse,
  encodeFrame,
  encodeRequest,
  FrameDecoder,
  MAX_RESPONSE_BYTES,
  PROTOCOL_ID,
  type Request,
  type Response,
  WireError,
} from '@bpavl/light-client/wire';
import { init, Tree } from '@bpavl/wasm';
import type { Stream } from '@libp2p/interface';
import { webSockets } from '@libp2p/websockets';
import { multiaddr } from '@multiformats/multiaddr';
import { createLibp2p, type Libp2p } from 'libp2p';
import { WebSocket } from 'ws';
import type { ByteConnection, ConnectionEvents } from '../src/connection.ts';
import type { ServedTree } from '../src/source.ts';
import { workloadEntry } from '../src/workload.ts';

/** A request without its id (the client picks ids). */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;
export type RequestBody = WithoutId<Request>;

/** The raw byte pipe a test client runs over. */
export interface RawPipe {
  send(bytes: Uint8Array): void;
  close(): void;
}

/**
 * A spec/wire.md client over any byte pipe: numbers requests, decodes
 * response frames with FrameDecoder(MAX_RESPONSE_BYTES), and records what
 * went wrong instead of throwing (tests assert on it).
 */
export class WireClient {
  readonly decoder = new FrameDecoder(MAX_RESPONSE_BYTES);
  readonly responses: Response[] = [];
  /** The first framing/decoding error, if any (e.g. FRAME_TOO_LARGE). */
  error: WireError | undefined;
  closed = false;
  readonly #waiters = new Map<number, (r: Response) => void>();
  readonly #closeWaiters: (() => void)[] = [];
  #nextId = 1;
  pipe!: RawPipe;

  /** Feed bytes received from the peer. */
  onBytes(bytes: Uint8Array): void {
    if (this.error) return;
    let bodies: Uint8Array[];
    try {
      bodies = this.decoder.push(bytes);
    } catch (e) {
      if (e instanceof WireError) {
        this.error = e;
        return;
      }
      throw e;
    }
    for (const body of bodies) {
      let r: Response;
      try {
        r = decodeResponse(body);
      } catch (e) {
        if (e instanceof WireError) {
          this.error ??= e;
          continue;
        }
        throw e;
      }
      this.responses.push(r);
      const w = this.#waiters.get(r.id);
      if (w) {
        this.#waiters.delete(r.id);
        w(r);
      }
    }
  }

  onClose(): void {
    this.closed = true;
    for (const w of this.#closeWaiters.splice(0)) w();
  }

  /** Encodes a request with a fresh id (or the given one) and sends it; returns the id. */
  send(req: RequestBody, id = this.#nextId++): number {
    this.pipe.send(encodeFrame(encodeRequest({ ...req, id } as Request)));
    return id;
  }

  /** The frame bytes of a request (for batching several frames into one message). */
  frame(req: RequestBody, id = this.#nextId++): Uint8Array {
    return encodeFrame(encodeRequest({ ...req, id } as Request));
  }

  /** Resolves with the response to `id`, or rejects after `ms`. */
  response(id: number, ms = 5000): Promise<Response> {
    const got = this.responses.find((r) => r.id === id);
    if (got) return Promise.resolve(got);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.#waiters.delete(id);
        reject(new Error(`no response to ${id} within ${ms} ms`));
      }, ms);
      this.#waiters.set(id, (r) => {
        clearTimeout(t);
        resolve(r);
      });
    });
  }

  /** Sends and waits for the answer. */
  async request(req: RequestBody, ms = 5000): Promise<Response> {
    return this.response(this.send(req), ms);
  }

  /** Resolves true once closed, false after `ms`. */
  waitClosed(ms: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), ms);
      this.#closeWaiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }

  /** Resolves once `n` responses arrived (true), or false after `ms`. */
  async waitResponses(n: number, ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while (this.responses.length < n && Date.now() < until && !this.closed) await sleep(10);
    return this.responses.length >= n;
  }

  close(): void {
    this.pipe.close();
  }
}

/** A raw `ws` client connected to `url`. */
export async function wsClient(url: string): Promise<WireClient & { ws: WebSocket }> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  ws.binaryType = 'nodebuffer';
  const client = new WireClient() as WireClient & { ws: WebSocket };
  client.ws = ws;
  client.pipe = {
    send: (b) => ws.send(b),
    close: () => ws.terminate(),
  };
  ws.on('message', (data) => client.onBytes(data as Buffer));
  ws.on('close', () => client.onClose());
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('ws connect timeout')), 5000);
    ws.once('open', () => {
      clearTimeout(t);
      resolve();
    });
    ws.once('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
  });
  return client;
}

/** A dialling libp2p node (no listen addresses). */
export function libp2pDialer(): Promise<Libp2p> {
  return createLibp2p({
    transports: [webSockets()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
  });
}

/** A client on a fresh `/bpavl/sync/1.0.0` stream from `node` to `addr`. */
export async function libp2pClient(node: Libp2p, addr: string): Promise<WireClient & { stream: Stream }> {
  const stream = await node.dialProtocol(multiaddr(addr), PROTOCOL_ID, { signal: AbortSignal.timeout(5000) });
  const client = new WireClient() as WireClient & { stream: Stream };
  client.stream = stream;
  client.pipe = {
    send: (b) => {
      stream.send(b);
    },
    close: () => stream.abort(new Error('test closed')),
  };
  stream.addEventListener('message', (e) => client.onBytes(e.data instanceof Uint8Array ? e.data : e.data.subarray()));
  stream.addEventListener('close', () => client.onClose());
  stream.addEventListener('remoteCloseWrite', () => client.onClose());
  return client;
}

/**
 * An in-memory ByteConnection whose output backpressure the test controls:
 * `sent` collects output, `flushed` is how much of it counts as written.
 */
export class MemoryConnection implements ByteConnection {
  readonly label = 'memory';
  events!: ConnectionEvents;
  readonly sent: Uint8Array[] = [];
  sentBytes = 0;
  flushed = 0;
  /** When false, output is never flushed on its own (the remote does not read). */
  autoFlush = true;
  paused = false;
  closed = false;
  aborted = false;
  readonly client = new WireClient();

  constructor() {
    this.client.pipe = { send: (b) => this.events.bytes(b), close: () => this.abort() };
  }

  attach(events: ConnectionEvents): void {
    this.events = events;
  }
  send(bytes: Uint8Array): void {
    if (this.closed) return;
    this.sent.push(bytes);
    this.sentBytes += bytes.length;
    this.client.onBytes(bytes);
    if (this.autoFlush) this.flush();
  }
  /** Marks all output written and reports a drain. */
  flush(): void {
    this.flushed = this.sentBytes;
    if (!this.closed) this.events.drain();
  }
  get bufferedAmount(): number {
    return this.sentBytes - this.flushed;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  close(): void {
    this.closed = true;
    this.client.onClose();
    this.events.closed();
  }
  abort(): void {
    this.aborted = true;
    this.close();
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let ready: Promise<void> | undefined;
/** `init()` of @bpavl/wasm, once. */
export function wasmReady(): Promise<void> {
  ready ??= init();
  return ready;
}

/** A committed workload tree (see src/workload.ts) and its entries. */
export function smallTree(entries: number, capacity: number, seed = 7n): { tree: Tree; keys: Uint8Array[]; values: Uint8Array[] } {
  const tree = new Tree(capacity);
  const keys: Uint8Array[] = [];
  const values: Uint8Array[] = [];
  for (let i = 0; i < entries; i++) {
    const [k, v] = workloadEntry(seed, i);
    tree.insert(k, v);
    keys.push(k);
    values.push(v);
  }
  tree.commit();
  return { tree, keys, values };
}

/**
 * A committed tree of 200 entries with 64 KiB values (about 13 MB): a RANGE
 * over it exceeds the 8 MiB response limit. Keys are `[tag, i]`.
 */
export function bigValueTree(tag: number): Tree {
  const tree = new Tree(64);
  const value = new Uint8Array(65536).fill(tag);
  for (let i = 0; i < 200; i++) tree.insert(Uint8Array.of(tag, i), value);
  tree.commit();
  return tree;
}

/** Bytewise compare, as the tree orders keys. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The `bpavl` CLI's entry. */
export const BIN = fileURLToPath(new URL('../bin/bpavl.mjs', import.meta.url));

/**
 * Runs `bpavl …args` (or another CLI entry, `bin`) as a child process.
 * `done` resolves with its exit code and output when it exits, or rejects
 * (after SIGKILL) when it takes longer than `ms`; `stdout()` is the output so far.
 */
export function spawnCli(args: string[], stdin: 'ignore' | 'pipe' = 'ignore', ms = 30_000, bin = BIN) {
  const child: ChildProcess = spawn(process.execPath, [bin, ...args], { stdio: [stdin, 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bpavl ${args.join(' ')} did not finish in ${ms} ms`));
    }, ms);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
  return { child, done, stdout: () => stdout };
}

/** `bpavl ARGS --json`: the exit code, the parsed last line of stdout, and stderr. */
export async function cliJson(args: string[]): Promise<{ code: number | null; out: Record<string, any>; stderr: string }> {
  const { code, stdout, stderr } = await spawnCli([...args, '--json'], 'ignore', 60_000).done;
  return { code, out: JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null'), stderr };
}

/** `tree` as a peer that predates catch-up serves it: no subtrees, leaves or entries (those kinds are answered `BAD_REQUEST`). */
export function withoutCatchUp(tree: ServedTree): ServedTree {
  return {
    root: tree.root,
    version: tree.version,
    chunkCount: tree.chunkCount,
    exportChunk: (i) => tree.exportChunk(i),
    get: (k) => tree.get(k),
    proveExistence: (k) => tree.proveExistence(k),
    proveAbsence: (k) => tree.proveAbsence(k),
    proveRange: (a, b, l) => tree.proveRange(a, b, l),
    proveMulti: (k, m) => tree.proveMulti(k, m),
  };
}
