/**
 * `@bpavl/storage`: the storage port of the bpavl state store
 * ({@link StorageBackend}), its error type, and the in-memory backend. The
 * Node backend is `@bpavl/storage/node`, the browser one
 * `@bpavl/storage/indexeddb`; this entry loads no `node:` module.
 * @module
 */
export type { BackendOptions, CompactOptions, ScanRange, StorageBackend, WriteBatch } from './port.ts';
export { isStorageError, STORAGE_ERROR_CODES, StorageError, type StorageErrorCode } from './errors.ts';
export { MAX_KEY_BYTES } from './checks.ts';
export { MemoryDatabase, openMemoryBackend, type MemoryBackendOptions } from './memory.ts';
