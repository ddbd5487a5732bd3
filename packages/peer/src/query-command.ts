/**
 * `bpavl get` and `bpavl range` with `--peer`: verified reads from remote
 * peers through the query client (`@bpavl/light-client/client`), trusting
 * only `--root`. A lying peer is banned (its code is printed on stderr) and
 * the read asked of another.
 * @module
 */

import { parseArgs } from 'node:util';
import { createClient, type Client, type QueryEvent, QueryError } from '@bpavl/light-client/client';
import { closeTransports, MAX_TIMER_MS } from '@bpavl/light-client/sync';
import { DB_USAGE } from './db-commands.ts';
import { fromHex, toHex } from './source.ts';
import { peerFlags } from './sync-command.ts';

const COMMON = `  --root HEX           the trusted root (64 hex digits)
  --peer ADDRESS       a peer (ws://host:port or a libp2p multiaddr); repeat for more
  --timeout MS         per-request deadline (default 2000)
  --deadline MS        per-read deadline: then NO_HONEST_PEERS (default 10000)
  --utf8               keys given are UTF-8 text (default: hex); keys and values print as hex either way
  --json               print one JSON line instead of text; on failure
                       {error, message, banned: [{peer, code}]}
  --help               this text

Exit status: 0 read, 1 failed (e.g. no honest peer left), 2 usage.`;

export const GET_USAGE = `bpavl get --root HEX --peer ADDRESS [--peer ADDRESS …] [options] KEY [KEY …]

Reads each KEY's value from the peers, with an existence or absence proof
checked against the root: prints "KEY VALUE", or "KEY (absent)".

${COMMON}`;

export const RANGE_USAGE = `bpavl range --root HEX --peer ADDRESS [--peer ADDRESS …] [options] [START [END]]

Reads every entry with START ≤ key < END (START omitted: from the first key;
END omitted: to the last), page by page, each page a range proof checked
against the root: prints "KEY VALUE" per entry.

  --page N             entries per page, 1 … 65536 (default 1000)
${COMMON}`;

/** `--help` of each command: the peer form, then the state directory's (`--db`). */
export const GET_HELP = `${GET_USAGE}\n\n${DB_USAGE.get}`;
export const RANGE_HELP = `${RANGE_USAGE}\n\n${DB_USAGE.range}`;

interface QueryArgs {
  help: boolean;
  root: Uint8Array;
  peers: string[];
  timeout: number;
  deadline: number;
  json: boolean;
  page: number;
  keys: Uint8Array[];
}

function parse(argv: string[], withPage: boolean): QueryArgs {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      root: { type: 'string' },
      peer: { type: 'string', multiple: true },
      timeout: { type: 'string' },
      deadline: { type: 'string' },
      utf8: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      ...(withPage ? { page: { type: 'string' as const } } : {}),
    },
    allowPositionals: true,
    strict: true,
  });
  const int = (text: string | undefined, name: string, fallback: number, max = Number.MAX_SAFE_INTEGER) => {
    const n = text === undefined ? fallback : Number(text);
    if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`--${name} must be an integer in 1 … ${max}`);
    return n;
  };
  const help = values.help === true;
  if (help) return { help, root: new Uint8Array(32), peers: [], timeout: 0, deadline: 0, json: false, page: 0, keys: [] };
  if (!values.root || !/^[0-9a-fA-F]{64}$/.test(values.root)) throw new Error('--root must be 64 hex digits');
  const peers = peerFlags(values.peer);
  const key = (text: string) => {
    if (values.utf8) return new TextEncoder().encode(text);
    if (!/^([0-9a-fA-F]{2})*$/.test(text)) throw new Error(`key "${text}" is not hex (use --utf8 for text keys)`);
    return fromHex(text);
  };
  return {
    help,
    root: fromHex(values.root),
    peers,
    timeout: int(values.timeout, 'timeout', 2000, MAX_TIMER_MS),
    deadline: int(values.deadline, 'deadline', 10_000, MAX_TIMER_MS),
    json: values.json === true,
    page: int((values as { page?: string }).page, 'page', 1000, 65536),
    keys: positionals.map(key),
  };
}

/** Runs `read` with a client over the arguments' peers; bans go to stderr as they happen. */
async function withClient(args: QueryArgs, read: (c: Client) => Promise<void>): Promise<number> {
  const onEvent = (e: QueryEvent) => {
    if (e.type === 'banned' && !args.json) process.stderr.write(`banned ${e.peer}: ${e.code}\n`);
  };
  const client = createClient({ root: args.root, peers: args.peers, requestTimeoutMs: args.timeout, deadlineMs: args.deadline, onEvent });
  try {
    await read(client);
    return 0;
  } catch (e) {
    // With --json a failed read is one JSON line too, naming the peers banned on the way.
    if (!args.json || !(e instanceof QueryError)) throw e;
    process.stdout.write(`${JSON.stringify({ error: e.code, message: e.message, banned: client.banned })}\n`);
    return 1;
  } finally {
    client.close();
    await closeTransports();
  }
}

const line = (key: Uint8Array, value: Uint8Array | undefined) => `${toHex(key)} ${value === undefined ? '(absent)' : toHex(value)}\n`;
const jsonEntry = (key: Uint8Array, value: Uint8Array | undefined) => ({ key: toHex(key), value: value === undefined ? null : toHex(value) });

/** Runs `bpavl get`; `usageError` wraps argument errors for the CLI. */
export async function runGet(argv: string[], usageError: (m: string) => Error): Promise<number> {
  const args = usage(() => parse(argv, false), usageError);
  if (args.help) return printUsage(GET_HELP);
  if (args.keys.length === 0) throw usageError('give at least one KEY');
  return withClient(args, async (client) => {
    const values = await client.getMany(args.keys);
    if (args.json) {
      const results = args.keys.map((k, i) => jsonEntry(k, values[i]));
      process.stdout.write(`${JSON.stringify({ root: toHex(args.root), results, banned: client.banned })}\n`);
    } else {
      for (const [i, k] of args.keys.entries()) process.stdout.write(line(k, values[i]));
    }
  });
}

/** Runs `bpavl range`; `usageError` wraps argument errors for the CLI. */
export async function runRange(argv: string[], usageError: (m: string) => Error): Promise<number> {
  const args = usage(() => parse(argv, true), usageError);
  if (args.help) return printUsage(RANGE_HELP);
  if (args.keys.length > 2) throw usageError('give at most START and END');
  const [start = new Uint8Array(0), end] = args.keys;
  return withClient(args, async (client) => {
    const entries: { key: string; value: string | null }[] = [];
    let pages = 0;
    for await (const page of client.range(start, end, { limit: args.page })) {
      pages++;
      for (const [k, v] of page.entries) {
        if (args.json) entries.push(jsonEntry(k, v));
        else process.stdout.write(line(k, v));
      }
    }
    if (args.json) process.stdout.write(`${JSON.stringify({ root: toHex(args.root), entries, pages, banned: client.banned })}\n`);
  });
}

function usage<T>(f: () => T, usageError: (m: string) => Error): T {
  try {
    return f();
  } catch (e) {
    throw usageError(e instanceof Error ? e.message : String(e));
  }
}

function printUsage(text: string): number {
  process.stdout.write(`${text}\n`);
  return 0;
}
