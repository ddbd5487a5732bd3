/**
 * `bpavl sync`: fetches the whole state under a trusted root from any mix of
 * WebSocket and libp2p peers, verifying every chunk on arrival. On a TTY it
 * shows a live progress bar; it ends with a summary, or one JSON line. With
 * `--db` each verified chunk is written to a state directory as it arrives,
 * and the same command resumes an interrupted sync (`docs/store.md`).
 * @module
 */

import { parseArgs } from 'node:util';
import {
  addressKind,
  catchUp,
  type CatchUpEvent,
  type CatchUpResult,
  closeTransports,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_STALL_TIMEOUT_MS,
  MAX_TIMER_MS,
  SyncError,
  type SyncEvent,
  type SyncFigures,
  syncState,
} from '@bpavl/light-client/sync';
import { openState, type State } from '@bpavl/store';
import { removeSortDirs } from '@bpavl/store/sort';
import cliProgress from 'cli-progress';
import { interruptible } from './interrupt.ts';
import { fromHex, toHex } from './source.ts';

export const SYNC_USAGE = `bpavl sync --root HEX --peer ADDRESS [--peer ADDRESS …] [options]

Syncs the state whose root is HEX (the only thing trusted) from the peers:
ws://host:port URLs and libp2p multiaddrs (/ip4/…/tcp/…/ws/p2p/…), mixed
freely. Every chunk is verified on arrival; a peer that sends a bad one is
banned and the chunk is fetched elsewhere. Ctrl-C (SIGINT) or SIGTERM stops
cleanly; a second one exits at once (what is stored stays: the same command
resumes).

  --root HEX           the trusted root (64 hex digits)
  --peer ADDRESS       a peer; repeat for more
  --timeout MS         per-request deadline (default 10000)
  --connect-timeout MS deadline of one connection attempt, handshakes included (default 5000)
  --stall-timeout MS   give up on a peer that sends no valid chunk for MS while it only
                       answers BUSY, times out or cannot connect (default 20000; spec/wire.md)
  --db DIR             write the state into the state directory DIR (made if absent) as it
                       arrives; run the same command again to resume an interrupted sync:
                       chunks already stored are checked again, not fetched. The synced
                       state is DIR's version 1 (serve it with bpavl serve --db DIR).
                       When DIR holds an older state, it is caught up instead: only what
                       changed is fetched (docs/catchup.md), as DIR's next version; an
                       interrupted catch-up resumes the same way. If no peer serves the
                       catch-up requests, every chunk is fetched whole and only those DIR
                       lacks are stored
  --discard-unfinished with --db: first delete an unfinished sync or catch-up of another root
  --json               print one JSON line at the end instead of the summary; on failure
                       {error, message, peers: [{peer, outcome, reason, code}]}

Exit status: 0 synced, 1 failed (e.g. no honest peer left), 2 usage, 130 interrupted
by SIGINT or SIGTERM (--json: {error: "ABORTED", message, peers: []}).`;

/** Counters the progress display and the summary read. */
class Tally {
  chunkCount: number | undefined;
  done = 0;
  bytes = 0;
  rate = 0;
  rejects = 0;
  readonly banned = new Map<string, string>();
  readonly active = new Set<string>();

  on(e: SyncEvent): void {
    switch (e.type) {
      case 'progress':
        this.chunkCount = e.chunkCount;
        this.done = e.done;
        this.bytes = e.bytes;
        this.rate = e.bytesPerSecond;
        break;
      case 'chunk-rejected':
        this.rejects += 1;
        break;
      case 'peer-banned':
        this.banned.set(e.peer, e.code);
        this.active.delete(e.peer);
        break;
      case 'peer':
        if (e.status === 'active' || e.status === 'slow') this.active.add(e.peer);
        else this.active.delete(e.peer);
        break;
    }
  }

