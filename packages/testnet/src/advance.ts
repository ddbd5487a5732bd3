/**
 * A moving head for the demo network (`bpavl-testnet serve
 * --advance-on-stdin`): each line `advance` on stdin applies the next batch
 * of the workload's seeded write stream (`headWrites`), commits, serves the
 * new version next to the last few, and prints it. Peers started from the
 * same tree and told to advance the same number of times commit the same
 * roots, so a launcher that drives them all publishes one moving head.
 * @module
 */

import { createInterface } from 'node:readline';
import type { Tree } from '@bpavl/wasm';
import { type MovingHead, toHex } from '../../peer/src/source.ts';
import { headWrites } from '../../peer/src/workload.ts';

/** What a moving head writes, and how much of its past it serves. */
export interface AdvanceOptions {
  /** The workload's seed and entry count (the stream's keys are its keys). */
  seed: bigint;
  entryCount: number;
  /** Writes per batch. */
  writes: number;
  /** Versions served at once (the newest included). */
  keep: number;
}

/** What one advance committed. */
export interface Advanced {
  step: number;
  version: number;
  root: string;
  entryCount: number;
  chunkCount: number;
}

/** Applies batch `step` to `tree`, commits, and serves the new head from `source`. */
export function advanceHead(tree: Tree, source: MovingHead, opts: AdvanceOptions, step: number): Advanced {
  for (const w of headWrites(opts.seed, opts.entryCount, step, opts.writes)) {
    if (w.value === undefined) tree.remove(w.key);
    else tree.insert(w.key, w.value);
  }
  const { version, root } = tree.commit();
  const head = tree.head();
  // Answers from memory are made synchronously: nothing holds a version once it is no longer served, so free it now (not at some later GC).
  for (const old of source.add(head, opts.keep)) (old as { free?: () => void }).free?.();
  return { step, version, root: toHex(root), entryCount: tree.len, chunkCount: head.chunkCount };
}

/**
 * Reads `advance` lines from stdin from now on (lines that come before the
 * tree is ready wait for it); `start` advances `tree` once for each, and
 * prints each new head as `print` formats it.
 */
export function advanceOnStdin(): { start(tree: Tree, source: MovingHead, opts: AdvanceOptions, print: (a: Advanced) => string): void } {
  let step = 0;
  let pending = 0;
  let advance: (() => void) | undefined;
  createInterface({ input: process.stdin }).on('line', (line) => {
    const command = line.trim();
    if (command === '') return;
    if (command !== 'advance') {
      process.stderr.write(`bpavl serve: unknown stdin command "${command.slice(0, 40)}" (only "advance")\n`);
      return;
    }
    if (advance) advance();
    else pending++;
  });
  return {
    start(tree, source, opts, print) {
      advance = () => process.stdout.write(`${print(advanceHead(tree, source, opts, ++step))}\n`);
      for (; pending > 0; pending--) advance();
    },
  };
}
