// Shared pieces of the state-sync integration suites (tests/sync/*.test.ts):
// source trees, real serving peers (packages/peer `startPeer`, in-process,
// 127.0.0.1 only), a *recording* `connect` that wraps the default transport
// (`connectAuto`: WebSocket for ws:// URLs, libp2p for multiaddrs) and checks
// every chunk answer independently (byte equality with the source's envelope
// and the pure-TS verifier's code), and the checks every finished sync must
// pass. Every wait is bounded.

import { init, type Snapshot, type Tree } from '@bpavl/wasm';
import { expect } from 'vitest';
import { verifyChunk as tsVerifyChunk } from '../../packages/light-client/src/verify.js';
import {
  connectAuto,
  type PeerConnection,
  type SyncEvent,
  type SyncOptions,
  type SyncResult,
  syncState,
} from '../../packages/light-client/src/sync/index.js';
import { Kind, Status } from '../../packages/light-client/src/wire/constants.js';
import { stopLibp2pClient } from '../../packages/light-client/src/transport/libp2p.js';
import { Byzantine, type ByzantineMode } from '../../packages/testnet/src/byzantine.ts';
import type { PeerOptions, RunningPeer } from '../../packages/peer/src/peer.ts';
import { startPeer } from '../../packages/testnet/src/peer.ts';
import { StaticTreeSource } from '../../packages/peer/src/source.ts';
import { buildWorkloadTree, workloadEntry } from '../../packages/peer/src/workload.ts';
import { PROOF_CODES } from '../support.js';

export { stopLibp2pClient };

await init();

// ---------------------------------------------------------------- source trees

export const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.length).toString('hex');
const same = (a: Uint8Array, b: Uint8Array): boolean =>
  a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length)) === 0;

/** A committed workload tree (packages/peer/src/workload.ts), its snapshot and every honest envelope. */
export interface Source {
  tree: Tree;
  snapshot: Snapshot;
  root: Uint8Array;
  entryCount: number;
  capacity: number;
  chunkCount: number;
  /** The honest envelope of every chunk, by index. */
  envelopes: Uint8Array[];
  seed: bigint;
}

export function buildSource(entryCount: number, capacity: number, seed: bigint): Source {
  const tree = buildWorkloadTree({ entryCount, seed }, capacity);
  const snapshot = tree.head();
  const envelopes = Array.from({ length: tree.chunkCount }, (_, i) => snapshot.exportChunk(i));
  return { tree, snapshot, root: tree.head().root, entryCount, capacity, chunkCount: tree.chunkCount, envelopes, seed };
}

/** The suites' tree: 3,000 entries of 512-byte values at capacity 16 (a couple of hundred chunks). */
export const ENTRIES = 3000;
export const CAPACITY = 16;
let shared: { source: Source; other: Source } | undefined;
/** The tree every suite syncs, and a same-sized tree of another seed (what `wrong-root` answers from). */
export function sources(): { source: Source; other: Source } {
  shared ??= { source: buildSource(ENTRIES, CAPACITY, 11n), other: buildSource(ENTRIES, CAPACITY, 12n) };
  return shared;
}

// ---------------------------------------------------------------- serving peers

export type Transport = 'ws' | 'libp2p';

export interface LiarSpec {
  mode: ByzantineMode;
  rate?: number;
  slowMs?: number;
}

/** A running peer (both listeners) and how this suite dials it. */
export interface Served {
  peer: RunningPeer;
  transport: Transport;
  /** The address given to `syncState`. */
  address: string;
  liar?: LiarSpec;
}

const running = new Set<RunningPeer>();

/** Starts a real peer serving `source` (honest, or lying per `liar`) on 127.0.0.1. */
export async function serve(transport: Transport, liar?: LiarSpec, seed = 1n, opts: PeerOptions = {}): Promise<Served> {
  const { source, other } = sources();
  const byzantine =
    liar &&
    new Byzantine({ mode: liar.mode, rate: liar.rate ?? 1, seed, slowMs: liar.slowMs ?? 1500, otherTree: other.snapshot });
  const peer = await startPeer(new StaticTreeSource([source.snapshot]), { ...opts, ...(byzantine ? { byzantine } : {}) });
  running.add(peer);
  return { peer, transport, address: addressOf(peer, transport), ...(liar ? { liar } : {}) };
}

