/**
 * Byzantine serving modes, for tests and the demo: a peer that lies on a
 * fraction of its answers, in one of several ways, chosen by a seeded RNG so
 * runs are reproducible. Only `CHUNK`, `PROOF`, `RANGE`, `MULTIPROOF` and
 * the catch-up answers (`NODES`, `LEAVES`, `ENTRIES`, and `MULTILEAVES` and
 * `MULTIENTRIES` in their first part, as that chunk's `LEAVES` or `ENTRIES`)
 * that would be `OK` are ever lied on; `ROOTS` and error statuses
 * stay honest. A `MULTIPROOF` answer is lied on as a whole: `corrupt-*` in
 * its first revealed entry or last byte, `wrong-root` with the other tree's
 * multiproof, and the key lies about one asked key, picked at random (see
 * {@link lieInMultiproof}).
 *
 * | mode | what the peer does | what an honest client sees |
 * |------|--------------------|----------------------------|
 * | `corrupt-value` | flips a bit in an entry's value (CHUNK, RANGE, absence PROOF: in the entries; present PROOF: the value sent beside the proof); catch-up answers: NODES the first node's left hash, LEAVES the first entry hash, ENTRIES the first value | `ROOT_MISMATCH`; `NODE_MISMATCH`, `LEAVES_MISMATCH`, `ENTRY_MISMATCH` |
 * | `corrupt-key` | flips the low bit of a key's last byte (CHUNK, RANGE, absence PROOF; a present PROOF carries no key and is answered honestly) | `ROOT_MISMATCH` (rarely `KEYS_NOT_SORTED`, `ABSENCE_INVALID`) |
 * | `corrupt-proof` | CHUNK: flips a bit in a chunk-path sibling hash (single-chunk tree: bumps the key-height); PROOF, RANGE: flips a bit in the last byte of the proof | `ROOT_MISMATCH` (single chunk: `KEY_HEIGHT_MISMATCH`) |
 * | `wrong-index` | CHUNK: sends the valid envelope of chunk `(i + 1) mod n` (honest when n = 1); NODES, LEAVES, ENTRIES at a path: the valid answer for the sibling position (honest at the top, or when the sibling has no such piece) | `CHUNK_INDEX_MISMATCH`; `NODE_MISMATCH`, `LEAVES_MISMATCH`, `ENTRY_MISMATCH` |
 * | `wrong-root` | sends a valid answer from another tree (same size, another seed) | `ROOT_MISMATCH` |
 * | `random-bytes` | replaces the payload with as many random bytes | a decoding code or `ROOT_MISMATCH` |
 * | `truncate` | sends the frame's length prefix and half its body, then nothing more on that connection | a response that never completes (timeout) |
 * | `oversize` | sends a length prefix declaring 8 MiB + 1 bytes and 1 KiB of body, then nothing more | `FRAME_TOO_LARGE` at the prefix |
 * | `slow` | answers correctly after a delay (`slowMs`, default 1.5 s) | late answers |
 * | `silent` | never answers (the request does not count as in flight) | timeouts |
 * | `disconnect` | sends half the response frame, then closes the connection | a closed connection mid-frame |
 * | `wrong-key` | PROOF: a valid existence proof of another key of the tree, with its value | `ROOT_MISMATCH` (the proof does not fold for the asked key) |
 * | `absence-for-present` | PROOF of a present key: a valid absence proof of the absent key just after it | `ABSENCE_INVALID` |
 * | `existence-for-absent` | PROOF of an absent key: "present", with a neighbour's value and valid existence proof | `ROOT_MISMATCH` |
 * | `range-cut` | RANGE: the proof of the first result only, as if the answer had to be cut to fit (`spec/wire.md`, "Requests") | a valid incomplete page: accepted, the range goes on from its successor |
 * | `range-cut-empty` | RANGE whose start is not a key: the window of its left neighbour and first result, an incomplete answer with no results | `RANGE_INVALID` |
 * | `busy` | answers `BUSY` instead | a peer that never serves (unusable, `spec/wire.md` "Giving up") |
 * | `twice` | sends the honest response twice on the connection | a duplicate response: a protocol fault |
 * | `twice-corrupt` | sends the honest response, then a copy with `corrupt-value`'s flipped bit | a duplicate response: a protocol fault |
 * | `swap-kinds` | NODES, half the time: a node of height 2 and 3 chunks after the first gets its kinds swapped and the answer is cut after it; otherwise (or with none) the first node's kinds are swapped (such a node; cut after it) or changed to what its height and chunk count forbid (`spec/catchup.md`, "Kinds") | the node asked again; `TRUNCATED`, `KINDS_MISMATCH` |
 *
 * `wrong-key`, `absence-for-present` and `existence-for-absent` are the query
 * client's lies (`@bpavl/light-client/client`): they only touch PROOF and
 * MULTIPROOF answers and answer the rest honestly. In a MULTIPROOF answer
 * each is the multiproof of another set of keys, valid for the tree, which
 * hides or replaces one asked key's entry: `wrong-key` proves a present
 * key's neighbour instead, `absence-for-present` its two neighbours instead
 * (showing it absent), `existence-for-absent` an absent key's right
 * neighbour alone; a client sees `ABSENCE_INVALID`. The liar checks each lie
 * against the asked keys and tells only lies that fail.
 *
 * `MODE:rate` lies on that fraction of eligible answers (0 < rate ≤ 1, default 1).
 *
 * A peer that serves versions from storage (`serve --db`) has no tree in
 * memory to draw lies from: it tells the generic lies, `corrupt-*`,
 * `twice-corrupt` and `wrong-root`, and answers honestly otherwise.
 *
 * Baseline chunks (the benchmark-only `BASELINE_CHUNK`, `./baseline.ts`) are
 * lied on at the same rate, from the same RNG: `corrupt-value` / `corrupt-key`
 * flip the same bit in the chunk's first leaf record (a chunk of inner
 * records only is answered honestly), `wrong-index` sends chunk `(i + 1) mod
 * n`, `random-bytes` and the transport modes as above; `corrupt-proof` and
 * `wrong-root` answer them honestly (a Baseline chunk has no proof, and no
 * other Baseline tree is built). `BASELINE_ROOTS` stays honest.
 * @module
 */

