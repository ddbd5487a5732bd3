/**
 * `@bpavl/light-client`: verify bpavl proofs and chunks against a trusted
 * root (`spec/`). The root entry re-exports `@bpavl/light-client/verify`; the
 * wire protocol and state sync (with its transports) have their own subpaths,
 * `@bpavl/light-client/wire` and `@bpavl/light-client/sync`.
 *
 * @example
 * ```ts
 * import { verifyChunk } from '@bpavl/light-client';
 * const chunk = verifyChunk(root, 0, envelope);
 * ```
 * @module
 */

export * from './verify.js';
