// The model runs the IndexedDB page makes, shared with the spec that checks them.

import type { Caches } from '../../../packages/store/test/model.ts';

/** One model run: chunk capacity, seed, steps, key domain, and the store's caches. */
export interface ModelRun {
  readonly capacity: number;
  readonly seed: number;
  readonly steps: number;
  readonly domain: number;
  readonly caches?: Caches;
}

export const MODEL_RUNS: readonly ModelRun[] = [
  { capacity: 2, seed: 21, steps: 150, domain: 60 },
  { capacity: 3, seed: 22, steps: 150, domain: 60 },
  { capacity: 4, seed: 23, steps: 150, domain: 60 },
  { capacity: 256, seed: 24, steps: 200, domain: 800 },
  // Every put writes the batch's changed chunks ahead: IndexedDB deletes what a later piece discards before its puts.
  { capacity: 3, seed: 25, steps: 150, domain: 60, caches: { cacheBytes: 0, batchBytes: 0 } },
];

export const runName = (r: ModelRun) => `C = ${r.capacity}, seed ${r.seed}, ${r.steps} steps${r.caches?.batchBytes === 0 ? ', written ahead at every put' : ''}`;