import { createHash } from 'node:crypto';
import { verifyMultiproof, verifyRange } from '@bpavl/light-client/verify';
import {
  decodeMultiproofPayload,
  encodeMultiPayload,
  encodeMultiproofPayload,
  encodeProofPayload,
  Kind,
  MAX_RESPONSE_BYTES,
  multiParts,
  type Request,
} from '@bpavl/light-client/wire';
import { BaselineKind, type BaselineRequest, type BaselineServed } from './baseline.ts';
import { multiAnswer, type MultiRequest } from '../../peer/src/multi.ts';
import { proofOf } from '../../peer/src/proofs.ts';
import type { ServedTree } from '../../peer/src/source.ts';

/** The lies about which key a PROOF answer proves (see {@link lieAboutKey}). */
const PROOF_LIES = ['wrong-key', 'absence-for-present', 'existence-for-absent'] as const;

/** The misbehaviours a serving peer can be told to show. */
export const BYZANTINE_MODES = [
  'corrupt-value',
  'corrupt-key',
  'corrupt-proof',
  'wrong-index',
  'wrong-root',
  'random-bytes',
  'truncate',
  'oversize',
  'slow',
  'silent',
  'disconnect',
  ...PROOF_LIES,
  'range-cut',
  'range-cut-empty',
  'busy',
  'twice',
  'twice-corrupt',
  'swap-kinds',
] as const;

/** Default delay of `slow`. */
export const DEFAULT_SLOW_MS = 1500;

/** One of `BYZANTINE_MODES`. */
export type ByzantineMode = (typeof BYZANTINE_MODES)[number];

/** A parsed `--byzantine MODE[:rate]`. */
export interface ByzantineSpec {
  mode: ByzantineMode;
  /** Fraction of eligible answers lied on, in (0, 1]. */
  rate: number;
}

/** Everything a Byzantine peer needs. */
export interface ByzantineOptions extends ByzantineSpec {
  /** Seeds the RNG that picks which answers to lie on (and `random-bytes`). */
  seed: bigint;
  /** Delay of `slow`, in ms. */
  slowMs?: number;
  /** The other tree `wrong-root` answers from (required for that mode). */
  otherTree?: ServedTree;
}