export function addressOf(peer: RunningPeer, transport: Transport): string {
  const a = transport === 'ws' ? peer.wsUrl : peer.libp2pAddrs.find((m) => m.startsWith('/ip4/127.0.0.1/'));
  if (!a) throw new Error(`peer has no ${transport} address`);
  return a;
}

/** Stops one peer (idempotent). */
export async function kill(s: Served | RunningPeer): Promise<void> {
  const peer = 'peer' in s ? s.peer : s;
  await peer.close();
  running.delete(peer);
}

/** Stops every peer started here and the shared libp2p dialler. */
export async function closeAll(): Promise<void> {
  await Promise.allSettled([...running].map((p) => p.close()));
  running.clear();
  await stopLibp2pClient();
}

// ---------------------------------------------------------------- recording connect

/** One CHUNK request as the client saw it, checked independently of the engine. */
export interface Exchange {
  peer: string;
  /** The chunk asked for; -1: no request, a protocol fault that closed the connection. */
  index: number;
  outcome: 'ok' | 'status' | 'wire-error' | 'transport-error' | 'pending';
  /** OK: the payload is byte-identical to the source's envelope of `index`. */
  valid?: boolean;
  /** OK and invalid: the pure-TS verifier's code; wire-error: the WireError's code; status: the status. */
  code?: string;
  /** The answer arrived while the session was still going (so the engine must act on it). */
  processed?: boolean;
}

export interface Recorder {
  connect: NonNullable<SyncOptions['connect']>;
  exchanges: Exchange[];
  /** Set by `runSync` when the session ends (done event, or the promise settles). */
  over: boolean;
  /** Inconsistencies between what a peer sent and what the engine did about it. */
  problems: string[];
  /** Connections opened, by address. */
  opened: Map<string, number>;
  /** The engine's events so far (shared with `runSync`). */
  events: SyncEvent[];
}

function tsCode(root: Uint8Array, index: number, payload: Uint8Array): string | undefined {
  try {
    tsVerifyChunk(root, index, payload);
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code ?? `untyped ${String(e)}`;
  }
}

/**
 * A `connect` that opens the real transport (`connectAuto`) and watches every
 * CHUNK request: the answer is classified before the engine sees it, and,
 * right after the engine's own handler ran, what the engine did is compared
 * with what it should have done (an invalid chunk: a `chunk-rejected` event
 * with the verifier's code and the peer banned; a wire fault: the peer banned
 * with that code).
 */
