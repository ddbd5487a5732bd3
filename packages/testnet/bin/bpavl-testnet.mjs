#!/usr/bin/env node
// `bpavl-testnet`: the `bpavl` CLI whose `serve` also lies, serves the
// Baseline and emulates links (packages/testnet/src/serve.ts). Runs from
// src/ with Node's type stripping (Node ≥ 22.18); @bpavl/wasm and
// @bpavl/light-client must be built.
import { main } from '../../peer/src/cli.ts';
import { TESTNET_COMMANDS } from '../src/serve.ts';

process.exitCode = await main(process.argv.slice(2), TESTNET_COMMANDS, 'bpavl-testnet');
// A served peer resolves only once it has stopped; exit even if a library left a handle open.
setTimeout(() => process.exit(), 200).unref();
