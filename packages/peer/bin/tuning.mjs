// The memory settings `bpavl` starts its long commands with (bin/bpavl.mjs):
// a small V8 young generation (and for a sync, V8 tuned for size), and
// glibc's allocator held to one arena and giving large blocks back. Shared
// with the benchmarks that run the CLI's path in a process of their own
// (bench/files.mjs).

/** Node flags of every long command, before the user's own (which come after and win). */
const TUNED_NODE_FLAGS = ['--max-semi-space-size=4'];

/**
 * The Node flags `command` starts with. A sync adds `--optimize-for-size`,
 * which makes V8 collect its old generation sooner, where the sync's dead
 * chunk buffers wait: a 1M sync from 9 peers peaked at 205–213 MiB with it
 * and 282–291 MiB without, about 10 % slower. Not for the bulk load, which
 * took 236.7 s at 10M with it instead of 188.6 (docs/store.md, "From 9
 * peers: dead buffers, and `--optimize-for-size`").
 */
export function nodeFlagsFor(command) {
  return command === 'sync' ? [...TUNED_NODE_FLAGS, '--optimize-for-size'] : TUNED_NODE_FLAGS;
}

/** `env` with glibc's settings unless it sets them, marked tuned (`BPAVL_NODE_TUNED=1`). */
export function tunedEnv(env) {
  return { MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '65536', ...env, BPAVL_NODE_TUNED: '1' };
}