export function recorder(source: Source, barrier = 0, gate?: (address: string, conn: PeerConnection) => Promise<void> | undefined): Recorder {
  const rec: Recorder = { connect: undefined!, exchanges: [], over: false, problems: [], opened: new Map(), events: [] };
  // Optionally hold the first `barrier` connections until all of them are open
  // (at most 5 s), so that every peer, whatever its transport's handshake
  // time, gets its share of the first requests: on a 2-core machine a sync
  // of a few hundred chunks can otherwise finish before a libp2p dial does.
  let firsts = 0;
  const tried = new Set<string>();
  let release!: () => void;
  const allOpen = new Promise<void>((r) => {
    release = r;
  });
  if (barrier > 0) setTimeout(release, 5000).unref();
  rec.connect = async (address, signal, opts) => {
    const first = !tried.has(address);
    tried.add(address);
    let inner: PeerConnection;
    try {
      inner = await connectAuto(address, signal, opts);
    } finally {
      if (first && ++firsts >= barrier) release();
    }
    // A protocol fault with no request pending (a duplicate response) closes
    // the connection without failing a request: record it as well (index -1).
    inner.onClose((reason) => {
      if (reason.name !== 'WireError') return;
      rec.exchanges.push({ peer: address, index: -1, outcome: 'wire-error', code: (reason as { code?: string }).code, processed: !rec.over });
    });
    rec.opened.set(address, (rec.opened.get(address) ?? 0) + 1);
    if (first && barrier > 0) await allOpen;
    if (first) await gate?.(address, inner);
    const wrapped: PeerConnection = {
      address: inner.address,
      get isClosed() {
        return inner.isClosed;
      },
      close: () => inner.close(),
      onClose: (listener) => inner.onClose(listener),
      request(req, opts) {
        const p = inner.request(req, opts);
        if (req.kind !== Kind.Chunk) return p;
        const x: Exchange = { peer: address, index: req.index, outcome: 'pending' };
        rec.exchanges.push(x);
        /** How many events there were just before the engine's handler for this answer ran. */
        let mark = 0;
        // Registered before the engine's handler: classify the answer.
        p.then(
          (res) => {
            x.processed = !rec.over;
            mark = rec.events.length;
            if (res.status !== Status.Ok) {
              x.outcome = 'status';
              x.code = `status ${res.status}`;
              return;
            }
            x.outcome = 'ok';
            x.valid = req.index < source.chunkCount && same(res.payload, source.envelopes[req.index]!);
            if (!x.valid) x.code = tsCode(source.root, req.index, res.payload) ?? 'VERIFIED-BUT-NOT-IDENTICAL';
          },
          (err: unknown) => {
            x.processed = !rec.over;
            mark = rec.events.length;
            const name = (err as Error)?.name;
            x.outcome = name === 'WireError' ? 'wire-error' : 'transport-error';
            x.code = (err as { code?: string }).code ?? String(err);
          },
        );
        // Registered after the engine's handler (which `fetch` attaches
        // synchronously once `request` returns): check what it did.
        queueMicrotask(() => {
          const after = () => {
            if (!x.processed) return;
            // What the engine emitted while handling this answer.
            const since = rec.events.slice(mark);
            const rejected = since.filter((e) => e.type === 'chunk-rejected');
            if (x.outcome === 'ok' && !x.valid) {
              const r = rejected[0];
              if (rejected.length !== 1 || r?.peer !== address || r.index !== req.index)
                rec.problems.push(`invalid chunk ${req.index} from ${address}: no (single) chunk-rejected event for it`);
              else if (r.code !== x.code)
                rec.problems.push(`chunk ${req.index} from ${address}: engine code ${r.code}, TS verifier ${x.code}`);
              if (since.some((e) => e.type === 'chunk-verified'))
                rec.problems.push(`invalid chunk ${req.index} from ${address}: a chunk-verified event followed it`);
            } else if (rejected.length > 0) {
              rec.problems.push(`${x.outcome} answer for chunk ${req.index} from ${address} was rejected (${rejected.map((e) => e.code)})`);
            }
            if ((x.outcome === 'ok' && !x.valid) || x.outcome === 'wire-error') {
              const banned = rec.events.some((e) => e.type === 'peer-banned' && e.peer === address);
              if (!banned) rec.problems.push(`${address} sent ${x.code} for chunk ${req.index} and is not banned`);
            }
          };
          p.then(after, after);
        });
        return p;
      },
    };
    return wrapped;
  };
  return rec;
}

// ---------------------------------------------------------------- running a sync

export interface Run {
  res?: SyncResult;
  err?: unknown;
  events: SyncEvent[];
  rec: Recorder;
  /** Wall time of the `syncState` call, ms. */
  ms: number;
}

export type RunOptions = Partial<Omit<SyncOptions, 'onEvent'>> & {
  peers: readonly string[];
  onEvent?: (e: SyncEvent, run: Run) => void;
  /** Hold the first connections until this many are open (see `recorder`). */
  barrier?: number;
  /** Holds the first connection to an address (already open) until the promise settles: a handshake that ends late. */
  gate?: (address: string, conn: PeerConnection) => Promise<void> | undefined;
  /** The engine under test (default: the light-client's `syncState`). */
  engine?: typeof syncState;
  /** Every sync is bounded: after this many ms (default 20,000) it is aborted with a `BoundExceeded` error. */
  boundMs?: number;
};

/** The reason a sync that ran past its bound was aborted with. */
export class BoundExceeded extends Error {
  constructor(ms: number) {
    super(`the sync neither finished nor failed within ${ms} ms (aborted by the test)`);
    this.name = 'BoundExceeded';
  }
}

/** Runs `syncState` against the suite's tree through a recorder; never throws. */
export async function runSync(opts: RunOptions): Promise<Run> {
  const { source } = sources();
  const { barrier, gate, onEvent, boundMs = 20_000, signal, engine = syncState, ...rest } = opts;
  const rec = recorder(source, barrier, gate);
  const run: Run = { events: rec.events, rec, ms: 0 };
  const bound = new AbortController();
  const timer = setTimeout(() => bound.abort(new BoundExceeded(boundMs)), boundMs);
  const t0 = performance.now();
  try {
    run.res = await engine({
      root: source.root,
      connect: rec.connect,
      requestTimeoutMs: 600,
      ...rest,
      signal: signal ? AbortSignal.any([signal, bound.signal]) : bound.signal,
      onEvent: (e) => {
        rec.events.push(e);
        if (e.type === 'done') rec.over = true;
        onEvent?.(e, run);
      },
    });
  } catch (e) {
    run.err = e;
  }
  clearTimeout(timer);
  rec.over = true;
  run.ms = performance.now() - t0;
  return run;
}

