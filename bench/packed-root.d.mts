// Types of packed-root.mjs, for the test that checks it against spec/vectors/bulk_load.json.

/** Takes `n` entries in ascending key order, then gives the root. */
export function packedRoot(
  n: number,
  capacity: number,
): {
  push(key: Uint8Array, value: Uint8Array): void;
  root(): Uint8Array;
};
