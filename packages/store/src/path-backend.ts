/**
 * `#path-backend` outside Node (browsers and their bundlers): a state
 * there lives in a backend the app opens (`openIndexedDbBackend` of
 * `@bpavl/storage/indexeddb`), never at a path.
 * @module
 */
import type { NodeBackendOptions } from '../../storage/src/node/index.ts';
import type { StorageBackend } from '../../storage/src/port.ts';

export async function openPathBackend(_options: NodeBackendOptions): Promise<StorageBackend> {
  throw new TypeError('opening a state by path needs Node; pass `backend` instead (e.g. openIndexedDbBackend)');
}

export function holdsNoStore(_path: string): boolean {
  throw new TypeError('a state directory needs Node; elsewhere a state lives in a backend the app opens');
}