/** The rebuilt tree is the source tree: root, size, every key's value, every chunk's envelope. */
export function expectSameTree(res: SyncResult, source: Source = sources().source): void {
  expect(hex(res.root)).toBe(hex(source.root));
  expect(hex(res.tree.head().root)).toBe(hex(source.root));
  expect(res.tree.len).toBe(source.entryCount);
  expect(res.tree.chunkCount).toBe(source.chunkCount);
  expect(res.chunkCount).toBe(source.chunkCount);
  let wrong = 0;
  for (let i = 0; i < source.entryCount; i++) {
    const [k, v] = workloadEntry(source.seed, i);
    const got = res.tree.get(k);
    if (got === undefined || !same(got, v)) wrong++;
  }
  expect(wrong, 'keys whose value differs from the source').toBe(0);
  let differing = 0;
  for (let i = 0; i < source.chunkCount; i++) if (!same(res.tree.head().exportChunk(i), source.envelopes[i]!)) differing++;
  expect(differing, 'chunks whose envelope differs from the source').toBe(0);
}

/**
 * What every finished sync must show: the exact tree; every chunk verified
 * exactly once, each from a peer whose answer for it was byte-identical to
 * the source; the result's counters equal to the events; and the recorder
 * found no invalid answer the engine let through or failed to punish.
 */
export function expectCleanSync(run: Run): SyncResult {
  if (run.err !== undefined) throw run.err;
  const res = run.res!;
  const { source } = sources();
  expectSameTree(res, source);
  const verified = run.events.filter((e) => e.type === 'chunk-verified');
  expect(verified).toHaveLength(source.chunkCount);
  expect(new Set(verified.map((e) => e.index)).size).toBe(source.chunkCount);
  const validFrom = new Set(run.rec.exchanges.filter((x) => x.outcome === 'ok' && x.valid).map((x) => `${x.peer} ${x.index}`));
  const unbacked = verified.filter((e) => !validFrom.has(`${e.peer} ${e.index}`));
  expect(unbacked, 'chunk-verified events without a byte-identical answer behind them').toEqual([]);
  expect(run.rec.problems).toEqual([]);
  const rejected = run.events.filter((e) => e.type === 'chunk-rejected');
  expect(res.rejected).toBe(rejected.length);
  const bannedEvents = run.events.filter((e) => e.type === 'peer-banned').map((e) => ({ peer: e.peer, reason: e.reason, code: e.code }));
  expect(res.banned).toEqual(bannedEvents);
  expect(run.events.at(-1)?.type).toBe('done');
  return res;
}

/** For each peer that sent something invalid the engine acted on: the code of the first such thing. */
export function firstFaults(run: Run): Map<string, string> {
  const out = new Map<string, string>();
  for (const x of run.rec.exchanges) {
    if (!x.processed) continue;
    const bad = (x.outcome === 'ok' && !x.valid) || x.outcome === 'wire-error';
    if (bad && !out.has(x.peer)) out.set(x.peer, x.code!);
  }
  return out;
}

/** One line per sync, for the log. */
export function summary(label: string, run: Run): void {
  const r = run.res;
  const banned = r ? r.banned.length : ((run.err as { banned?: unknown[] })?.banned?.length ?? 0);
  const what = r
    ? `${r.seconds.toFixed(2)} s, ${r.chunkCount} chunks, refetches ${r.refetches}, rejected ${r.rejected}, banned ${banned}`
    : `failed after ${(run.ms / 1000).toFixed(2)} s (${(run.err as Error)?.name}: ${(run.err as { code?: string })?.code ?? (run.err as Error)?.message}), banned ${banned}`;
  console.log(`[sync] ${label}: ${what}`);
}

/** Polls `cond` every 10 ms until it holds; false after `ms`. */
export async function waitFor(cond: () => boolean, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > until) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

/** Codes a client may see from `random-bytes`: any decoding or verification code of spec/errors.md. */
export const VERIFIER_CODES = PROOF_CODES;
