// The serving peer's test clients (packages/peer/test/support.ts), and the
// test network's CLI as a child process.

import { fileURLToPath } from 'node:url';
import { spawnCli } from '../../peer/test/support.ts';

export * from '../../peer/test/support.ts';

/** The `bpavl-testnet` CLI's entry. */
export const TESTNET_BIN = fileURLToPath(new URL('../bin/bpavl-testnet.mjs', import.meta.url));

/** Runs `bpavl-testnet …args` as a child process (see `spawnCli`). */
export function spawnTestnet(args: string[], stdin: 'ignore' | 'pipe' = 'ignore', ms = 30_000) {
  return spawnCli(args, stdin, ms, TESTNET_BIN);
}
