/**
 * The `bpavl` command line. One entry per subcommand in `COMMANDS`; adding a
 * subcommand means adding an entry (its name, a one-line summary, its usage
 * and a `run(argv)` returning the exit code).
 *
 *   bpavl serve    [--entries N --chunk C --seed S | --file PATH] [--ws-port P] [--libp2p-port Q]
 *                  [--host H] [--json] …
 *   bpavl generate --entries N --chunk C --seed S --out FILE [--json]
 *   bpavl sync     --root HEX --peer ADDRESS… [--timeout MS] [--json]
 *   bpavl get      --root HEX --peer ADDRESS… [--json] KEY…
 *   bpavl range    --root HEX --peer ADDRESS… [--page N] [--json] [START [END]]
 *
 * A harness extends `serve` with options of its own and a server hook
 * (`serveCommand`, `ServeExtension`; packages/testnet's CLI does).
 * @module
 */

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { MAX_TIMER_MS } from '@bpavl/light-client/sync';
import { init, type Snapshot, type Tree } from '@bpavl/wasm';
import { DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MEMORY_BUDGET_BYTES, WHOLE_STATE_MMAP_BYTES } from './constants.ts';
import type { ServerHook } from './hook.ts';
import { CachedTree, fromHex, MovingHead, toHex, type TreeSource } from './source.ts';
import { FollowedState } from './followed.ts';
import { readTreeFile, writeTreeFile } from './treefile.ts';
import { GET_HELP, RANGE_HELP, runGet, runRange } from './query-command.ts';
import { hintFor, runSync, SYNC_USAGE } from './sync-command.ts';
import { buildWorkloadTree, buildWorkloadTreeInSlices } from './workload.ts';
import { DB_USAGE, hasDb, runDbCommand } from './db-commands.ts';
import { holdsNoState, openState, type State } from '@bpavl/store';

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