  get payload() {
    return {
      mb: (this.bytes / 1e6).toFixed(1),
      rate: (this.rate / 1e6).toFixed(1),
      active: this.active.size,
      banned: this.banned.size,
      rejects: this.rejects,
    };
  }
}

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      root: { type: 'string' },
      peer: { type: 'string', multiple: true },
      timeout: { type: 'string' },
      'connect-timeout': { type: 'string' },
      'stall-timeout': { type: 'string' },
      db: { type: 'string' },
      'discard-unfinished': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) return { help: true as const };
  if (!values.root || !/^[0-9a-fA-F]{64}$/.test(values.root)) throw new Error('--root must be 64 hex digits');
  const peers = peerFlags(values.peer);
  if (values['discard-unfinished'] && values.db === undefined) throw new Error('--discard-unfinished needs --db');
  const ms = (name: string, text: string | undefined, def: number) => {
    const v = text === undefined ? def : Number(text);
    if (!Number.isInteger(v) || v <= 0 || v > MAX_TIMER_MS) throw new Error(`--${name} must be an integer in 1 … ${MAX_TIMER_MS}`);
    return v;
  };
  return {
    help: false as const,
    root: fromHex(values.root),
    peers,
    timeout: ms('timeout', values.timeout, 10_000),
    connectTimeout: ms('connect-timeout', values['connect-timeout'], DEFAULT_CONNECT_TIMEOUT_MS),
    stallTimeout: ms('stall-timeout', values['stall-timeout'], DEFAULT_STALL_TIMEOUT_MS),
    db: values.db,
    discardUnfinished: values['discard-unfinished'],
    json: values.json,
  };
}

/** The `--peer` flags: at least one, each a `ws://` or `wss://` URL or a multiaddr (a usage error otherwise, before anything is dialed). */
export function peerFlags(peers: string[] | undefined): string[] {
  if (!peers?.length) throw new Error('give at least one --peer');
  const odd = peers.find((p) => addressKind(p) === undefined);
  if (odd !== undefined) throw new Error(`--peer ${odd}: give a ws://host:port (or wss://) URL or a libp2p multiaddr`);
  return peers;
}

/**
 * `bpavl sync --db DIR` on a store that holds a state: catches it up to the
 * root and says how much it fetched (`catchUp`, docs/catchup.md).
 */
