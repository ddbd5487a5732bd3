// The model runs the IndexedDB page makes, shared with the spec that checks them.

/** One model run: chunk capacity, seed, steps and key domain. */
export const MODEL_RUNS = [
  { capacity: 2, seed: 21, steps: 150, domain: 60 },
  { capacity: 3, seed: 22, steps: 150, domain: 60 },
  { capacity: 4, seed: 23, steps: 150, domain: 60 },
  { capacity: 256, seed: 24, steps: 200, domain: 800 },
] as const;

export const runName = (r: (typeof MODEL_RUNS)[number]) => `C = ${r.capacity}, seed ${r.seed}, ${r.steps} steps`;