/**
 * Parses `MODE` or `MODE:rate`. Throws `RangeError` for an unknown mode or a
 * rate outside (0, 1].
 *
 * @example
 * ```ts
 * parseByzantine('corrupt-value:0.25'); // { mode: 'corrupt-value', rate: 0.25 }
 * ```
 */
export function parseByzantine(text: string): ByzantineSpec {
  const [mode, rateText, ...rest] = text.split(':');
  if (rest.length > 0 || !(BYZANTINE_MODES as readonly string[]).includes(mode!)) {
    throw new RangeError(`unknown Byzantine mode "${text}" (one of ${BYZANTINE_MODES.join(', ')}, optionally :rate)`);
  }
  const rate = rateText === undefined ? 1 : Number(rateText);
  if (!(rate > 0 && rate <= 1) || rateText === '') throw new RangeError(`Byzantine rate must be in (0, 1], got "${rateText}"`);
  return { mode: mode as ByzantineMode, rate };
}

/**
 * sfc32, seeded from SHA-256 of the seed: small, fast and reproducible
 * (not cryptographic; it only picks when to lie).
 */
export class SeededRandom {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: bigint) {
    const s = new Uint8Array(8);
    new DataView(s.buffer).setBigUint64(0, BigInt.asUintN(64, seed));
    const h = createHash('sha256').update('bpavl byzantine rng').update(s).digest();
    this.#a = h.readUInt32LE(0);
    this.#b = h.readUInt32LE(4);
    this.#c = h.readUInt32LE(8);
    this.#d = h.readUInt32LE(12);
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** A uniform 32-bit unsigned integer. */
  u32(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** A uniform float in [0, 1). */
  next(): number {
    return this.u32() / 2 ** 32;
  }

  /** `n` random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const v = this.u32();
      for (let j = 0; j < 4 && i + j < n; j++) out[i + j] = (v >>> (8 * j)) & 0xff;
    }
    return out;
  }
}

/** How to lie on one answer (or `undefined`: answer honestly). */
export type Lie =
  /** Send this payload with status OK instead of the honest one. */
  | { kind: 'payload'; payload: Uint8Array }
  /** Send the frame's prefix and half its body, then mute the connection. */
  | { kind: 'truncate' }
  /** Send an over-limit prefix and a little body, then mute the connection. */
  | { kind: 'oversize' }
  /** Send the honest answer after `ms`. */
  | { kind: 'slow'; ms: number }
  /** Never answer. */
  | { kind: 'silent' }
  /** Send half the frame, then close. */
  | { kind: 'disconnect' }
  /** Answer BUSY. */
  | { kind: 'busy' }
  /** Send the honest response, then a second response to the same request with `payload`. */
  | { kind: 'twice'; payload: Uint8Array };

/**
 * Decides, answer by answer, whether and how to lie.
 *
 * @example
 * ```ts
 * const byz = new Byzantine({ mode: 'wrong-index', rate: 0.5, seed: 1n });
 * const lie = byz.decide(request, tree, honestPayload); // undefined: be honest
 * ```
 */
export class Byzantine {
  readonly mode: ByzantineMode;
  readonly rate: number;
  readonly #rng: SeededRandom;
  readonly #slowMs: number;
  readonly #other: ServedTree | undefined;
  /** How many answers were lied on so far. */
  lies = 0;

  constructor(opts: ByzantineOptions) {
    if (!(opts.rate > 0 && opts.rate <= 1)) throw new RangeError('rate must be in (0, 1]');
    if (opts.mode === 'wrong-root' && opts.otherTree === undefined) throw new TypeError('wrong-root needs otherTree');
    this.mode = opts.mode;
    this.rate = opts.rate;
    this.#rng = new SeededRandom(opts.seed);
    this.#slowMs = opts.slowMs ?? DEFAULT_SLOW_MS;
    this.#other = opts.otherTree;
  }

  /** The lie for this OK answer of `req` (whose honest payload is `payload`), if any. */
  decide(req: Request, tree: ServedTree | undefined, payload: Uint8Array): Lie | undefined {
    if (req.kind === Kind.Roots) return undefined;
    if (this.rate < 1 && this.#rng.next() >= this.rate) return undefined;
    const lie = this.#lie(req, tree, payload);
    if (lie !== undefined) this.lies++;
    return lie;
  }

  /** The lie for this OK answer of a Baseline request (whose honest payload is `payload`), if any. */
  decideBaseline(req: BaselineRequest, baseline: BaselineServed, payload: Uint8Array): Lie | undefined {
    if (req.kind !== BaselineKind.Chunk) return undefined;
    if (this.rate < 1 && this.#rng.next() >= this.rate) return undefined;
    const lie = this.#lieBaseline(req.index, baseline, payload);
    if (lie !== undefined) this.lies++;
    return lie;
  }

  /** The lies that do not depend on what is answered; `null` for the modes that do. */
  #genericLie(payload: Uint8Array): Lie | undefined | null {
    switch (this.mode) {
      case 'truncate':
      case 'oversize':
      case 'silent':
      case 'disconnect':
      case 'busy':
        return { kind: this.mode };
      case 'twice':
        return { kind: 'twice', payload };
      case 'slow':
        return { kind: 'slow', ms: this.#slowMs };
      case 'random-bytes':
        return tamper(this.#rng.bytes(payload.length));
      default:
        return null;
    }
  }

  #lieBaseline(index: number, baseline: BaselineServed, payload: Uint8Array): Lie | undefined {
    const generic = this.#genericLie(payload);
    if (generic !== null) return generic;
    switch (this.mode) {
      case 'twice-corrupt': {
        const second = corruptBaselineLeaf(payload, 'value');
        return second === undefined ? undefined : { kind: 'twice', payload: second };
      }
      case 'corrupt-value':
      case 'corrupt-key':
        return tamper(corruptBaselineLeaf(payload, this.mode === 'corrupt-key' ? 'key' : 'value'));
      case 'wrong-index':
        return baseline.chunks.length < 2 ? undefined : tamper(baseline.chunks[(index + 1) % baseline.chunks.length]);
      case 'corrupt-proof': // a Baseline chunk has no proof, and no other root to send
      case 'wrong-root':
      default: // the generic modes, answered above
        return undefined;
    }
  }

  #lie(req: Exclude<Request, { kind: typeof Kind.Roots }>, tree: ServedTree | undefined, payload: Uint8Array): Lie | undefined {
    const generic = this.#genericLie(payload);
    if (generic !== null) return generic;
    if (req.kind === Kind.MultiLeaves || req.kind === Kind.MultiEntries) return this.#lieInMulti(req, tree, payload);
    switch (this.mode) {
      case 'corrupt-value':
      case 'corrupt-key':
        if (req.kind === Kind.Nodes || req.kind === Kind.Leaves || req.kind === Kind.Entries) {
          return tamper(corruptCatchUp(req.kind, payload, this.mode === 'corrupt-key' ? 'key' : 'value'));
        }
        return tamper(corruptEntry(req.kind, payload, this.mode === 'corrupt-key' ? 'key' : 'value'));
      case 'twice-corrupt': {
        const second = corruptEntry(req.kind, payload, 'value');
        return second === undefined ? undefined : { kind: 'twice', payload: second };
      }
      case 'corrupt-proof':
        return tamper(req.kind === Kind.Chunk ? corruptEnvelopePath(payload) : flipLastByte(payload));
      case 'wrong-root':
        return tamper(answerFrom(this.#other!, req));
      case 'swap-kinds':
        return req.kind === Kind.Nodes ? tamper(swapKinds(payload, (this.#rng.u32() & 1) === 0)) : undefined;
    }
    // A version served from storage (`serve --db`) lends no tree: the lies that need one are not told.
    if (tree === undefined) return undefined;
    switch (this.mode) {
      case 'wrong-index': {
        if (req.kind === Kind.Chunk) return tree.chunkCount < 2 ? undefined : tamper(tree.exportChunk((req.index + 1) % tree.chunkCount));
        // A catch-up piece: the answer for the sibling position, valid under the root but not what was asked.
        if (req.kind !== Kind.Nodes && req.kind !== Kind.Leaves && req.kind !== Kind.Entries) return undefined;
        const sibling = siblingPath(req.path);
        return sibling === undefined ? undefined : tamper(answerFrom(tree, { ...req, path: sibling }));
      }
      case 'wrong-key':
      case 'absence-for-present':
      case 'existence-for-absent':
        if (req.kind === Kind.Proof) return tamper(lieAboutKey(this.mode, tree, req.key));
        return req.kind === Kind.Multiproof ? tamper(lieInMultiproof(this.mode, tree, req, payload, this.#rng.u32())) : undefined;
      case 'range-cut':
        return req.kind === Kind.Range && req.limit > 1 ? tamper(tree.proveRange(req.start, req.end, 1)) : undefined;
      case 'range-cut-empty':
        return req.kind === Kind.Range ? tamper(emptyCut(tree, req.start, req.end)) : undefined;
      default: // the generic modes, answered above
        return undefined;
    }
  }

  /** A `MULTILEAVES` or `MULTIENTRIES` answer is lied on in its first part, as that chunk's `LEAVES` or `ENTRIES` answer would be. */
  #lieInMulti(req: MultiRequest, tree: ServedTree | undefined, payload: Uint8Array): Lie | undefined {
    const first: Exclude<Request, { kind: typeof Kind.Roots }> =
      req.kind === Kind.MultiLeaves
        ? { id: req.id, kind: Kind.Leaves, root: req.root, path: req.paths[0]! }
        : { id: req.id, kind: Kind.Entries, root: req.root, ...req.chunks[0]! };
    const parts = [...multiParts(payload, req.kind === Kind.MultiLeaves ? req.paths.length : req.chunks.length)];
    const lie = this.#lie(first, tree, parts[0]!);
    if (lie?.kind !== 'payload' && lie?.kind !== 'twice') return lie;
    return { ...lie, payload: encodeMultiPayload([lie.payload, ...parts.slice(1)]) };
  }
}

/** A lie that replaces the payload, or no lie when there is nothing to send instead. */
function tamper(p: Uint8Array | undefined): Lie | undefined {
  return p === undefined ? undefined : { kind: 'payload', payload: p };
}

/** The tree path (`spec/catchup.md`: depth u8 ‖ turns, MSB first) of the position beside `path`'s, or undefined for the top. */
function siblingPath(path: Uint8Array): Uint8Array | undefined {
  const depth = path[0] ?? 0;
  if (depth === 0 || path.length !== 1 + Math.ceil(depth / 8)) return undefined;
  const out = path.slice();
  out[1 + ((depth - 1) >> 3)]! ^= 0x80 >> ((depth - 1) & 7);
  return out;
}

/** The tree's OK payload for the request (the other tree's: `wrong-root`), or undefined if it has none. */
function answerFrom(other: ServedTree, req: Exclude<Request, { kind: typeof Kind.Roots }>): Uint8Array | undefined {
  try {
    switch (req.kind) {
      case Kind.Chunk:
        return other.chunkCount === 0 ? undefined : other.exportChunk(req.index % other.chunkCount);
      case Kind.Proof:
        return encodeProofPayload(proofOf(other, req.key));
      case Kind.Range:
        return other.proveRange(req.start, req.end, req.limit);
      case Kind.Multiproof:
        return other.proveMulti(req.keys as Uint8Array[], MAX_RESPONSE_BYTES - 11);
      case Kind.Nodes:
        return other.exportSubtree?.(req.path, req.levels, MAX_RESPONSE_BYTES - 11);
      case Kind.Leaves:
        return other.exportLeaves?.(req.path);
      case Kind.Entries:
        return other.exportEntries?.(req.path, req.bitmap, MAX_RESPONSE_BYTES - 11);
      case Kind.MultiLeaves:
      case Kind.MultiEntries:
        return multiAnswer(other, req, MAX_RESPONSE_BYTES - 11);
    }
  } catch {
    return undefined;
  }
}

/**
 * A PROOF payload that is valid for the tree but not for `key`: another
 * key's existence proof (`wrong-key`), an absence proof of `key ‖ 0x00` for
 * a present key (`absence-for-present`), or a neighbour's existence proof
 * and value claimed for an absent key (`existence-for-absent`). Undefined
 * where the lie does not apply (then the answer is honest).
 */
function lieAboutKey(mode: (typeof PROOF_LIES)[number], tree: ServedTree, key: Uint8Array): Uint8Array | undefined {
  const present = tree.get(key) !== undefined;
  const existence = (k: Uint8Array) => encodeProofPayload(proofOf(tree, k));
  switch (mode) {
    case 'wrong-key': {
      const other = neighbourKey(tree, key);
      return other === undefined ? undefined : existence(other);
    }
    case 'absence-for-present': {
      if (!present) return undefined;
      const after = Uint8Array.of(...key, 0);
      if (after.length > 1024 || tree.get(after) !== undefined) return undefined;
      return encodeProofPayload({ present: false, proof: tree.proveAbsence(after) });
    }
    case 'existence-for-absent': {
      if (present) return undefined;
      const other = neighbourKey(tree, key);
      return other === undefined ? undefined : existence(other);
    }
  }
}

/**
 * A `MULTIPROOF` answer that lies about one asked key (`seed` picks which
 * one is tried first): the valid multiproof of the asked keys with that key
 * swapped for others (see the module's table), sent with the honest count.
 * Only a swap that fails verification against the asked keys is a lie;
 * undefined when no asked key gives one.
 */
function lieInMultiproof(
  mode: (typeof PROOF_LIES)[number],
  tree: ServedTree,
  req: Extract<Request, { kind: typeof Kind.Multiproof }>,
  payload: Uint8Array,
  seed: number,
): Uint8Array | undefined {
  const { count } = decodeMultiproofPayload(payload, req.keys.length);
  const asked = req.keys.slice(0, count);
  for (let n = 0; n < asked.length; n++) {
    const at = (seed + n) % asked.length;
    const key = asked[at]!;
    const present = tree.get(key) !== undefined;
    let instead: (Uint8Array | undefined)[];
    if (mode === 'wrong-key' && present) instead = [neighbourKey(tree, key)];
    else if (mode === 'absence-for-present' && present) instead = [leftOf(tree, key), neighbourKey(tree, key)];
    else if (mode === 'existence-for-absent' && !present) instead = [neighbourKey(tree, key)];
    else continue;
    const keys = [...asked.filter((_, i) => i !== at), ...instead.filter((k) => k !== undefined)]
      .sort(Buffer.compare)
      .filter((k, i, all) => i === 0 || Buffer.compare(all[i - 1]!, k) !== 0);
    const lie = decodeMultiproofPayload(tree.proveMulti(keys, MAX_RESPONSE_BYTES - 11), keys.length);
    if (lie.count !== keys.length) continue;
    try {
      verifyMultiproof(tree.root, asked, lie.proof);
    } catch {
      return encodeMultiproofPayload({ count, proof: lie.proof });
    }
  }
  return undefined;
}

/** The key of the entry just below `key`, if any: the left neighbour a range proof from `key` starts with. */
function leftOf(tree: ServedTree, key: Uint8Array): Uint8Array | undefined {
  const first = rangeKeys(tree.proveRange(key, undefined, 1))[0];
  return first !== undefined && Buffer.compare(first, key) < 0 ? first : undefined;
}

/**
 * An incomplete `RANGE(start, end, …)` answer with no results: the window of
 * the left neighbour and the first result, which is what the valid proof of
 * the empty query `(start, first result)` holds. Undefined where it does not
 * apply: `start` is a key, or the range has no second result (then the
 * window would be a complete answer).
 */
function emptyCut(tree: ServedTree, start: Uint8Array, end: Uint8Array | undefined): Uint8Array | undefined {
  const page = verifyRange(tree.root, start, end, 1, tree.proveRange(start, end, 1));
  const first = page.entries[0]?.[0];
  if (first === undefined || page.complete || Buffer.compare(first, start) === 0) return undefined;
  return tree.proveRange(start, first, 1);
}

/** A key of the tree other than `key`: the first at or after it, or else the first of the tree. */
function neighbourKey(tree: ServedTree, key: Uint8Array): Uint8Array | undefined {
  for (const start of [key, new Uint8Array(0)]) {
    for (const e of rangeKeys(tree.proveRange(start, undefined, 2))) {
      if (Buffer.compare(e, key) !== 0) return e;
    }
  }
  return undefined;
}

/** The keys of a range proof's first segment (spec/proof-format.md, 0x03): enough for {@link neighbourKey}. */
function rangeKeys(proof: Uint8Array): Uint8Array[] {
  const c = new Cursor(proof);
  c.u8(); // 0x03
  c.varint(); // capacity
  if (c.varint() === 0) return []; // the empty tree
  c.varint(); // M
  const lo = c.varint();
  const hi = c.varint();
  const keys: Uint8Array[] = [];
  for (let i = lo; i < hi; i++) {
    const e = c.entry();
    keys.push(proof.subarray(e.keyAt, e.keyAt + e.keyLen));
  }
  return keys;
}

// --- Minimal parsing of the payloads (chunk-format.md, proof-format.md, wire.md) ---

/** Where the bytes of an entry's key and value sit in a payload. */
interface EntrySpan {
  keyAt: number;
  keyLen: number;
  valueAt: number;
  valueLen: number;
}

class Cursor {
  readonly b: Uint8Array;
  pos = 0;
  constructor(b: Uint8Array) {
    this.b = b;
  }
  u8(): number {
    if (this.pos >= this.b.length) throw new RangeError('truncated');
    return this.b[this.pos++]!;
  }
  varint(): number {
    let v = 0;
    for (let i = 0; i < 8; i++) {
      const x = this.u8();
      v += (x & 0x7f) * 2 ** (7 * i);
      if ((x & 0x80) === 0) return v;
    }
    throw new RangeError('varint');
  }
  /** Skips a `bytes` field; returns where its content starts and its length. */
  bytes(): [number, number] {
    const len = this.varint();
    const at = this.pos;
    this.pos += len;
    if (this.pos > this.b.length) throw new RangeError('truncated');
    return [at, len];
  }
  entry(): EntrySpan {
    const [keyAt, keyLen] = this.bytes();
    const [valueAt, valueLen] = this.bytes();
    return { keyAt, keyLen, valueAt, valueLen };
  }
}

/** The first entry carried by a payload, and (PROOF present) where the value sits. */
function firstEntry(kind: number, payload: Uint8Array): { entry?: EntrySpan; presentValue?: [number, number] } {
  const c = new Cursor(payload);
  switch (kind) {
    case Kind.Chunk: {
      c.u8(); // 0x05
      c.varint(); // capacity
      c.u8(); // key_height
      c.varint(); // M ≥ 1
      return { entry: c.entry() };
    }
    case Kind.Proof: {
      if (c.u8() === 1) return { presentValue: c.bytes() };
      c.u8(); // 0x02
      c.varint(); // capacity
      const flags = c.u8();
      return (flags & 3) === 0 ? {} : { entry: c.entry() };
    }
    case Kind.Range: {
      c.u8(); // 0x03
      c.varint(); // capacity
      if (c.varint() === 0) return {};
      c.varint(); // M
      c.varint(); // lo
      c.varint(); // hi (> lo)
      return { entry: c.entry() };
    }
    case Kind.Multiproof: {
      c.varint(); // k
      c.u8(); // 0x0D
      c.varint(); // capacity
      // Nodes in pre-order, to the first revealed chunk (spec/proof-format.md, 0x0D).
      for (;;) {
        const tag = c.u8();
        if (tag === 3) return {}; // the empty tree
        if (tag === 1) c.u8(); // open: its height, then its children
        else if (tag === 0) {
          c.varint(); // chunks
          c.varint(); // entries
          c.pos += 32; // hash
        } else {
          c.varint(); // M
          c.varint(); // revealed ≥ 1
          c.varint(); // pos
          return { entry: c.entry() };
        }
      }
    }
  }
  return {};
}

/** Flips a bit in the first entry's key (last byte) or value (middle byte); undefined if there is none. */
function corruptEntry(kind: number, payload: Uint8Array, what: 'key' | 'value'): Uint8Array | undefined {
  let found: ReturnType<typeof firstEntry>;
  try {
    found = firstEntry(kind, payload);
  } catch {
    return undefined;
  }
  const out = payload.slice();
  if (found.presentValue !== undefined) {
    if (what === 'key') return undefined; // a present PROOF carries no key
    const [at, len] = found.presentValue;
    if (len === 0) return undefined;
    out[at + (len >> 1)]! ^= 0x01;
    return out;
  }
  const e = found.entry;
  if (e === undefined) return undefined;
  if (what === 'key' || e.valueLen === 0) out[e.keyAt + e.keyLen - 1]! ^= 0x01;
  else out[e.valueAt + (e.valueLen >> 1)]! ^= 0x01;
  return out;
}

/**
 * A catch-up answer with one bit flipped where its hash check catches it:
 * `NODES`, the first node's left child hash (a forged node); `LEAVES`, the
 * first entry hash (a wrong entry-hash list); `ENTRIES`, the first entry's
 * value or key (an entry that does not match).
 */
function corruptCatchUp(kind: number, payload: Uint8Array, what: 'key' | 'value'): Uint8Array | undefined {
  try {
    const c = new Cursor(payload);
    let at: number;
    if (kind === Kind.Nodes) {
      c.u8(); // format
      c.varint(); // capacity
      c.u8(); // height
      c.varint(); // chunks
      c.varint(); // entries
      c.u8(); // kinds
      at = c.pos;
    } else if (kind === Kind.Leaves) {
      c.u8();
      c.varint();
      at = c.pos;
    } else {
      c.varint(); // k
      const e = c.entry();
      at = what === 'key' || e.valueLen === 0 ? e.keyAt + e.keyLen - 1 : e.valueAt + (e.valueLen >> 1);
    }
    if (at >= payload.length) return undefined;
    const out = payload.slice();
    out[at]! ^= 0x01;
    return out;
  } catch {
    return undefined;
  }
}

/**
 * A `NODES` answer whose kinds lie (`swap-kinds`): with `deeper`, a node of
 * height 2 and 3 chunks after the first gets its kinds swapped and the
 * answer ends with it (a valid cut that leaves it unproven); otherwise, or
 * with none, the first node's kinds are swapped and the answer cut after it
 * when it is such a node, else changed to what its height and chunk count
 * forbid.
 */
function swapKinds(payload: Uint8Array, deeper: boolean): Uint8Array | undefined {
  try {
    const c = new Cursor(payload);
    c.u8(); // format
    c.varint(); // capacity
    const nodes: { split: boolean; kindsAt: number; end: number }[] = [];
    while (c.pos < payload.length) {
      const height = c.u8();
      const chunks = c.varint();
      c.varint(); // entries
      const kindsAt = c.pos;
      c.pos += 1 + 64; // kinds, the two child hashes
      c.bytes(); // key copy
      nodes.push({ split: height === 2 && chunks === 3, kindsAt, end: c.pos });
    }
    const node = (deeper ? nodes.slice(1).find((n) => n.split) : undefined) ?? nodes[0]!;
    const out = payload.slice(0, node.split ? node.end : payload.length);
    out[node.kindsAt] = node.split ? out[node.kindsAt]! ^ 3 : out[node.kindsAt] === 3 ? 0 : 1;
    return out;
  } catch {
    return undefined;
  }
}

/** Flips a bit in the last sibling hash of an envelope's chunk path; with no path, bumps the key-height. */
function corruptEnvelopePath(env: Uint8Array): Uint8Array | undefined {
  try {
    const c = new Cursor(env);
    c.u8();
    c.varint();
    const keyHeightAt = c.pos;
    c.u8();
    const m = c.varint();
    for (let i = 0; i < m; i++) c.entry();
    const steps = c.varint();
    const out = env.slice();
    if (steps === 0) {
      out[keyHeightAt]! += 1;
      return out;
    }
    // Each step ends with its 32-byte sibling hash, so the envelope's last byte is in one.
    out[out.length - 1]! ^= 0x01;
    return out;
  } catch {
    return undefined;
  }
}

function flipLastByte(p: Uint8Array): Uint8Array | undefined {
  if (p.length === 0) return undefined;
  const out = p.slice();
  out[out.length - 1]! ^= 0x01;
  return out;
}

/**
 * Flips a bit in the first leaf record of a Baseline chunk (crates/baseline
 * README, "Export records"): the last byte of its key, or the middle byte of
 * its value. Undefined if the chunk holds no leaf or does not parse.
 */
function corruptBaselineLeaf(chunk: Uint8Array, what: 'key' | 'value'): Uint8Array | undefined {
  try {
    const c = new Cursor(chunk);
    while (c.pos < chunk.length) {
      const height = c.u8();
      if (height === 0) {
        const e = c.entry();
        const out = chunk.slice();
        if (what === 'key' || e.valueLen === 0) out[e.keyAt + e.keyLen - 1]! ^= 0x01;
        else out[e.valueAt + (e.valueLen >> 1)]! ^= 0x01;
        return out;
      }
      c.varint(); // size
      c.bytes(); // key
    }
  } catch {
    // Not a well-formed chunk: nothing to corrupt.
  }
  return undefined;
}
