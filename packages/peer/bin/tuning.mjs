// The memory settings `bpavl` starts its long commands with (bin/bpavl.mjs):
// a small V8 young generation, and glibc's allocator held to one arena and
// giving large blocks back. Shared with the benchmarks that run the CLI's
// path in a process of their own (bench/files.mjs).

/** Node flags, before the user's own (which come after and win). */
export const TUNED_NODE_FLAGS = ['--max-semi-space-size=4'];

/** `env` with glibc's settings unless it sets them, marked tuned (`BPAVL_NODE_TUNED=1`). */
export function tunedEnv(env) {
  return { MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '65536', ...env, BPAVL_NODE_TUNED: '1' };
}
