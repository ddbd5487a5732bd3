/**
 * The `bpavl` command line. One entry per subcommand in `COMMANDS`; adding a
 * subcommand means adding an entry (its name, a one-line summary, its usage
 * and a `run(argv)` returning the exit code).
 *
 *   bpavl serve    [--entries N --chunk C --seed S | --file PATH] [--ws-port P] [--libp2p-port Q]
 *                  [--host H] [--byzantine MODE[:rate]] [--baseline] [--delay-ms D --rate-mb-s R] [--json] …
 *   bpavl generate --entries N --chunk C --seed S --out FILE [--json]
 *   bpavl sync     --root HEX --peer ADDRESS… [--timeout MS] [--json]
 * @module
 */

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { init, type Tree } from '@bpavl/wasm';
import { type BaselineBuilder, baselineBuilder, type BaselineServed, DEFAULT_BASELINE_CHUNK_BYTES } from '../../testnet/src/baseline.ts';
import { BYZANTINE_MODES, Byzantine, parseByzantine } from '../../testnet/src/byzantine.ts';
import { DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_SLOW_MS } from './constants.ts';
import { CachedTree, fromHex, type ServedTree, StaticTreeSource, toHex } from './source.ts';
import { readTreeFile, writeTreeFile } from './treefile.ts';
import { runSync, SYNC_USAGE } from './sync-command.ts';
import { buildWorkloadTree } from './workload.ts';

/** A usage error: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** One subcommand. */
export interface Command {
  summary: string;
  usage: string;
  /** Runs the command; resolves to the exit code (a server resolves when it stops). */
  run(argv: string[]): Promise<number>;
}

const WORKLOAD_HELP = `Workload (deterministic): key_i = SHA-256(u64be(seed) ‖ u64be(i)), or SHA-256(u64be(i))
for seed 0 (exactly the standard workload of crates/bench); value_i = u64be(i) ‖ first
504 bytes of SHA-256(key_i ‖ 0) ‖ … ‖ SHA-256(key_i ‖ 15); inserted in order, committed once.`;

const SERVE_USAGE = `bpavl serve [options]

Builds (or loads) a tree, commits it, and serves it to syncing clients over a
plain WebSocket (ws://) and libp2p (WebSockets, noise, yamux; /bpavl/sync/1.0.0)
at the same time (spec/wire.md). Stops cleanly on SIGINT or SIGTERM.

Tree:
  --entries N          entries of the workload (default 100000)
  --chunk C            chunk capacity, 2 … 4096 (default 256)
  --seed S             workload seed, unsigned 64-bit (default 0: the standard workload)
  --file PATH          serve a tree file from "bpavl generate" instead (each chunk verified on load)
  --root HEX           with --file: refuse the file unless it holds this root

Listening:
  --host H             interface (default 127.0.0.1)
  --ws-port P          plain WebSocket port; 0 = any free port (default), "off" = none
  --libp2p-port Q      libp2p WebSockets port; 0 = any free port (default), "off" = none
  --max-connections K  connections (sockets + libp2p streams) at once (default ${DEFAULT_MAX_CONNECTIONS})
  --idle-timeout MS    close a connection after MS without requests (default ${DEFAULT_IDLE_TIMEOUT_MS})

Benchmarks (npm run bench:sync):
  --baseline           also serve the workload as the paper's Baseline (an AVL+ tree, one entry per
                       leaf, chunks without proofs; benchmark-only kinds 5 BASELINE_CHUNK and
                       6 BASELINE_ROOTS, spec/wire.md). Needs @bpavl/baseline-wasm built; not with --file
  --baseline-chunk-bytes N  Baseline chunk size (default ${DEFAULT_BASELINE_CHUNK_BYTES})
  --delay-ms D         emulate a link with one-way delay D ms: every response is held back 2·D
                       (the round trip; requests are not delayed). Default 0
  --rate-mb-s R        emulate a link of R megabytes (10^6 bytes) per second per connection:
                       a token bucket (64 KiB deep) paces each connection's output. Default unlimited
  --cache-chunks       export every chunk envelope once at startup and serve them from memory
                       (as the Baseline's chunks are; costs about the state's size in memory)
  --exit-on-stdin-end  stop (as on SIGTERM) when stdin ends, e.g. when the parent process dies

Lying (tests and demos):
  --byzantine MODE[:RATE]  lie on RATE (0 < RATE ≤ 1, default 1) of the CHUNK/PROOF/RANGE answers.
                       MODE: ${BYZANTINE_MODES.join(', ')}
                       (see packages/peer/README.md for what each does)
  --byzantine-seed S   seed of the RNG that picks the lies (default: --seed)
  --slow-ms MS         delay of the "slow" mode (default ${DEFAULT_SLOW_MS})

Output:
  --json               print one JSON line {root, version, chunks, entries, capacity, ws, libp2p, peerId, …}
  --verbose            log connection faults and internal errors to stderr

${WORKLOAD_HELP}`;