const serveUsage = (extra: string) => `bpavl serve [options]

Builds (or loads) a tree, commits it, and serves it to syncing clients over a
plain WebSocket (ws://) and libp2p (WebSockets, noise, yamux; /bpavl/sync/1.0.0)
at the same time (spec/wire.md). Stops cleanly on SIGINT or SIGTERM (exit 0),
also while it builds the workload's tree (then before serving or printing
anything); one that comes while it loads --file is acted on once it serves
(its line printed, then it stops).

Tree:
  --entries N          entries of the workload (default 100000)
  --chunk C            chunk capacity, 2 … 4096 (default 256)
  --seed S             workload seed, unsigned 64-bit (default 0: the standard workload)
  --file PATH          serve a tree file from "bpavl generate" instead (each chunk verified on load)
  --root HEX           with --file: refuse the file unless it holds this root
  --db DIR             serve every retained version of a state directory instead (opened
                       read-only: other servers and one writer share it; answers are read
                       through the store's chunk cache, every record checked against its hash).
                       The directory is followed, without a restart: a version another process
                       commits later (import, generate --db, sync --db) is served; one it prunes
                       or rolls back stops being served, answered UNKNOWN_ROOT; a version whose
                       record fails its checks is not served (said on stderr, at startup too)
                       and the others are. The version records are read again before a ROOTS
                       answer and before an UNKNOWN_ROOT one, at most every 250 ms. A store with
                       no version yet is served from none (ROOTS lists nothing until one is
                       committed); a directory with no store is refused (STORE_NOT_A_DATABASE)
  --wait-for-store     with --db: a directory with no store yet (missing, empty, or one whose
                       first writer has not set it up) is not refused: served from none, and
                       the store is opened once a writer (sync --db, import, generate --db) has
                       made it, tried before a ROOTS answer and before an UNKNOWN_ROOT one, at
                       most every 250 ms. A flag, not the default: without it a mistyped --db
                       fails at once instead of serving nothing. A directory holding something
                       that is not a store is refused all the same (STORE_NOT_A_DATABASE, or
                       STORE_CORRUPT for a store whose data file was removed or truncated)

Listening:
  --host H             interface (default 127.0.0.1)
  --ws-port P          plain WebSocket port; 0 = any free port (default), "off" = none
  --libp2p-port Q      libp2p WebSockets port; 0 = any free port (default), "off" = none
  --max-connections K  connections (sockets + libp2p streams) at once (default ${DEFAULT_MAX_CONNECTIONS})
  --idle-timeout MS    close a connection after MS without requests (default ${DEFAULT_IDLE_TIMEOUT_MS})
  --memory-budget MIB  answer bytes queued across all connections, in MiB (default ${DEFAULT_MEMORY_BUDGET_BYTES / 2 ** 20}, at least 16)

Operation:
  --cache-chunks       export every chunk envelope once at startup and serve them from memory
                       (costs about the state's size in memory)
  --exit-on-stdin-end  stop (as on SIGTERM) when stdin ends, e.g. when the parent process dies
${extra}
Output:
  --json               print one JSON line {root, version, chunkCount, entryCount, capacity, ws, libp2p, peerId, …}
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

function portArg(text: string | undefined, name: string): number | null {
  if (text === 'off') return null;
  return intArg(text, name, 0, 0, 65535);
}

/** The workload of `serve` and `generate` (`./workload.ts`). */
export interface WorkloadArgs {
  entryCount: number;
  capacity: number;
  seed: bigint;
}

function workloadArgs(v: { entries?: string; chunk?: string; seed?: string }): WorkloadArgs {
  return {
    entryCount: intArg(v.entries, 'entries', 100_000, 0, Number.MAX_SAFE_INTEGER),
    capacity: intArg(v.chunk, 'chunk', 256, 2, 4096),
    seed: seedArg(v.seed),
  };
}

/** What `bpavl serve` knows of the tree it serves, for a `ServeExtension`. */
export interface ServeContext {
  /** The workload the tree was built from (read from the header with `--file`). */
  readonly workload: WorkloadArgs;
  /** Whether the tree came from `--file`. */
  readonly fromFile: boolean;
  /** The served versions of the tree in memory (not with `--db`, whose versions follow the directory); a harness may add newer ones. */
  readonly source?: MovingHead;
  /** The tree in memory whose head is served (not with `--db`). */
  readonly tree?: Tree;
}

/** What a `ServeExtension` adds to a running peer. */
export interface ServeSetup {
  hook?: ServerHook;
  /** Merged into the `--json` line. */
  info: Record<string, unknown>;
  /** Printed without `--json`, before "serving". */
  lines: string[];
  /** Called once the peer serves and its first line is out. */
  started?: () => void;
}

/** Option values as `parseArgs` returns them. */
export type OptionValues = Record<string, string | boolean | undefined>;

/** Options and a hook that a harness adds to `bpavl serve` (see `serveCommand`). */
export interface ServeExtension {
  /** More `parseArgs` options. */
  readonly options: NonNullable<ParseArgsConfig['options']>;
  /** Their usage text (a block of lines). */
  readonly usage: string;
  /**
   * Checks the extra option values before anything is built (throws
   * `UsageError`), and returns what sets them up once the tree is built.
   */
  prepare(values: OptionValues, fromFile: boolean): (ctx: ServeContext) => Promise<ServeSetup>;
}

const serveOptions = {
  ...treeOptions,
  file: { type: 'string' },
  db: { type: 'string' },
  root: { type: 'string' },
  host: { type: 'string' },
  'ws-port': { type: 'string' },
  'libp2p-port': { type: 'string' },
  'max-connections': { type: 'string' },
  'idle-timeout': { type: 'string' },
  'memory-budget': { type: 'string' },
  verbose: { type: 'boolean' },
  'exit-on-stdin-end': { type: 'boolean' },
  'cache-chunks': { type: 'boolean' },
  'wait-for-store': { type: 'boolean' },
} as const satisfies ParseArgsConfig['options'];

type ServeValues = ReturnType<typeof parseArgs<{ options: typeof serveOptions }>>['values'];

/** `bpavl serve`, optionally with a harness's options and hook. */
export function serveCommand(ext?: ServeExtension): Command {
  const serve: Command = {
    summary: 'serve a tree over WebSocket and libp2p',
    usage: serveUsage(ext?.usage ?? ''),
    async run(argv) {
      const v = parse(argv, { ...ext?.options, ...serveOptions }) as OptionValues & ServeValues;
      if (v.help) return help(serve);
      if (v.file !== undefined && (v.entries !== undefined || v.chunk !== undefined || v.seed !== undefined)) {
        throw new UsageError('--file and --entries/--chunk/--seed exclude each other');
      }
      if (v.db !== undefined && (v.file !== undefined || v.entries !== undefined || v.chunk !== undefined || v.seed !== undefined)) {
        throw new UsageError('--db and --file/--entries/--chunk/--seed exclude each other');
      }
      if (v.root !== undefined && v.file === undefined) throw new UsageError('--root needs --file');
      if (v['wait-for-store'] && v.db === undefined) throw new UsageError('--wait-for-store needs --db');
      let expectedRoot: Uint8Array | undefined;
      if (v.root !== undefined) {
        try {
          expectedRoot = fromHex(v.root);
        } catch {
          expectedRoot = undefined;
        }
        if (expectedRoot?.length !== 32) throw new UsageError('--root must be 64 hex digits');
      }
      const host = v.host ?? '127.0.0.1';
      const wsPort = portArg(v['ws-port'], 'ws-port');
      const libp2pPort = portArg(v['libp2p-port'], 'libp2p-port');
      if (wsPort === null && libp2pPort === null) throw new UsageError('--ws-port off and --libp2p-port off: nothing to serve on');
      const maxConnections = intArg(v['max-connections'], 'max-connections', DEFAULT_MAX_CONNECTIONS, 1, 1_000_000);
      const idleTimeoutMs = intArg(v['idle-timeout'], 'idle-timeout', DEFAULT_IDLE_TIMEOUT_MS, 1, MAX_TIMER_MS);
      const memoryBudget = intArg(v['memory-budget'], 'memory-budget', DEFAULT_MEMORY_BUDGET_BYTES / 2 ** 20, 16, 1 << 20) * 2 ** 20;
      const setUp = ext?.prepare(v, v.file !== undefined);

      const stopSignal = onceStopSignal(v['exit-on-stdin-end'] === true);
      /** The stop signal, once it came (seen by the workload's build between its slices). */
      let stoppedBy: string | undefined;
      void stopSignal.then((s) => (stoppedBy = s));
      await init();
      const log = v.verbose ? (m: string) => process.stderr.write(`bpavl serve: ${m}\n`) : undefined;
      let source: TreeSource;
      let moving: MovingHead | undefined;
      let followed: FollowedState | undefined;
      let tree: Tree | undefined;
      let state: State | undefined;
      let workload: WorkloadArgs;
      /** `--wait-for-store` on a directory with no store yet. */
      let noStore = false;
      if (v.db !== undefined) {
        const db = v.db;
        // Read as asked, through the store's chunk cache: memory stays bounded at any size.
        // A directory with no database (missing, empty, not a store) is STORE_NOT_A_DATABASE here.
        const open = () => openState({ path: db, readOnly: true, mmapBytes: WHOLE_STATE_MMAP_BYTES });
        const report = { ...(log && { log }), warn: (m: string) => process.stderr.write(`bpavl serve: ${m}\n`) };
        if (v['wait-for-store'] && (await holdsNoState(db))) {
          // No store yet: served from none, and opened once a writer has made it (what is not a
          // store, there now or later, is opened to say why: refused now, warned of later).
          source = followed = FollowedState.awaiting(async () => ((await holdsNoState(db)) ? undefined : open()), report);
          noStore = true;
          workload = { entryCount: 0, capacity: 256, seed: 0n }; // a new store's default capacity; the JSON line says null
        } else {
          state = await open();
          // A store with no committed version yet (a sync or a first import under way) is served too:
          // ROOTS lists nothing and other requests are UNKNOWN_ROOT until a version is committed.
          source = followed = new FollowedState(state, report);
          workload = { entryCount: state.head()?.entryCount ?? 0, capacity: state.capacity, seed: 0n };
        }
      } else {
        let snapshot: Snapshot;
        if (v.file !== undefined) {
          const loaded = await readTreeFile(v.file, expectedRoot);
          tree = loaded.tree;
          snapshot = tree.head();
          workload = { entryCount: loaded.header.entryCount, capacity: loaded.header.capacity, seed: loaded.header.seed };
        } else {
          workload = workloadArgs(v);
          // Built in slices: a signal during the build stops it at once, before anything is served or printed.
          tree = await buildWorkloadTreeInSlices({ entryCount: workload.entryCount, seed: workload.seed }, workload.capacity, () => stoppedBy !== undefined);
          if (tree === undefined) {
            if (!v.json) process.stderr.write(`bpavl serve: ${stoppedBy}, stopping\n`);
            return 0;
          }
          snapshot = tree.head();
        }
        source = moving = new MovingHead([v['cache-chunks'] ? new CachedTree(snapshot) : snapshot]);
      }
      const served = source.trees();
      const head = served.at(-1); // none: a state directory with no version yet
      const extra = (await setUp?.({ workload, fromFile: v.file !== undefined || v.db !== undefined, ...(moving && { source: moving }), ...(tree ? { tree } : {}) })) ?? {
        info: {},
        lines: [],
      };
      // Loaded here so that help, usage errors and `generate` do not pay for libp2p.
      const { startPeer } = await import('./peer.ts');
      const peer = await startPeer(source, {
        host,
        wsPort,
        libp2pPort,
        maxConnections,
        idleTimeoutMs,
        memoryBudget,
        ...(extra.hook ? { hook: extra.hook } : {}),
        ...(log && { log }),
      });
      const { collectAfterBursts } = await import('./release.ts');
      const stopCollecting = collectAfterBursts(() => peer.server.stats.answerBytes);
      const info = {
        root: head === undefined ? null : toHex(head.root),
        version: head?.version ?? null,
        chunkCount: head?.chunkCount ?? 0,
        entryCount: workload.entryCount,
        capacity: noStore ? null : workload.capacity,
        versions: served.length,
        ws: peer.wsUrl ?? null,
        libp2p: peer.libp2pAddrs[0] ?? null,
        peerId: peer.peerId ?? null,
        ...extra.info,
      };
      if (v.json) {
        process.stdout.write(`${JSON.stringify(info)}\n`);
      } else {
        const lines = [
          ...(noStore
            ? [`root      (none yet: no store in ${v.db}; once a writer makes one, each version committed is served as it comes)`]
            : head === undefined
            ? ['root      (none yet: no version committed; each one committed is served as it comes)']
            : [`root      ${info.root}`, `version   ${info.version}`, `chunks    ${info.chunkCount} (${info.entryCount} entries, chunk capacity ${info.capacity})`]),
          `ws        ${info.ws ?? '(off)'}`,
          `libp2p    ${info.libp2p ?? '(off)'}`,
          ...extra.lines,
          'serving; Ctrl-C to stop',
        ];
        process.stdout.write(`${lines.join('\n')}\n`);
      }
      extra.started?.();
      // Only now: a signal that came during startup is acted on here.
      const signal = await stopSignal;
      stopCollecting();
      if (!v.json) process.stderr.write(`bpavl serve: ${signal}, stopping\n`);
      let force: NodeJS.Timeout | undefined;
      const timedOut = new Promise<number>((resolve) => {
        force = setTimeout(() => resolve(1), 5000);
        force.unref();
      });
      const closed = peer
        .close()
        .then(() => followed?.close())
        .then(() => state?.close())
        .then(
          () => 0,
          () => 1,
        );
      const code = await Promise.race([closed, timedOut]);
      clearTimeout(force);
      return code;
    },
  };
  return serve;
}

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
  usage: `${GENERATE_USAGE}\n\n${DB_USAGE.generate}`,
  async run(argv) {
    if (hasDb(argv)) return runDbCommand('generate', argv, (m) => new UsageError(m));
    const v = parse(argv, { ...treeOptions, out: { type: 'string' } });
    if (v.help) return help(generate);
    if (v.out === undefined) throw new UsageError('--out FILE is required');
    const work = workloadArgs(v);
    await init();
    const tree = buildWorkloadTree({ entryCount: work.entryCount, seed: work.seed }, work.capacity);
    const header = await writeTreeFile(v.out, tree, work.seed);
    const info = {
      file: v.out,
      root: toHex(header.root),
      version: header.version,
      chunkCount: header.chunkCount,
      entryCount: header.entryCount,
      capacity: header.capacity,
      seed: header.seed.toString(),
    };
    if (v.json) process.stdout.write(`${JSON.stringify(info)}\n`);
    else process.stdout.write(`wrote ${info.file}\nroot      ${info.root}\nchunks    ${info.chunkCount} (${info.entryCount} entries, chunk capacity ${info.capacity}, seed ${info.seed})\n`);
    tree.free();
    return 0;
  },
};

const sync: Command = {
  summary: 'sync a state from peers, verifying every chunk against a trusted root',
  usage: SYNC_USAGE,
  run: (argv) => runSync(argv, (m) => new UsageError(m)),
};

const get: Command = {
  summary: 'read values from peers (or a state directory, --db), each proven against a root',
  usage: GET_HELP,
  run: (argv) => (hasDb(argv) ? runDbCommand('get', argv, (m) => new UsageError(m)) : runGet(argv, (m) => new UsageError(m))),
};

const range: Command = {
  summary: 'read a key range from peers (or a state directory, --db), proven against a root',
  usage: RANGE_HELP,
  run: (argv) => (hasDb(argv) ? runDbCommand('range', argv, (m) => new UsageError(m)) : runRange(argv, (m) => new UsageError(m))),
};

/** A command on a state directory (`db-commands.ts`). */
const dbCommand = (name: 'import' | 'prove' | 'versions' | 'prune' | 'rollback' | 'check', summary: string): Command => ({
  summary,
  usage: DB_USAGE[name],
  run: (argv) => runDbCommand(name, argv, (m) => new UsageError(m)),
});

/** Every subcommand, by name. */
export const COMMANDS: Record<string, Command> = {
  serve: serveCommand(),
  generate,
  sync,
  get,
  range,
  import: dbCommand('import', 'load JSON lines of keys and values into a state directory'),
  prove: dbCommand('prove', 'print the verified proof of a key in a state directory'),
  versions: dbCommand('versions', 'list the versions a state directory keeps'),
  prune: dbCommand('prune', 'keep the last N versions of a state directory'),
  rollback: dbCommand('rollback', 'make an older version the head of a state directory'),
  check: dbCommand('check', 'verify every record of every version of a state directory'),
};

function help(cmd: Command): number {
  process.stdout.write(`${cmd.usage}\n`);
  return 0;
}

function topUsage(program: string, commands: Record<string, Command>): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  const list = Object.entries(commands)
    .map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)
    .join('\n');
  return `usage: ${program} <command> [options]   (${program} <command> --help for its options)\n\n${list}\n`;
}

/**
 * Runs the CLI on `argv` (without node and the script); resolves to the exit
 * code. A harness passes its own `commands` and `program` name.
 */
export async function main(argv: string[], commands: Record<string, Command> = COMMANDS, program = 'bpavl'): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(topUsage(program, commands));
    return name === undefined ? 2 : 0;
  }
  const cmd = commands[name];
  if (cmd === undefined) {
    process.stderr.write(`${program}: unknown command "${name}"\n${topUsage(program, commands)}`);
    return 2;
  }
  try {
    return await cmd.run(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${program} ${name}: ${e.message}\n\n${cmd.usage}\n`);
      return 2;
    }
    const code = (e as { code?: unknown } | null)?.code;
    process.stderr.write(`${program} ${name}: ${e instanceof Error ? e.message : String(e)}${typeof code === 'string' ? ` (${code})` : ''}\n${hintFor(code)}`);
    return 1;
  }
}

