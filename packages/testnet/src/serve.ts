/**
 * `bpavl-testnet serve`: `bpavl serve` with the test network's options, for
 * tests, `npm run bench:sync` and the demo. Everything else is the serving
 * peer's CLI (`packages/peer/src/cli.ts`).
 * @module
 */

import { MAX_TIMER_MS } from '@bpavl/light-client/sync';
import { COMMANDS, type OptionValues, type ServeExtension, serveCommand, UsageError } from '../../peer/src/cli.ts';
import { toHex } from '../../peer/src/source.ts';
import { buildWorkloadTree, workloadEntry } from '../../peer/src/workload.ts';
import { advanceOnStdin } from './advance.ts';
import { baselineBuilder, DEFAULT_BASELINE_CHUNK_BYTES } from './baseline.ts';
import { BYZANTINE_MODES, Byzantine, DEFAULT_SLOW_MS, parseByzantine } from './byzantine.ts';
import { testnetHook } from './hook.ts';

/** Writes per batch of a moving head, and versions it serves at once. */
const DEFAULT_ADVANCE_WRITES = 100;
const DEFAULT_KEEP_VERSIONS = 16;

const USAGE = `
Test network (packages/testnet):
  --byzantine MODE[:RATE]  lie on RATE (0 < RATE ≤ 1, default 1) of the CHUNK, PROOF, MULTIPROOF,
                       RANGE and catch-up (NODES, LEAVES, ENTRIES) answers.
                       MODE: ${BYZANTINE_MODES.join(', ')}
                       (see packages/testnet/README.md for what each does)
  --byzantine-seed S   seed of the RNG that picks the lies (default: --seed)
  --slow-ms MS         delay of the "slow" mode (default ${DEFAULT_SLOW_MS})
  --baseline           also serve the workload as the paper's Baseline (an AVL+ tree, one entry per
                       leaf, chunks without proofs; benchmark-only kinds 240 BASELINE_CHUNK and
                       241 BASELINE_ROOTS, spec/benchmarks.md). Needs @bpavl/baseline-wasm built; not with --file
  --baseline-chunk-bytes N  Baseline chunk size (default ${DEFAULT_BASELINE_CHUNK_BYTES})
  --delay-ms D         emulate a link with one-way delay D ms: every response is held back 2·D
                       (the round trip; requests are not delayed). Default 0
  --rate-mb-s R        emulate a link of R megabytes (10^6 bytes) per second per connection:
                       a token bucket (64 KiB deep) paces each connection's output. Default unlimited
  --advance-on-stdin   a moving head (the demo's): each line "advance" on stdin commits the next
                       batch of the workload's seeded write stream and serves the new version; prints
                       {step, version, root, entryCount, chunkCount} (a JSON line with --json). Not with --db
  --advance-writes K   writes per batch (default ${DEFAULT_ADVANCE_WRITES})
  --keep-versions N    versions served at once while the head moves, the newest included (default ${DEFAULT_KEEP_VERSIONS})
  --predate-catchup    answer the catch-up kinds (NODES, LEAVES, ENTRIES, MULTILEAVES, MULTIENTRIES)
                       BAD_REQUEST, as a peer from before them: a catch-up then fetches every chunk whole
`;

function wrapUsage<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

function int(v: OptionValues, name: string, def: number, min: number, max: number): number {
  const text = v[name];
  if (text === undefined) return def;
  if (typeof text !== 'string' || !/^\d+$/.test(text)) throw new UsageError(`--${name} must be a non-negative integer, got "${text}"`);
  const n = Number(text);
  if (n < min || n > max) throw new UsageError(`--${name} must be in ${min} … ${max}, got ${text}`);
  return n;
}

/** A positive rate in MB/s (a decimal number), or undefined. */
function rate(text: unknown): number | undefined {
  if (text === undefined) return undefined;
  const v = Number(text);
  if (typeof text !== 'string' || !/^\d+(\.\d+)?$/.test(text) || !(v > 0) || v > 1e6) throw new UsageError(`--rate-mb-s must be a positive number of MB/s, got "${text}"`);
  return v;
}

function seed(text: unknown, name: string): bigint | undefined {
  if (text === undefined) return undefined;
  if (typeof text !== 'string' || !/^\d+$/.test(text) || BigInt(text) >= 1n << 64n) throw new UsageError(`--${name} must be an unsigned 64-bit integer, got "${text}"`);
  return BigInt(text);
}

/** Another seed for the `wrong-root` tree. */
function otherSeed(s: bigint): bigint {
  return s === (1n << 64n) - 1n ? s - 1n : s + 1n;
}