const GENERATE_USAGE = `bpavl generate --out FILE [--entries N] [--chunk C] [--seed S] [--json]

Builds the workload tree (defaults as for "serve": 100000 entries, chunk 256,
seed 0), commits it and writes a tree file (a header with the root, then every
chunk envelope) that "bpavl serve --file FILE" loads.

${WORKLOAD_HELP}`;

const treeOptions = {
  entries: { type: 'string' },
  chunk: { type: 'string' },
  seed: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

function parse<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

function intArg(text: string | undefined, name: string, def: number, min: number, max: number): number {
  if (text === undefined) return def;
  if (!/^\d+$/.test(text)) throw new UsageError(`--${name} must be a non-negative integer, got "${text}"`);
  const v = Number(text);
  if (v < min || v > max) throw new UsageError(`--${name} must be in ${min} … ${max}, got ${text}`);
  return v;
}

function seedArg(text: string | undefined, name = 'seed'): bigint {
  if (text === undefined) return 0n;
  if (!/^\d+$/.test(text) || BigInt(text) >= 1n << 64n) throw new UsageError(`--${name} must be an unsigned 64-bit integer, got "${text}"`);
  return BigInt(text);
}

/** A positive rate in MB/s (a decimal number), or undefined. */
function rateArg(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const v = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || !(v > 0) || v > 1e6) throw new UsageError(`--rate-mb-s must be a positive number of MB/s, got "${text}"`);
  return v;
}

function portArg(text: string | undefined, name: string): number | null {
  if (text === 'off') return null;
  return intArg(text, name, 0, 0, 65535);
}

interface WorkloadArgs {
  entries: number;
  capacity: number;
  seed: bigint;
}

function workloadArgs(v: { entries?: string; chunk?: string; seed?: string }): WorkloadArgs {
  return {
    entries: intArg(v.entries, 'entries', 100_000, 0, Number.MAX_SAFE_INTEGER),
    capacity: intArg(v.chunk, 'chunk', 256, 2, 4096),
    seed: seedArg(v.seed),
  };
}

/** Another seed for the `wrong-root` tree. */
function otherSeed(seed: bigint): bigint {
  return seed === (1n << 64n) - 1n ? seed - 1n : seed + 1n;
}

