/**
 * `@bpavl/storage/node`: the Node backend (SQLite through the built-in
 * `node:sqlite`; see sqlite.ts and docs/storage.md for why).
 * @module
 */
export { holdsNoStore, openNodeBackend, type NodeBackendOptions } from './sqlite.ts';
