/**
 * Argument checks that come before any spec check, in noble's convention:
 * a wrong type throws `TypeError`, a wrong value that is not a format issue
 * throws `RangeError`. Spec limits on keys, values and queries are not
 * checked here: they are `ProofError`s (`spec/errors.md`) checked by the
 * verifiers in the spec's order.
 * @module
 */

import { HASH_LEN } from './constants.js';
import { addressKind, type Connect, MAX_TIMER_MS } from './transport/types.js';

/** Whether `a` is a Uint8Array, also from another realm (noble's `isBytes`). Internal. */
function isBytes(a: unknown): a is Uint8Array {
  return a instanceof Uint8Array || (ArrayBuffer.isView(a) && a.constructor.name === 'Uint8Array');
}

/** `TypeError` unless `value` is a Uint8Array. Internal. */
export function bytesArg(value: unknown, name: string): Uint8Array {
  if (!isBytes(value)) throw new TypeError(`${name}: expected Uint8Array, got ${typeof value}`);
  return value;
}

/** `TypeError` unless a Uint8Array, `RangeError` unless 32 bytes. Internal. */
export function rootArg(value: unknown): Uint8Array {
  const root = bytesArg(value, 'root');
  if (root.length !== HASH_LEN) throw new RangeError(`root: expected 32 bytes, got ${root.length}`);
  return root;
}

/**
 * Peer addresses: `TypeError` unless an array of strings; with the default
 * connect (`connect` not given), `RangeError` for one it cannot dial (not
 * `ws://`, `wss://` or a multiaddr), which would otherwise only show as
 * that peer's `CONNECT_FAILED` once everything else had failed. Internal.
 */
export function peersArg(peers: unknown, connect: Connect | undefined): void {
  if (!Array.isArray(peers) || !peers.every((p) => typeof p === 'string')) throw new TypeError('peers: expected an array of address strings');
  const odd = connect === undefined ? peers.find((p) => addressKind(p) === undefined) : undefined;
  if (odd !== undefined) throw new RangeError(`peers: ${JSON.stringify(odd)} is neither a ws:// or wss:// URL nor a multiaddr`);
}

/** `undefined`/`null` (unbounded) or a Uint8Array, else `TypeError`. Internal. */
export function optBytesArg(value: unknown, name: string): Uint8Array | undefined {
  return value === undefined || value === null ? undefined : bytesArg(value, name);
}

/** `TypeError` unless a number, `RangeError` unless a safe integer ≥ 0. Internal. */
export function indexArg(value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`index: expected number, got ${typeof value}`);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new RangeError(`index: expected a safe integer ≥ 0, got ${value}`);
  return value;
}

/**
 * `TypeError` unless a number. Any number that is not an integer in
 * 1 … 65536 becomes 0, which the spec check made later in the spec's order
 * rejects as `QUERY_INVALID` (as in Rust and WASM). Internal.
 */
export function limitArg(value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`limit: expected number, got ${typeof value}`);
  return Number.isInteger(value) && value >= 1 && value <= 65536 ? value : 0;
}

/**
 * An optional count: `undefined` (the default applies), else `TypeError`
 * unless a number and `RangeError` unless an integer in `min … max`. Internal.
 */
export function optCountArg(value: unknown, name: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (value === undefined) return;
  if (typeof value !== 'number') throw new TypeError(`${name}: expected number, got ${typeof value}`);
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new RangeError(`${name}: expected an integer in ${min} … ${max}, got ${value}`);
}

/**
 * An optional duration in milliseconds: `undefined` (the default applies),
 * else `TypeError` unless a number and `RangeError` unless above 0 (at
 * least 0 with `zero`) and at most {@link MAX_TIMER_MS}. Internal.
 */
export function optMsArg(value: unknown, name: string, zero = false): void {
  if (value === undefined) return;
  if (typeof value !== 'number') throw new TypeError(`${name}: expected number, got ${typeof value}`);
  if (!(value >= 0 && value <= MAX_TIMER_MS) || (value === 0 && !zero)) throw new RangeError(`${name}: expected ms ${zero ? '≥' : '>'} 0 and ≤ ${MAX_TIMER_MS}, got ${value}`);
}