async function runCatchUp(
  state: State,
  opts: { root: Uint8Array; peers: string[]; timeout: number; connectTimeout: number; stallTimeout: number; json: boolean; db?: string | undefined },
  signal: AbortSignal,
  tty: boolean,
): Promise<number> {
  const from = state.head()!;
  /** On a TTY, the fallback's progress (a whole-chunk sync is long): chunks in, of the tree's. */
  let bar: cliProgress.SingleBar | undefined;
  const onEvent = (e: CatchUpEvent) => {
    if (opts.json) return;
    if (e.type === 'banned') process.stderr.write(`banned ${e.peer}: ${e.reason} (${e.code})\n`);
    if (e.type === 'whole-chunks') {
      process.stderr.write(
        e.resumed
          ? 'resuming a catch-up that fetches every chunk whole\n'
          : 'no peer serves the catch-up requests (they predate them): fetching every chunk whole, storing only what changed\n',
      );
      if (tty) {
        bar = new cliProgress.SingleBar({ format: '{bar} {percentage}% | {value}/{total} chunks | {mb} MB', hideCursor: true, stream: process.stderr }, cliProgress.Presets.shades_classic);
        bar.start(1, 0, { mb: '0.0' });
      }
    }
    if (e.type === 'progress' && bar !== undefined && e.wholeChunks !== undefined) {
      if (e.wholeChunks.chunkCount !== undefined) bar.setTotal(e.wholeChunks.chunkCount);
      bar.update(e.wholeChunks.done, { mb: (e.bytes / 1e6).toFixed(1) });
    }
  };
  let r: CatchUpResult;
  try {
    r = await catchUp({
      store: state,
      root: opts.root,
      peers: opts.peers,
      signal,
      requestTimeoutMs: opts.timeout,
      connectTimeoutMs: opts.connectTimeout,
      stallTimeoutMs: opts.stallTimeout,
      onEvent,
    });
  } finally {
    bar?.stop();
  }
  const head = state.head()!;
  const summary = {
    root: toHex(r.root),
    db: opts.db,
    caughtUpFrom: r.fromVersion,
    version: r.version,
    chunkCount: head.chunkCount,
    entryCount: head.entryCount,
    changedChunks: r.changedChunks,
    restoredChunks: r.restoredChunks,
    fetchedChunks: r.fetchedChunks,
    seconds: Number(r.seconds.toFixed(3)),
    bytes: r.bytes,
    writtenBytes: r.writtenBytes,
    requests: r.requests,
    wholeChunks: r.wholeChunks,
    banned: r.banned,
  };
  if (opts.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else if (r.version === from.version) process.stdout.write(`root verified ${summary.root}\n${opts.db} holds it already (version ${r.version}): nothing fetched\n`);
  else {
    process.stdout.write(
      `root verified ${summary.root}\n` +
        (r.restoredChunks > 0 ? `resumed: ${r.restoredChunks.toLocaleString('en-US')} of ${(r.wholeChunks ? head.chunkCount : r.changedChunks).toLocaleString('en-US')} ${r.wholeChunks ? '' : 'changed '}chunks were stored by the interrupted run\n` : '') +
        `caught up from version ${r.fromVersion}: ${(r.bytes / 1e6).toFixed(1)} MB fetched${r.wholeChunks ? ' (every chunk whole)' : ''}, ${r.changedChunks.toLocaleString('en-US')} of ${head.chunkCount.toLocaleString('en-US')} chunks changed, in ${summary.seconds} s\n` +
        `stored in ${opts.db} as version ${r.version} (${head.entryCount.toLocaleString('en-US')} entries; ${(r.writtenBytes / 1e6).toFixed(1)} MB of records written, the rest shared with version ${r.fromVersion})\n` +
        `${r.banned.length} peers banned\n` +
        r.banned.map((b) => `  banned ${b.peer}: ${b.reason} (${b.code})\n`).join(''),
    );
  }
  return 0;
}

/** Runs `bpavl sync`; `usageError` wraps argument errors for the CLI. */
export async function runSync(argv: string[], usageError: (m: string) => Error): Promise<number> {
  let opts;
  try {
    opts = parse(argv);
  } catch (e) {
    throw usageError(e instanceof Error ? e.message : String(e));
  }
  if (opts.help) {
    process.stdout.write(`${SYNC_USAGE}\n`);
    return 0;
  }
  const tally = new Tally();
  const tty = process.stderr.isTTY && !opts.json;
  const bar = tty
    ? new cliProgress.SingleBar(
        {
          format:
            '{bar} {percentage}% | {value}/{total} chunks | {mb} MB at {rate} MB/s | peers {active} active, {banned} banned | {rejects} rejected',
          hideCursor: true,
          stream: process.stderr,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(1, 0, tally.payload);
  /** Whether DIR held a state, caught up rather than synced. */
  let catchingUp = false;
  let state: State | undefined;
  // SIGINT or SIGTERM stops the sync (a second one exits at once: what is stored stays, the same command resumes).
  const interrupt = interruptible(() => {
    bar?.stop();
    // The failure line's shape, with nobody to blame.
    if (opts.json) process.stdout.write(`${JSON.stringify({ error: 'ABORTED', message: 'interrupted: the same command resumes', peers: [] })}\n`);
    else if (catchingUp) process.stderr.write(`catch-up interrupted; ${opts.db} still holds its version ${state?.head()?.version}, and what was verified: the same command resumes\n`);
    else process.stderr.write(`sync interrupted${opts.db === undefined ? '' : `; what was verified is stored in ${opts.db}: the same command resumes`}\n`);
  });
  const started = performance.now();
  /** Seconds from the start of the command to its first chunk request: with --db, the time a resume takes to start. */
  let firstRequestSeconds: number | undefined;
  /** Chunks verified and handed over in this run (with --db: stored, or lost to a kill before their write). */
  let downloaded = 0;
  try {
    const common = {
      root: opts.root,
      peers: opts.peers,
      signal: interrupt.signal,
      requestTimeoutMs: opts.timeout,
      connectTimeoutMs: opts.connectTimeout,
      stallTimeoutMs: opts.stallTimeout,
      onEvent: (e: SyncEvent) => {
        tally.on(e);
        if (e.type === 'chunk-verified') downloaded++;
        if (e.type === 'request') firstRequestSeconds ??= (performance.now() - started) / 1000;
        if (e.type === 'restored' && !opts.json) {
          bar?.stop();
          process.stderr.write(`resumed: ${e.chunks.toLocaleString('en-US')} of ${e.chunkCount?.toLocaleString('en-US') ?? '?'} chunks already verified\n`);
        }
        if (bar) {
          if (tally.chunkCount !== undefined) bar.setTotal(tally.chunkCount);
          bar.update(tally.done, tally.payload);
        } else if (!opts.json && e.type === 'peer-banned') {
          process.stderr.write(`banned ${e.peer}: ${e.reason} (${e.code})\n`);
        }
      },
    };
    let synced: SyncFigures & { entryCount: number; version?: number };
    if (opts.db !== undefined) {
      state = await openState({ path: opts.db });
      // What a bulk import's sort that was killed left (as large as its input): this process holds the writer lock.
      removeSortDirs(opts.db);
      if (opts.discardUnfinished) await state.discardSync();
      // A store that holds a state is caught up (an unfinished sync in it is a catch-up's fallback).
      if (state.head() !== undefined) {
        bar?.stop();
        catchingUp = true;
        const code = await runCatchUp(state, opts, interrupt.signal, tty);
        interrupt.settled(code);
        return code;
      }
      const result = await syncState({ ...common, store: state });
      synced = { ...result, entryCount: state.head()!.entryCount };
    } else {
      const { tree, ...result } = await syncState(common);
      synced = { ...result, entryCount: tree.len };
      tree.free();
    }
    bar?.stop();
    const entryCount = synced.entryCount;
    const summary = {
      root: toHex(synced.root),
      chunkCount: synced.chunkCount,
      entryCount,
      ...(opts.db !== undefined && { db: opts.db, version: synced.version, restored: synced.restored, downloaded }),
      ...(firstRequestSeconds !== undefined && { firstRequestSeconds: Number(firstRequestSeconds.toFixed(3)) }),
      seconds: Number(synced.seconds.toFixed(3)),
      bytes: synced.bytes,
      mb_s: Number((synced.bytes / 1e6 / synced.seconds).toFixed(1)),
      refetches: synced.refetches,
      rejected: synced.rejected,
      banned: synced.banned,
    };
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(summary)}\n`);
    } else {
      process.stdout.write(
        `root verified ${summary.root}\n` +
          (opts.db === undefined ? '' : `stored in ${opts.db} as version ${synced.version} (${synced.restored} chunks restored, ${downloaded} downloaded)\n`) +
          `${summary.chunkCount} chunks, ${entryCount} entries, ${(summary.bytes / 1e6).toFixed(1)} MB in ${summary.seconds} s (${summary.mb_s} MB/s)\n` +
          `${summary.rejected} chunks rejected, ${summary.refetches} refetched, ${summary.banned.length} peers banned\n` +
          summary.banned.map((b) => `  banned ${b.peer}: ${b.reason} (${b.code})\n`).join(''),
      );
    }
    interrupt.settled(0);
    return 0;
  } catch (e) {
    bar?.stop();
    if (interrupt.signal.aborted) return interrupt.aborted();
    const storeCode = (e as { code?: unknown }).code;
    const code = e instanceof SyncError ? e.code : typeof storeCode === 'string' ? storeCode : 'SYNC_FAILED';
    const message = e instanceof Error ? e.message : String(e);
    const peers = e instanceof SyncError ? e.peers : [];
    if (opts.json) process.stdout.write(`${JSON.stringify({ error: code, message, peers })}\n`);
    else process.stderr.write(`sync failed: ${message} (${code})\n${peers.map((p) => `  ${p.outcome} ${p.peer}: ${p.reason} (${p.code})\n`).join('')}${hintFor(code)}`);
    return 1;
  } finally {
    await closeTransports();
    await state?.close();
    interrupt.dispose();
  }
}

/** What to do about an error code, for a person reading the CLI's error line ('' when the message says it all). */
export function hintFor(code: unknown): string {
  return code === 'SYNC_PENDING'
    ? 'An unfinished sync or catch-up holds the directory: run the same `bpavl sync` again to finish it, or give up on it with `bpavl sync --db DIR --root ROOT --discard-unfinished` for the root you want.\n'
    : '';
}
