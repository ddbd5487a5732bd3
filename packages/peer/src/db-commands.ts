/**
 * The `bpavl` commands on a state store directory (`--db DIR`, `@bpavl/store`
 * on SQLite): `import`, `generate --db`, `get`/`prove`/`range --db`,
 * `versions`, `prune`, `rollback` and `check`. Every read is proven: values
 * come with an existence or absence proof verified against the root of the
 * version they are read from. Errors keep their codes (`spec/errors.md`);
 * with `--json` a failure is one JSON line `{error, message, …}`.
 * @module
 */

import { accessSync, constants, createReadStream, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { verifyChunk, verifyRange } from '@bpavl/wasm';
import { DEFAULT_BATCH_BYTES, openState, type AtVersion, type State, StoreError, type VersionInfo } from '@bpavl/store';
import { removeSortDirs, sortRecords } from '@bpavl/store/sort';
import { MAX_KEY_LEN, MAX_VALUE_LEN } from '@bpavl/light-client/wire';
import { WHOLE_STATE_MMAP_BYTES } from './constants.ts';
import { fromHex, type StoredTree, toHex } from './source.ts';
import { workloadEntry } from './workload.ts';
import { type Interruption, interruptible } from './interrupt.ts';

/** A malformed line of an import file (`IMPORT_LINE_INVALID`, with its line number). */
export class ImportError extends Error {
  override readonly name = 'ImportError';
  readonly code = 'IMPORT_LINE_INVALID';
  readonly line: number;
  constructor(line: number, message: string) {
    super(`line ${line}: ${message}`);
    this.line = line;
  }
}

/** What `--batch-mib` says, in the help of the commands that take it. */
const BATCH_MIB = `A batch not committed yet
holds at most --batch-mib MiB of chunks (default 1024) and writes changed
chunks ahead past it: less memory, more writes for a batch of random keys.`;

/** What SIGINT and SIGTERM do, in the help of the commands that write (\`./interrupt.ts\`). */
const STOPPED = `SIGINT or SIGTERM (Ctrl-C) stops it at the next safe point: the state keeps
its last commit (a batch not committed is dropped), and the command exits
130 (--json: {"error": "ABORTED", "message": …}). A second signal exits at
once, as a crash would: the store is crash-safe.`;

const COMMON = `  --db DIR             the state directory (made by import or generate --db)
  --json               print one JSON line instead of text
  --help               this text`;

/** The options of the commands that read a version. */
const READS = `  --version V          read version V (default: the head)
  --utf8               keys given are UTF-8 text (default: hex)`;

export const DB_USAGE = {
  import: `bpavl import --db DIR [--batch N] [--batch-mib M] [--utf8] [--json] FILE

Loads a file of JSON lines {"key": …, "value": …} (hex, or UTF-8 text with
--utf8) into the state; the last line of a key wins. A malformed line stops
the import with its line number (exit 1, IMPORT_LINE_INVALID); the last
commit stays as it was.

Into a state that holds no version, without --batch: a bulk load. The lines
are sorted on disk (files under DIR/bpavl-sort-*, about the input's size,
removed afterwards, and by a signal that stops the sort; those a killed
process leaves are removed by the next command that writes DIR) and written
once as version 1, in chunks of C − C/16 under a balanced tree, so the root depends
on the entries alone. A malformed line then leaves the state empty, and so
does a file of no entries.

Otherwise: puts, committing every --batch entries (default 100000) and at the
end. ${BATCH_MIB}

${STOPPED} A bulk load stopped so leaves
the state empty.

  --batch N            put the lines and commit every N (default: a bulk load into an empty state, else 100000)
  --batch-mib M        the most MiB of changed chunks a batch holds before writing ahead (default 1024)
  --utf8               keys and values in FILE are UTF-8 text (default: hex)
${COMMON}`,
  generate: `bpavl generate --db DIR [--entries N] [--seed S] [--chunk C] [--batch N] [--batch-mib M] [--json]

Writes the deterministic workload of "bpavl serve" into a new version of the
state (entries 100000, seed 0, chunk capacity 256 for a new state; a commit
every --batch entries, default 1000000). ${BATCH_MIB}

${STOPPED}

  --entries N          entries to write (default 100000)
  --seed S             the workload's seed (default 0)
  --chunk C            the chunk capacity of a new state (default 256)
  --batch N            commit every N entries (default 1000000)
  --batch-mib M        the most MiB of changed chunks a batch holds before writing ahead (default 1024)
${COMMON}`,
  get: `bpavl get --db DIR [--version V] [--utf8] [--json] KEY [KEY …]

Reads each KEY at the head (or version V), with an existence or absence proof
verified against that version's root: prints "KEY VALUE" or "KEY (absent)",
each in hex (--utf8 is for the keys given).

${READS}
${COMMON}`,
  prove: `bpavl prove --db DIR [--version V] [--utf8] [--json] KEY

Prints the existence or absence proof of KEY (spec/proof-format.md) at the
head (or version V), after verifying it against that version's root.

${READS}
${COMMON}`,
  range: `bpavl range --db DIR [--version V] [--limit N] [--utf8] [--json] [START [END]]

Reads up to --limit entries (default 1000, at most 65536) with
START ≤ key < END, with a range proof verified against the version's root.

${READS}
  --limit N            the most entries to read (default 1000, at most 65536)
${COMMON}`,
  versions: `bpavl versions --db DIR [--json]

Lists the retained versions with their roots, oldest first, and each version
whose record is damaged (STORE_CORRUPT: not readable; see "bpavl check").
Exit 0 when no version record is damaged; 1, as check, with the whole list
printed all the same, when one is.
--json: {versions: [{version, root}], damaged: [{version, code, message}]}.

${COMMON}`,
  prune: `bpavl prune --db DIR --keep N [--vacuum] [--json]

Keeps the last N versions and gives back the space of what only older ones used.
A version whose record is damaged counts among them; while one is kept, the
state takes no change (STORE_CORRUPT names it), so keep fewer to drop it.
--vacuum also rewrites the database packed (SQLite VACUUM): the file shrinks to
about what the kept versions hold, but the rewrite takes as long as writing the
whole database and needs about twice its size free on disk meanwhile.

Exit 0 when pruned. SIGINT or SIGTERM (Ctrl-C) before the prune starts: exit
130 (--json: {"error": "ABORTED", "message": …}), nothing changed; once it
has started, the prune runs to its end and exits 0 as usual. A second signal
exits 130 at once, as a crash would: the store is crash-safe, and the same
command finishes what the prune left.

  --keep N             the versions to keep, the newest ones (at least 1)
  --vacuum             also rewrite the database packed
${COMMON}`,
  rollback: `bpavl rollback --db DIR --to V [--json]

Makes version V the head and discards every later version: the way to drop a
damaged record above an intact V (the state takes no other change meanwhile).

Exit 0 when rolled back. SIGINT or SIGTERM (Ctrl-C) before the rollback
starts: exit 130 (--json: {"error": "ABORTED", "message": …}), nothing
changed; once it has started, it runs to its end and exits 0 as usual. A
second signal exits 130 at once, as a crash would: the store is crash-safe.

  --to V               the version that becomes the head (a retained one)
${COMMON}`,
  check: `bpavl check --db DIR [--json]

Reads every retained version whole, checking every record against the hash
its parent names, and verifies each chunk's envelope against the version's
root (as a client of a peer would). Exit 0 when all verify; 1 with each damaged version and
what was found (STORE_CORRUPT) otherwise, a damaged version record among
them (the other versions are still checked). A version that a writer beside
the check prunes or rolls back meanwhile is gone, not damaged: listed
apart. --json: {versions, damaged: [{version, code, message}], gone: [version]}.
SIGINT or SIGTERM (Ctrl-C) stops the check: exit 130 (--json: {"error":
"ABORTED", "message": …}).

${COMMON}`,
} as const;

type DbCommandName = keyof typeof DB_USAGE;

const OPTIONS = {
  db: { type: 'string' },
  version: { type: 'string' },
  batch: { type: 'string' },
  'batch-mib': { type: 'string' },
  entries: { type: 'string' },
  seed: { type: 'string' },
  chunk: { type: 'string' },
  limit: { type: 'string' },
  keep: { type: 'string' },
  to: { type: 'string' },
  vacuum: { type: 'boolean' },
  utf8: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

function int(v: Values, name: keyof Values, def: number | undefined, min: number, max: number): number {
  const text = v[name];
  if (text === undefined) {
    if (def === undefined) throw new UsageError(`--${name} is required`);
    return def;
  }
  if (typeof text !== 'string' || !/^\d+$/.test(text)) throw new UsageError(`--${name} must be a non-negative integer, got "${String(text)}"`);
  const n = Number(text);
  if (n < min || n > max) throw new UsageError(`--${name} must be in ${min} … ${max}, got ${text}`);
  return n;
}

/** `--batch-mib` in bytes (`batchBytes`). */
function batchBound(v: Values): number {
  return int(v, 'batch-mib', DEFAULT_BATCH_BYTES / 2 ** 20, 0, 1 << 20) * 2 ** 20;
}

const encoder = new TextEncoder();

/** A key or value from the command line or a file: hex, or UTF-8 with --utf8. */
function bytesOf(text: string, utf8: boolean | undefined, what: string): Uint8Array {
  if (utf8) return encoder.encode(text);
  try {
    return fromHex(text);
  } catch {
    throw new UsageError(`${what} "${text}" is not hex (use --utf8 for text)`);
  }
}

/**
 * Opens the state in `dir` for `body`, and closes it. A writer first removes
 * the directories of a bulk import's sort that a killed process left (as
 * large as its input): it holds the writer lock, so no sort runs there.
 */
async function withState<T>(dir: string, readOnly: boolean, body: (state: State) => Promise<T>, sizes: { capacity?: number; batchBytes?: number; mmapBytes?: number } = {}): Promise<T> {
  const state = await openState({ path: dir, readOnly, ...sizes });
  try {
    if (!readOnly) removeSortDirs(dir);
    return await body(state);
  } finally {
    await state.close();
  }
}

/** The version a read names (`--version`), or the head: not a lower version while the head's record is damaged. */
function versionOf(v: Values, state: State): number {
  if (v.version !== undefined) return int(v, 'version', 0, 0, Number.MAX_SAFE_INTEGER);
  const head = state.head()?.version ?? 0;
  const above = state.damagedVersions().at(-1);
  if (above !== undefined && above.version > head) throw above.error;
  return head;
}

/**
 * `key`'s value (`undefined`: absent) and the proof of it at `at`, verified
 * by the store. Two reads when the key is absent: with `at.root`, both are
 * of that root (`VERSION_UNKNOWN` if the version was committed again with
 * another root between them).
 */
async function proveKey(state: State, key: Uint8Array, at: AtVersion): Promise<{ value: Uint8Array | undefined; proof: Uint8Array }> {
  try {
    return await state.proveExistence(key, at);
  } catch (e) {
    if ((e as { code?: unknown }).code !== 'KEY_NOT_FOUND') throw e;
    return { value: undefined, proof: await state.proveAbsence(key, at) };
  }
}

/**
 * The retained `version` of `state`, served from storage as asked (`bpavl
 * serve --db`). Every read is pinned to `root`: one that meets the version
 * committed again with another root by another process (a rollback) fails
 * `VERSION_UNKNOWN` (the server answers `UNKNOWN_ROOT`), never answers from
 * the other root's records (docs/store.md, "A version committed again
 * under its number").
 */
export function storedVersion(state: State, { version, root, chunkCount }: VersionInfo): StoredTree {
  const at: AtVersion = { version, root };
  return {
    stored: true,
    root,
    version,
    chunkCount,
    exportChunk: (index) => state.exportChunk(index, at),
    prove: (key) => proveKey(state, key, at),
    proveRange: (start, end, limit) => state.proveRange(start, end, limit, at),
    exportSubtree: (path, levels, maxBytes) => state.exportSubtree(path, levels, maxBytes, at),
    exportLeaves: (path) => state.exportLeaves(path, at),
    exportEntries: (path, bitmap, maxBytes) => state.exportEntries(path, bitmap, maxBytes, at),
  };
}

function rootOf(state: State, version: number): Uint8Array {
  const info = state.versions().find((x) => x.version === version);
  const damaged = state.damagedVersions().find((d) => d.version === version);
  if (damaged !== undefined) throw damaged.error;
  if (info === undefined) throw new StoreError('VERSION_UNKNOWN', `version ${version} is not retained`);
  return info.root;
}

/** Whether `file` is a file this process can read. */
function isReadableFile(file: string): boolean {
  try {
    accessSync(file, constants.R_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** Entries `generate` hands to `putMany` at a time. */
const GENERATE_SLICE = 16_384;

/** The entries of the JSON lines of `file`, each checked as `put` would check it; a bad line is an `ImportError`. */
async function* importLines(file: string, utf8: boolean | undefined, counted: { lines: number; entries: number }, interrupt: Interruption): AsyncGenerator<[Uint8Array, Uint8Array]> {
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  for await (const line of lines) {
    // A signal stops the import here: a bulk load's sort then stops, its files removed.
    interrupt.check();
    const n = ++counted.lines;
    if (line.trim() === '') continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      throw new ImportError(n, 'not JSON');
    }
    const { key, value } = (record ?? {}) as { key?: unknown; value?: unknown };
    if (typeof key !== 'string' || typeof value !== 'string') throw new ImportError(n, 'expected {"key": string, "value": string}');
    let k: Uint8Array;
    let val: Uint8Array;
    try {
      k = bytesOf(key, utf8, 'key');
      val = bytesOf(value, utf8, 'value');
    } catch (e) {
      throw new ImportError(n, e instanceof Error ? e.message : String(e));
    }
    // Checked here, where the line is known: a bulk load meets its entries only once they are sorted.
    if (k.length === 0) throw new ImportError(n, 'KEY_EMPTY: the key is empty');
    if (k.length > MAX_KEY_LEN) throw new ImportError(n, `KEY_TOO_LONG: the key is longer than ${MAX_KEY_LEN} bytes`);
    if (val.length > MAX_VALUE_LEN) throw new ImportError(n, `VALUE_TOO_LONG: the value is longer than ${MAX_VALUE_LEN} bytes`);
    counted.entries++;
    yield [k, val];
  }
}

/**
 * `first`, then the rest of `rest`, stopping at a signal; `rest` is ended too
 * when this is left early (the sort's worker and files go).
 */
async function* prepend<T>(first: T, rest: AsyncIterator<T>, interrupt: Interruption): AsyncGenerator<T> {
  try {
    yield first;
    for (let next = await rest.next(); next.done !== true; next = await rest.next()) {
      await interrupt.checkpoint();
      yield next.value;
    }
  } finally {
    await rest.return?.();
  }
}

/** Puts the entries of `file` into `state`, committing every `batch` entries and at the end. */
async function importInBatches(state: State, entries: AsyncIterable<[Uint8Array, Uint8Array]>, batch: number, progress: () => void): Promise<void> {
  // `entries` stops at a signal (importLines): the batch not committed then is dropped by the close.
  let pending = 0;
  for await (const [key, value] of entries) {
    await state.put(key, value);
    if (++pending === batch) {
      await state.commit();
      pending = 0;
      progress();
    }
  }
  if (pending > 0) await state.commit();
}

/** Prints a command's result; `status`: the exit status it goes with (a second signal then exits with it). */
type Out = (json: Record<string, unknown>, text: string, status?: number) => void;

/** The commands that run long enough to be stopped by SIGINT or SIGTERM at a safe point (`./interrupt.ts`). */
const INTERRUPTIBLE: ReadonlySet<DbCommandName> = new Set(['import', 'generate', 'prune', 'rollback', 'check']);

/** Runs `bpavl NAME` on a state directory; resolves to the exit status. */
export async function runDbCommand(name: DbCommandName, argv: string[], usageError: (message: string) => Error): Promise<number> {
  try {
    return await runChecked(name, argv);
  } catch (e) {
    if (e instanceof UsageError) throw usageError(e.message);
    throw e;
  }
}

/** A refused command line, turned into the CLI's own usage error by {@link runDbCommand}. */
class UsageError extends Error {}

async function runChecked(name: DbCommandName, argv: string[]): Promise<number> {
  const { values: v, positionals } = (() => {
    try {
      return parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: true });
    } catch (e) {
      throw new UsageError(e instanceof Error ? e.message : String(e));
    }
  })();
  if (v.help) {
    process.stdout.write(`${DB_USAGE[name]}\n`);
    return 0;
  }
  // The options a command takes are those its usage line names: another one would be ignored, so it is refused.
  const takes = new Set([...DB_USAGE[name].split('\n')[0]!.matchAll(/--([a-z0-9-]+)/g)].map((m) => m[1]));
  const stray = Object.keys(v).find((o) => !takes.has(o) && o !== 'help');
  if (stray !== undefined) throw new UsageError(`--${stray} is not an option of bpavl ${name}`);
  if (v.db === undefined) throw new UsageError('--db DIR is required');
  const dir = v.db;
  const tty = process.stderr.isTTY && !v.json;
  const interrupt = interruptible(() => {
    const message = name === 'check' ? 'interrupted: the check stopped before its end' : `interrupted: ${dir} keeps its last commit (a batch not committed is dropped)`;
    if (v.json) process.stdout.write(`${JSON.stringify({ error: 'ABORTED', message })}\n`);
    else process.stderr.write(`${tty ? '\n' : ''}bpavl ${name}: ${message}\n`);
  });
  if (!INTERRUPTIBLE.has(name)) interrupt.dispose();
  const out: Out = (json, text, status = 0) => {
    process.stdout.write(v.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
    interrupt.settled(status);
  };
  try {
    return await dispatch(name, v, positionals, dir, out, tty, interrupt);
  } catch (e) {
    // Stopped by a signal (at a safe point, or a failure the stop caused): the state is closed by now.
    if (interrupt.signal.aborted && !(e instanceof UsageError)) return interrupt.aborted();
    if (e instanceof UsageError || !v.json) throw e;
    const code = (e as { code?: unknown }).code;
    process.stdout.write(`${JSON.stringify({ error: typeof code === 'string' ? code : 'FAILED', message: e instanceof Error ? e.message : String(e), ...(e instanceof ImportError ? { line: e.line } : {}) })}\n`);
    return 1;
  } finally {
    interrupt.dispose();
  }
}

async function dispatch(name: DbCommandName, v: Values, positionals: string[], dir: string, out: Out, tty: boolean, interrupt: Interruption): Promise<number> {
  switch (name) {
    case 'import': {
      if (positionals.length !== 1) throw new UsageError('exactly one FILE');
      // Before the state is opened: a file that cannot be read is a usage error, not a failed import.
      if (!isReadableFile(positionals[0]!)) throw new UsageError(`cannot read the file ${positionals[0]}`);
      const batch = int(v, 'batch', 100_000, 1, 10_000_000);
      const batchBytes = batchBound(v);
      return withState(dir, false, async (state) => {
        interrupt.check();
        const t0 = performance.now();
        const counted = { lines: 0, entries: 0 };
        const entries = importLines(positionals[0]!, v.utf8, counted, interrupt);
        // A state with no version and no --batch: sorted on disk, then loaded in one version.
        const bulk = state.head() === undefined && v.batch === undefined;
        if (bulk) {
          const onProgress = (n: number) => tty && process.stderr.write(`\rwrote ${n} of ${counted.entries} entries`);
          // A file of no entries makes no version (the next import would be puts, not a bulk load).
          const sorted = sortRecords(entries, { dir });
          const first = await sorted.next();
          if (first.done !== true) await state.bulkLoad(prepend(first.value, sorted, interrupt), { onProgress });
        } else {
          await importInBatches(state, entries, batch, () => tty && process.stderr.write(`\rimported ${counted.lines} lines`));
        }
        if (tty) process.stderr.write('\n');
        const head = state.head();
        // `entries`: the file's (a key given twice counts twice); `entryCount`: the state's after it.
        const entryCount = head?.entryCount ?? 0;
        out(
          { entries: counted.entries, lines: counted.lines, bulk, version: head?.version ?? 0, root: head ? toHex(head.root) : null, entryCount, seconds: (performance.now() - t0) / 1000 },
          `imported ${counted.entries} entries${bulk ? ' (bulk load)' : ''}; version ${head?.version ?? 0}, root ${head ? toHex(head.root) : '(empty)'}, ${entryCount} entries in the state`,
        );
        return 0;
      }, { batchBytes });
    }
    case 'generate': {
      const entryCount = int(v, 'entries', 100_000, 0, Number.MAX_SAFE_INTEGER);
      const seed = BigInt(int(v, 'seed', 0, 0, Number.MAX_SAFE_INTEGER));
      const capacity = int(v, 'chunk', 256, 2, 4096);
      const batch = int(v, 'batch', 1_000_000, 1, 100_000_000);
      const batchBytes = batchBound(v);
      return withState(
        dir,
        false,
        async (state) => {
          const t0 = performance.now();
          // Slices that end at each commit, their chunks read together (putMany); a signal stops
          // the loop between slices, and the close drops the batch not committed.
          for (let i = 0; i < entryCount; ) {
            await interrupt.checkpoint();
            const end = Math.min(entryCount, i + GENERATE_SLICE, (Math.floor(i / batch) + 1) * batch);
            const slice: [Uint8Array, Uint8Array][] = [];
            for (; i < end; i++) slice.push(workloadEntry(seed, i));
            await state.putMany(slice);
            if (i % batch === 0 && i < entryCount) {
              await state.commit();
              if (tty) process.stderr.write(`\rgenerated ${i} of ${entryCount} entries`);
            }
          }
          interrupt.check();
          const head = await state.commit();
          if (tty) process.stderr.write('\n');
          const stats = await state.stats();
          out(
            { version: head.version, root: toHex(head.root), entryCount: stats.entryCount, chunkCount: stats.chunkCount, capacity: state.capacity, seconds: (performance.now() - t0) / 1000 },
            `version ${head.version}, root ${toHex(head.root)}\nchunks    ${stats.chunkCount} (${stats.entryCount} entries, chunk capacity ${state.capacity})`,
          );
          return 0;
        },
        { capacity, batchBytes },
      );
    }
    case 'get':
      if (positionals.length === 0) throw new UsageError('at least one KEY');
      return withState(dir, true, async (state) => {
        const version = versionOf(v, state);
        const root = rootOf(state, version);
        const results = [];
        for (const text of positionals) {
          const key = bytesOf(text, v.utf8, 'key');
          const { value } = await proveKey(state, key, { version });
          results.push({ key: toHex(key), value: value === undefined ? null : toHex(value) });
        }
        out({ version, root: toHex(root), results }, results.map((r) => `${r.key} ${r.value ?? '(absent)'}`).join('\n'));
        return 0;
      });
    case 'prove':
      if (positionals.length !== 1) throw new UsageError('exactly one KEY');
      return withState(dir, true, async (state) => {
        const version = versionOf(v, state);
        const root = rootOf(state, version);
        const key = bytesOf(positionals[0]!, v.utf8, 'key');
        const { value, proof } = await proveKey(state, key, { version });
        const kind = value === undefined ? 'absence' : 'existence';
        out({ version, root: toHex(root), key: toHex(key), kind, value: value === undefined ? null : toHex(value), proof: toHex(proof) }, `${kind} proof (verified against ${toHex(root)})\n${toHex(proof)}`);
        return 0;
      });
    case 'range': {
      if (positionals.length > 2) throw new UsageError('at most START and END');
      const limit = int(v, 'limit', 1000, 1, 65_536);
      return withState(dir, true, async (state) => {
        const version = versionOf(v, state);
        const root = rootOf(state, version);
        const start = positionals[0] === undefined ? new Uint8Array(0) : bytesOf(positionals[0], v.utf8, 'START');
        const end = positionals[1] === undefined ? undefined : bytesOf(positionals[1], v.utf8, 'END');
        // The store verified the proof; reading it again gives its entries and resume key.
        const page = verifyRange(root, start, end, limit, await state.proveRange(start, end, limit, { version }));
        const entries = page.entries.map(([k, val]) => ({ key: toHex(k), value: toHex(val) }));
        out(
          { version, root: toHex(root), entries, complete: page.complete, resumeKey: page.resumeKey ? toHex(page.resumeKey) : null },
          [...entries.map((e) => `${e.key} ${e.value}`), ...(page.complete ? [] : [`(more from ${toHex(page.resumeKey!)})`])].join('\n'),
        );
        return 0;
      });
    }
    case 'versions':
      return withState(dir, true, async (state) => {
        const versions = state.versions().map((x) => ({ version: x.version, root: toHex(x.root) }));
        const damaged = state.damagedVersions().map(({ version, error }) => ({ version, code: error.code, message: error.message }));
        const lines = [...versions.map((x) => ({ version: x.version, text: `${x.version} ${x.root}` })), ...damaged.map((d) => ({ version: d.version, text: `${d.version} damaged: ${d.code} ${d.message}` }))];
        lines.sort((a, b) => a.version - b.version);
        out({ versions, damaged }, lines.map((l) => l.text).join('\n') || '(no versions)', damaged.length === 0 ? 0 : 1);
        // As `check`: a script tells a damaged state by the exit status, not by parsing the list.
        return damaged.length === 0 ? 0 : 1;
      });
    case 'prune': {
      const keep = int(v, 'keep', undefined, 1, Number.MAX_SAFE_INTEGER);
      return withState(dir, false, async (state) => {
        // Stopped before it starts; once started, a prune runs to its end (a second signal stops it at once).
        interrupt.check();
        await state.prune({ keepLast: keep, vacuum: v.vacuum === true });
        const versions = state.versions().map((x) => x.version);
        out({ kept: versions }, `kept versions ${versions.join(', ')}`);
        return 0;
      });
    }
    case 'rollback': {
      const to = int(v, 'to', undefined, 1, Number.MAX_SAFE_INTEGER);
      return withState(dir, false, async (state) => {
        interrupt.check();
        await state.rollback(to);
        const head = state.head()!;
        out({ version: head.version, root: toHex(head.root) }, `head is version ${head.version}, root ${toHex(head.root)}`);
        return 0;
      });
    }
    case 'check': {
      // Opening decodes every version record: one that fails names its version and is left out,
      // but a failure that names none (the store record, a version key) leaves nothing to check.
      const opened = await openState({ path: dir, readOnly: true, mmapBytes: WHOLE_STATE_MMAP_BYTES }).catch((e: unknown) => e as Error & { code?: string });
      if (!('versions' in opened)) {
        if (opened.code !== 'STORE_CORRUPT') throw opened;
        out({ versions: null, damaged: [{ version: 'records', code: opened.code, message: opened.message }], gone: [] }, `the version records: ${opened.code} ${opened.message}`, 1);
        return 1;
      }
      const state = opened;
      try {
        const records = state.damagedVersions();
        const damaged: { version: number; code: string; message: string }[] = records.map(({ version, error }) => ({ version, code: error.code, message: error.message }));
        // Versions a writer beside this check pruned or rolled back meanwhile: gone, not damaged.
        const gone: number[] = [];
        const versions = state.versions();
        for (const { version, root, chunkCount } of versions) {
          try {
            // Each chunk's envelope read through the cache checks every record on its way against
            // its hash (its path's nodes and their key copies, its chunk record and base, its
            // entries): every record a version uses, with bounded memory. Each envelope is then
            // verified against the version's root, as a peer's client would: no hash covers the
            // version record's counts against its tree's.
            for (let i = 0; i < chunkCount; i++) {
              if (i % 256 === 0) await interrupt.checkpoint();
              const envelope = await state.exportChunk(i, { version });
              try {
                verifyChunk(root, i, envelope).free();
              } catch (e) {
                throw new StoreError('STORE_CORRUPT', `chunk ${i} does not verify against the version's root (${(e as { code?: string }).code})`);
              }
            }
          } catch (e) {
            if (interrupt.signal.aborted) throw e;
            const code = (e as { code?: unknown }).code;
            if (code === 'VERSION_UNKNOWN') gone.push(version);
            else damaged.push({ version, code: typeof code === 'string' ? code : 'FAILED', message: e instanceof Error ? e.message : String(e) });
          }
        }
        damaged.sort((a, b) => a.version - b.version);
        const verified = versions.length + records.length - gone.length - damaged.length;
        const goneText = gone.length === 0 ? '' : `; ${gone.length} pruned or rolled back meanwhile by another process (${gone.join(', ')})`;
        out(
          // `versions`: every version with a record, damaged or not, less those gone.
          { versions: versions.length + records.length - gone.length, damaged, gone },
          damaged.length === 0
            ? `${verified} versions verified${goneText}`
            : [...damaged.map((d) => `version ${d.version}: ${d.code} ${d.message}`), `${verified} other versions verified${goneText}`].join('\n'),
          damaged.length === 0 ? 0 : 1,
        );
        return damaged.length === 0 ? 0 : 1;
      } finally {
        await state.close();
      }
    }
  }
}

/** Whether `argv` names a state directory (`--db`), so that get and range read it instead of peers. */
export function hasDb(argv: readonly string[]): boolean {
  return argv.some((a) => a === '--db' || a.startsWith('--db='));
}