const serve: Command = {
  summary: 'serve a tree over WebSocket and libp2p',
  usage: SERVE_USAGE,
  async run(argv) {
    const v = parse(argv, {
      ...treeOptions,
      file: { type: 'string' },
      root: { type: 'string' },
      host: { type: 'string' },
      'ws-port': { type: 'string' },
      'libp2p-port': { type: 'string' },
      'max-connections': { type: 'string' },
      'idle-timeout': { type: 'string' },
      byzantine: { type: 'string' },
      'byzantine-seed': { type: 'string' },
      'slow-ms': { type: 'string' },
      verbose: { type: 'boolean' },
      baseline: { type: 'boolean' },
      'baseline-chunk-bytes': { type: 'string' },
      'delay-ms': { type: 'string' },
      'rate-mb-s': { type: 'string' },
      'exit-on-stdin-end': { type: 'boolean' },
      'cache-chunks': { type: 'boolean' },
    });
    if (v.help) return help(serve);
    if (v.file !== undefined && (v.entries !== undefined || v.chunk !== undefined || v.seed !== undefined)) {
      throw new UsageError('--file and --entries/--chunk/--seed exclude each other');
    }
    if (v.root !== undefined && v.file === undefined) throw new UsageError('--root needs --file');
    let expectedRoot: Uint8Array | undefined;
    if (v.root !== undefined) {
      try {
        expectedRoot = fromHex(v.root);
      } catch {
        expectedRoot = undefined;
      }
      if (expectedRoot?.length !== 32) throw new UsageError('--root must be 64 hex digits');
    }
    const byzSpec = v.byzantine === undefined ? undefined : wrapUsage(() => parseByzantine(v.byzantine!));
    const host = v.host ?? '127.0.0.1';
    const wsPort = portArg(v['ws-port'], 'ws-port');
    const libp2pPort = portArg(v['libp2p-port'], 'libp2p-port');
    if (wsPort === null && libp2pPort === null) throw new UsageError('--ws-port off and --libp2p-port off: nothing to serve on');
    const maxConnections = intArg(v['max-connections'], 'max-connections', DEFAULT_MAX_CONNECTIONS, 1, 1_000_000);
    const idleTimeoutMs = intArg(v['idle-timeout'], 'idle-timeout', DEFAULT_IDLE_TIMEOUT_MS, 1, 2 ** 31 - 1);
    const slowMs = intArg(v['slow-ms'], 'slow-ms', DEFAULT_SLOW_MS, 0, 2 ** 31 - 1);
    if (v.baseline && v.file !== undefined) throw new UsageError('--baseline needs the workload (not --file)');
    if (v['baseline-chunk-bytes'] !== undefined && !v.baseline) throw new UsageError('--baseline-chunk-bytes needs --baseline');
    const baselineChunkBytes = intArg(v['baseline-chunk-bytes'], 'baseline-chunk-bytes', DEFAULT_BASELINE_CHUNK_BYTES, 1, 8 * 1024 * 1024 - 64);
    const delayMs = intArg(v['delay-ms'], 'delay-ms', 0, 0, 60_000);
    const rateMBs = rateArg(v['rate-mb-s']);

    const stopSignal = onceStopSignal(v['exit-on-stdin-end'] === true);
    await init();
    let tree: Tree;
    let work: WorkloadArgs;
    let baseline: (BaselineServed & { bytes: number }) | undefined;
    if (v.file !== undefined) {
      const loaded = await readTreeFile(v.file, expectedRoot);
      tree = loaded.tree;
      work = { entries: loaded.header.entries, capacity: loaded.header.capacity, seed: loaded.header.seed };
    } else {
      work = workloadArgs(v);
      const builder: BaselineBuilder | undefined = v.baseline ? await baselineBuilder(baselineChunkBytes) : undefined;
      tree = buildWorkloadTree({ entries: work.entries, seed: work.seed }, work.capacity, builder?.insert);
      baseline = builder?.finish();
    }
    const snapshot = tree.snapshot();
    let byzantine: Byzantine | undefined;
    if (byzSpec !== undefined) {
      const otherTree =
        byzSpec.mode === 'wrong-root'
          ? buildWorkloadTree({ entries: Math.max(work.entries, 1), seed: otherSeed(work.seed) }, work.capacity).snapshot()
          : undefined;
      byzantine = new Byzantine({
        ...byzSpec,
        seed: v['byzantine-seed'] === undefined ? work.seed : seedArg(v['byzantine-seed'], 'byzantine-seed'),
        slowMs,
        ...(otherTree ? { otherTree } : {}),
      });
    }
    // Loaded here so that help, usage errors and `generate` do not pay for libp2p.
    const { startPeer } = await import('./peer.ts');
    const served: ServedTree = v['cache-chunks'] ? new CachedTree(snapshot) : snapshot;
    const peer = await startPeer(new StaticTreeSource([served]), {
      host,
      wsPort,
      libp2pPort,
      maxConnections,
      idleTimeoutMs,
      ...(byzantine ? { byzantine } : {}),
      ...(baseline ? { baseline } : {}),
      ...(delayMs > 0 || rateMBs !== undefined ? { link: { delayMs, bytesPerSecond: (rateMBs ?? Infinity) * 1e6 } } : {}),
      ...(v.verbose ? { log: (m: string) => process.stderr.write(`bpavl serve: ${m}\n`) } : {}),
    });
    const info = {
      root: toHex(snapshot.root),
      version: snapshot.version,
      chunks: snapshot.chunkCount,
      entries: snapshot.len,
      capacity: snapshot.capacity,
      ws: peer.wsUrl ?? null,
      libp2p: peer.libp2pAddrs[0] ?? null,
      peerId: peer.peerId ?? null,
      byzantine: byzantine ? { mode: byzantine.mode, rate: byzantine.rate } : null,
      baseline: baseline ? { root: toHex(baseline.root), chunks: baseline.chunks.length, bytes: baseline.bytes, chunkBytes: baselineChunkBytes } : null,
      link: delayMs > 0 || rateMBs !== undefined ? { delayMs, rttMs: 2 * delayMs, rateMBs: rateMBs ?? null } : null,
    };
    if (v.json) {
      process.stdout.write(`${JSON.stringify(info)}\n`);
    } else {
      const lines = [
        `root      ${info.root}`,
        `version   ${info.version}`,
        `chunks    ${info.chunks} (${info.entries} entries, chunk capacity ${info.capacity})`,
        `ws        ${info.ws ?? '(off)'}`,
        `libp2p    ${info.libp2p ?? '(off)'}`,
      ];
      if (info.baseline) lines.push(`baseline  ${info.baseline.root} (${info.baseline.chunks} chunks, ${info.baseline.bytes} bytes; benchmark-only kinds 5, 6)`);
      if (info.link) lines.push(`link      ${delayMs} ms one way (responses +${2 * delayMs} ms), ${rateMBs === undefined ? 'unlimited' : `${rateMBs} MB/s`} per connection (emulated)`);
      if (byzantine) lines.push(`byzantine ${byzantine.mode}:${byzantine.rate}  (this peer LIES)`);
      lines.push('serving; Ctrl-C to stop');
      process.stdout.write(`${lines.join('\n')}\n`);
    }
    // Only now: a signal that came during startup is acted on here.
    const signal = await stopSignal;
    if (!v.json) process.stderr.write(`bpavl serve: ${signal}, stopping\n`);
    let force: NodeJS.Timeout | undefined;
    const timedOut = new Promise<number>((resolve) => {
      force = setTimeout(() => resolve(1), 5000);
      force.unref();
    });
    const closed = peer.close().then(
      () => 0,
      () => 1,
    );
    const code = await Promise.race([closed, timedOut]);
    clearTimeout(force);
    return code;
  },
};

