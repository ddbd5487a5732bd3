/**
 * `@bpavl/light-client/wire`: the sync wire protocol of `spec/wire.md`
 * (framing, messages, limits), shared by the sync engine and serving peers.
 * @module
 */

export * from './constants.js';
export * from './errors.js';
export * from './frame.js';
export * from './messages.js';
/** The key and value limits (`encoding.md`), which bound what one answer must carry. */
export { MAX_KEY_LEN, MAX_VALUE_LEN } from '../constants.js';
