/**
 * `MULTILEAVES` and `MULTIENTRIES` answers (`spec/wire.md`, "Catch-up"):
 * the `LEAVES` or `ENTRIES` of several chunks in one frame, in the order
 * asked, cut after the most parts that fit the response limit (at least
 * one; the last `ENTRIES` part may itself be cut). One builder, driven
 * synchronously for a tree in memory and asynchronously for one read from
 * storage.
 * @module
 */

import { encodeMultiPayload, Kind, MAX_KEY_LEN, MAX_VALUE_LEN, type Request } from '@bpavl/light-client/wire';
import type { ServedTree, StoredTree } from './source.ts';

/** A `MULTILEAVES` or `MULTIENTRIES` request. */
export type MultiRequest = Extract<Request, { kind: typeof Kind.MultiLeaves | typeof Kind.MultiEntries }>;

/** One part to export: a chunk's leaves, or its entries at `bitmap` within `maxBytes`. */
interface PartQuery {
  path: Uint8Array;
  bitmap?: Uint8Array;
  maxBytes: number;
}

/** Room one part's length prefix and the answer's k take (k ≤ 256: 2 bytes; a part < 8 MiB: 4). */
const PREFIX_BYTES = 4;
const COUNT_BYTES = 2;
/**
 * More than the largest `ENTRIES` part of one entry (k, a 1 KiB key and a
 * 64 KiB value with their lengths, and the 8 bytes the core keeps free).
 * A part is asked only while this much is left, so every part carries an
 * entry; and an `ENTRIES` part is cut only when its next entry does not
 * fit, which leaves less than this, so a cut part is always the last.
 */
const ROOM_FOR_AN_ENTRY = 1 + 2 + MAX_KEY_LEN + 3 + MAX_VALUE_LEN + 8 + PREFIX_BYTES + 8;

/** Builds one answer part by part. */
class MultiAnswer {
  readonly #req: MultiRequest;
  readonly #maxBytes: number;
  readonly #parts: Uint8Array[] = [];
  #used = COUNT_BYTES;
  #full = false;

  constructor(req: MultiRequest, maxBytes: number) {
    this.#req = req;
    this.#maxBytes = maxBytes;
  }

  /** The next part to export, or `undefined` when every chunk is in or no more fit. */
  next(): PartQuery | undefined {
    const i = this.#parts.length;
    const left = this.#maxBytes - this.#used - PREFIX_BYTES;
    if (this.#full) return undefined;
    if (this.#req.kind === Kind.MultiLeaves) {
      const path = this.#req.paths[i];
      return path === undefined ? undefined : { path, maxBytes: left };
    }
    const chunk = this.#req.chunks[i];
    if (chunk === undefined || (i > 0 && left < ROOM_FOR_AN_ENTRY)) return undefined;
    return { ...chunk, maxBytes: left };
  }

  /** Adds the part `next` asked for; a part that does not fit ends the answer without it. */
  add(part: Uint8Array, query: PartQuery): void {
    if (this.#parts.length > 0 && part.length > query.maxBytes) {
      this.#full = true;
      return;
    }
    this.#parts.push(part);
    this.#used += PREFIX_BYTES + part.length;
  }

  finish(): Uint8Array {
    return encodeMultiPayload(this.#parts);
  }
}

/** The answer from a tree in memory, or `undefined` if it serves no catch-up pieces (`BAD_REQUEST`). */
export function multiAnswer(tree: ServedTree, req: MultiRequest, maxBytes: number): Uint8Array | undefined {
  if (tree.exportLeaves === undefined || tree.exportEntries === undefined) return undefined;
  const answer = new MultiAnswer(req, maxBytes);
  for (let q = answer.next(); q !== undefined; q = answer.next()) {
    answer.add(q.bitmap === undefined ? tree.exportLeaves!(q.path) : tree.exportEntries!(q.path, q.bitmap, q.maxBytes), q);
  }
  return answer.finish();
}

/** The answer from a version read from storage, or `undefined` if it serves no catch-up pieces (`BAD_REQUEST`). */
export async function storedMultiAnswer(tree: StoredTree, req: MultiRequest, maxBytes: number): Promise<Uint8Array | undefined> {
  if (tree.exportLeaves === undefined || tree.exportEntries === undefined) return undefined;
  const answer = new MultiAnswer(req, maxBytes);
  for (let q = answer.next(); q !== undefined; q = answer.next()) {
    answer.add(q.bitmap === undefined ? await tree.exportLeaves!(q.path) : await tree.exportEntries!(q.path, q.bitmap, q.maxBytes), q);
  }
  return answer.finish();
}