/**
 * Resolves with the first SIGINT or SIGTERM (or, with `stdinEnd`, the end of
 * stdin). Installed before anything is printed: whoever reads our first line
 * may signal us at once, and a signal without a handler would kill the
 * process instead of stopping it cleanly.
 */
function onceStopSignal(stdinEnd: boolean): Promise<string> {
  return new Promise((resolve) => {
    const handler = (signal: string) => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
      if (stdinEnd) process.stdin.pause();
      resolve(signal);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    if (stdinEnd) {
      const onEnd = () => handler('stdin closed');
      process.stdin.once('end', onEnd);
      process.stdin.once('close', onEnd);
      process.stdin.once('error', onEnd);
      process.stdin.on('data', () => {}); // read (and drop) whatever comes, so that 'end' is seen
    }
  });
}

const generate: Command = {
  summary: 'write a tree file for "serve --file"',
  usage: GENERATE_USAGE,
  async run(argv) {
    const v = parse(argv, { ...treeOptions, out: { type: 'string' } });
    if (v.help) return help(generate);
    if (v.out === undefined) throw new UsageError('--out FILE is required');
    const work = workloadArgs(v);
    await init();
    const tree = buildWorkloadTree({ entries: work.entries, seed: work.seed }, work.capacity);
    const header = await writeTreeFile(v.out, tree, work.seed);
    const info = {
      file: v.out,
      root: toHex(header.root),
      version: header.version,
      chunks: header.chunks,
      entries: header.entries,
      capacity: header.capacity,
      seed: header.seed.toString(),
    };
    if (v.json) process.stdout.write(`${JSON.stringify(info)}\n`);
    else process.stdout.write(`wrote ${info.file}\nroot      ${info.root}\nchunks    ${info.chunks} (${info.entries} entries, chunk capacity ${info.capacity}, seed ${info.seed})\n`);
    tree.free();
    return 0;
  },
};

const sync: Command = {
  summary: 'sync a state from peers, verifying every chunk against a trusted root',
  usage: SYNC_USAGE,
  run: (argv) => runSync(argv, (m) => new UsageError(m)),
};

/** Every subcommand, by name. */
export const COMMANDS: Record<string, Command> = { serve, generate, sync };

function wrapUsage<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

function help(cmd: Command): number {
  process.stdout.write(`${cmd.usage}\n`);
  return 0;
}

function topUsage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const list = Object.entries(COMMANDS)
    .map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)
    .join('\n');
  return `usage: bpavl <command> [options]   (bpavl <command> --help for its options)\n\n${list}\n`;
}

/** Runs the CLI on `argv` (without node and the script); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(topUsage());
    return name === undefined ? 2 : 0;
  }
  const cmd = COMMANDS[name];
  if (cmd === undefined) {
    process.stderr.write(`bpavl: unknown command "${name}"\n${topUsage()}`);
    return 2;
  }
  try {
    return await cmd.run(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`bpavl ${name}: ${e.message}\n\n${cmd.usage}\n`);
      return 2;
    }
    const code = (e as { code?: unknown } | null)?.code;
    process.stderr.write(`bpavl ${name}: ${e instanceof Error ? e.message : String(e)}${typeof code === 'string' ? ` (${code})` : ''}\n`);
    return 1;
  }
}
