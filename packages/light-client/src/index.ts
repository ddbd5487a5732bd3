/**
 * `@bpavl/light-client`: verify bpavl proofs and chunks against a trusted
 * root (`spec/`). For now this re-exports `@bpavl/light-client/verify`; state
 * sync and transports will be added beside it, each behind its own subpath.
 *
 * @example
 * ```ts
 * import { verifyChunk } from '@bpavl/light-client';
 * const chunk = verifyChunk(root, 0, envelope);
 * ```
 * @module
 */

export * from './verify.js';