/** The test network's `serve` options. */
export const testnetServe: ServeExtension = {
  options: {
    byzantine: { type: 'string' },
    'byzantine-seed': { type: 'string' },
    'slow-ms': { type: 'string' },
    baseline: { type: 'boolean' },
    'baseline-chunk-bytes': { type: 'string' },
    'delay-ms': { type: 'string' },
    'rate-mb-s': { type: 'string' },
    'advance-on-stdin': { type: 'boolean' },
    'advance-writes': { type: 'string' },
    'keep-versions': { type: 'string' },
    'predate-catchup': { type: 'boolean' },
  },
  usage: USAGE,
  prepare(v, fromFile) {
    const byzSpec = typeof v.byzantine === 'string' ? wrapUsage(() => parseByzantine(v.byzantine as string)) : undefined;
    const byzSeed = seed(v['byzantine-seed'], 'byzantine-seed');
    const slowMs = int(v, 'slow-ms', DEFAULT_SLOW_MS, 0, MAX_TIMER_MS);
    if (v.baseline && fromFile) throw new UsageError('--baseline needs the workload (not --file)');
    if (v['baseline-chunk-bytes'] !== undefined && !v.baseline) throw new UsageError('--baseline-chunk-bytes needs --baseline');
    const chunkBytes = int(v, 'baseline-chunk-bytes', DEFAULT_BASELINE_CHUNK_BYTES, 1, 8 * 1024 * 1024 - 64);
    const delayMs = int(v, 'delay-ms', 0, 0, 60_000);
    const rateMBs = rate(v['rate-mb-s']);
    const link = delayMs > 0 || rateMBs !== undefined ? { delayMs, bytesPerSecond: (rateMBs ?? Infinity) * 1e6 } : undefined;
    const advance = v['advance-on-stdin'] === true;
    if (advance && v.db !== undefined) throw new UsageError('--advance-on-stdin needs a tree in memory (not --db)');
    if (!advance && (v['advance-writes'] !== undefined || v['keep-versions'] !== undefined)) {
      throw new UsageError('--advance-writes and --keep-versions need --advance-on-stdin');
    }
    const writes = int(v, 'advance-writes', DEFAULT_ADVANCE_WRITES, 1, 1_000_000);
    const keep = int(v, 'keep-versions', DEFAULT_KEEP_VERSIONS, 1, 1024);
    // Listening now: an "advance" sent while the tree loads waits for it.
    const commands = advance ? advanceOnStdin() : undefined;
    return async ({ workload, source, tree }) => {
      let baseline;
      if (v.baseline) {
        const builder = await baselineBuilder(chunkBytes);
        for (let i = 0; i < workload.entryCount; i++) builder.insert(...workloadEntry(workload.seed, i));
        baseline = builder.finish();
      }
      let byzantine: Byzantine | undefined;
      if (byzSpec !== undefined) {
        const otherTree =
          byzSpec.mode === 'wrong-root'
            ? buildWorkloadTree({ entryCount: Math.max(workload.entryCount, 1), seed: otherSeed(workload.seed) }, workload.capacity).head()
            : undefined;
        byzantine = new Byzantine({ ...byzSpec, seed: byzSeed ?? workload.seed, slowMs, ...(otherTree ? { otherTree } : {}) });
      }
      const lines: string[] = [];
      if (baseline) lines.push(`baseline  ${toHex(baseline.root)} (${baseline.chunks.length} chunks, ${baseline.bytes} bytes; benchmark-only kinds 240, 241)`);
      if (link) lines.push(`link      ${delayMs} ms one way (responses +${2 * delayMs} ms), ${rateMBs === undefined ? 'unlimited' : `${rateMBs} MB/s`} per connection (emulated)`);
      if (byzantine) lines.push(`byzantine ${byzantine.mode}:${byzantine.rate}  (this peer LIES)`);
      const started =
        commands && tree && source
          ? () =>
              commands.start(tree, source, { seed: workload.seed, entryCount: workload.entryCount, writes, keep }, (a) =>
                v.json === true ? JSON.stringify(a) : `advanced  step ${a.step}: version ${a.version}, root ${a.root}, ${a.entryCount} entries`,
              )
          : undefined;
      if (started) {
        lines.push(`advance   on each "advance" line of stdin: ${writes} writes, the last ${keep} versions served`);
      }
      const predateCatchUp = v['predate-catchup'] === true;
      if (predateCatchUp) lines.push('predates  the catch-up kinds: answers them BAD_REQUEST');
      const hook = testnetHook({ byzantine, baseline, link, predateCatchUp });
      return {
        ...(hook ? { hook } : {}),
        info: {
          byzantine: byzantine ? { mode: byzantine.mode, rate: byzantine.rate } : null,
          baseline: baseline ? { root: toHex(baseline.root), chunkCount: baseline.chunks.length, bytes: baseline.bytes, chunkBytes } : null,
          link: link ? { delayMs, rttMs: 2 * delayMs, rateMBs: rateMBs ?? null } : null,
          advance: advance ? { writes, keep } : null,
          predateCatchUp,
        },
        lines,
        ...(started ? { started } : {}),
      };
    };
  },
};

/** The test network's commands: the peer's, with `serve` extended. */
export const TESTNET_COMMANDS = { ...COMMANDS, serve: serveCommand(testnetServe) };
