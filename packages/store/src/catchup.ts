/**
 * A catch-up of the store's head to a newer trusted root (`docs/catchup.md`):
 * the session that `catchUp({ store })` (`@bpavl/light-client/sync`) drives.
 * The core (`CatchUp`) says what to ask peers and checks every answer; this
 * module reads the old chunks it names from the store, writes the records
 * it makes (born at the new version) and the subtrees it took, and commits
 * the last write set. While `meta[catchup]` names the root, the store keeps
 * them: a run stopped by anything, a kill included, is resumed by the next
 * run of the same catch-up, which fetches none of it again
 * (`spec/store-format.md`, "Catching up").
 * @module
 */

import { CatchUp, type CatchUpFetch, type StoredHead, verifyChunk } from '@bpavl/wasm';
import type { StorageBackend, WriteBatch } from '../../storage/src/port.ts';
import { StoreError } from './errors.ts';
import {
  CATCHUP_KEY,
  CATCHUP_PROGRESS_END,
  CATCHUP_PROGRESS_START,
  catchUpProgressKey,
  fetchRecords,
  pathOfCatchUpProgress,
  staleMarks,
  versionKey,
} from './records.ts';

/**
 * Levels of the new tree that the top's `NODES` asks for: at most 255 nodes
 * (about 25 KB). Below them, a subtree is asked whole (`MAX_LEVELS`, cut by
 * the peer to fit a response): at 1M entries that is 64 nodes or so, and a
 * third round would cost more than the nodes of unchanged subtrees it skips.
 */
export const NODES_LEVELS = 8;
const MAX_LEVELS = 48;
/**
 * Bytes of records gathered into one write, as a sync's (`sync.ts`), or
 * what came in a second: each write waits for the disk (an fsync), so
 * fewer writes are faster, and what a kill loses is fetched again by the
 * resume. (A write every 64 chunks made a catch-up of 908 chunks 40 %
 * slower here.)
 */
const WRITE_BATCH_BYTES = 4 << 20;
const WRITE_EVERY_MS = 1000;
/** Rounds of store reads one settle may take: a chunk, then a delta's base, per round. */
const MAX_ROUNDS = 1 << 20;

/** A piece a catch-up asks a peer for (`spec/wire.md`, "Catch-up"): `path` is an encoded tree path. */
export type CatchUpPiece =
  | { kind: 'nodes'; path: Uint8Array; levels: number }
  | { kind: 'leaves'; path: Uint8Array }
  | { kind: 'entries'; path: Uint8Array; bitmap: Uint8Array };

/** What the session needs of the state it writes into. */
export interface CatchUpHost {
  readonly backend: StorageBackend;
  /** Writes the last batch (the state learns its new head). */
  commitCaughtUp(batch: WriteBatch, version: number, versionRecord: Uint8Array): Promise<void>;
  /** The session is done (finished, closed or failed): the state takes writes again. */
  release(): void;
  /** Forgets the catch-up and what it stored: it can never finish (the root's tree has another capacity). */
  abandon(): Promise<void>;
}

type Put = readonly [table: string, key: Uint8Array, value: Uint8Array];

/** The `CatchUpSession` (`@bpavl/light-client/sync`) of a store. */
export class StoreCatchUp {
  /** The head caught up from. */
  readonly fromVersion: number;
  /** The version the catch-up commits (the head's if it is the root already). */
  readonly version: number;
  readonly #root: Uint8Array;
  readonly #host: CatchUpHost;
  #core: CatchUp | undefined;
  #puts: Put[] = [];
  #putBytes = 0;
  #wroteAt = performance.now();
  /** Record bytes written so far. */
  writtenBytes = 0;
  #settling: Promise<void> = Promise.resolve();
  #released = false;
  /** Changed and restored chunks, as counted when the core was let go. */
  #changed = 0;
  #restored = 0;

  private constructor(host: CatchUpHost, core: CatchUp | undefined, root: Uint8Array, fromVersion: number) {
    this.#host = host;
    this.#root = root.slice();
    this.fromVersion = fromVersion;
    this.#core = core;
    this.version = core?.version ?? fromVersion;
  }

  /** A session with nothing to do: the head (`version`) is the root. */
  static upToDate(host: CatchUpHost, root: Uint8Array, version: number): StoreCatchUp {
    return new StoreCatchUp(host, undefined, root, version);
  }

  /**
   * A catch-up of `head` (`fromVersion`, committed) to `root`: a new one
   * (`meta[catchup]` written first), or (`resume`) the next run of the one
   * the store holds, which takes back the subtrees and chunks it kept.
   */
  static async open(host: CatchUpHost, head: StoredHead, root: Uint8Array, fromVersion: number, resume: boolean): Promise<StoreCatchUp> {
    const { backend } = host;
    if (!resume) await backend.write({ puts: [['meta', CATCHUP_KEY, root]] });
    const core = resume ? CatchUp.resume(head, root) : new CatchUp(head, root);
    try {
      if (resume) {
        // Parents first: progress keys sort by the path's depth byte, then its turns.
        const dropped: Uint8Array[] = [];
        for await (const [key, value] of backend.scan('meta', { start: CATCHUP_PROGRESS_START, end: CATCHUP_PROGRESS_END })) {
          try {
            core.restoreSubtree(pathOfCatchUpProgress(key), value[0]!, value.subarray(1));
          } catch {
            dropped.push(key); // no longer checks: fetched again
          }
        }
        if (dropped.length > 0) await backend.write({ deletes: dropped.map((k) => ['meta', k] as const) });
      }
    } catch (e) {
      core.free();
      throw e;
    }
    return new StoreCatchUp(host, core, root, fromVersion);
  }

  /** Changed chunks taken back from an interrupted run (never fetched again). */
  get restoredChunks(): number {
    return this.#core?.restoredChunks ?? this.#restored;
  }

  /** Whether every piece of the new tree is in. */
  get isFetched(): boolean {
    return this.#core?.isFetched ?? true;
  }

  /** Chunks of the new tree that differ from every chunk of the head, found so far. */
  get changedChunks(): number {
    return this.#core?.changedChunks ?? this.#changed;
  }

  /** What to ask peers now, at most `limit` pieces in a stable order; a piece in flight may be listed again. */
  pieces(limit: number): CatchUpPiece[] {
    const core = this.#live();
    if (core === undefined) return [];
    return core
      .fetches(limit)
      .map((f: CatchUpFetch) => (f.kind === 'nodes' ? { ...f, levels: f.path.length === 1 ? NODES_LEVELS : MAX_LEVELS } : f));
  }

  /**
   * Adds a peer's answer to `piece` (tagged `source`). Throws a ProofError
   * for a lie (its code bans the peer) and changes nothing then. The store
   * reads and writes it leads to happen in `settle`.
   */
  add(piece: CatchUpPiece, payload: Uint8Array, source: number): void {
    const core = this.#live();
    if (core === undefined || core.capacityMismatch) return;
    switch (piece.kind) {
      case 'nodes':
        core.addSubtree(piece.path, piece.levels, payload, source);
        if (core.capacityMismatch) throw new StoreError('CAPACITY_MISMATCH', "the root's tree has another chunk capacity than this store's");
        return;
      case 'leaves':
        return core.addLeaves(piece.path, payload);
      case 'entries':
        return core.addEntries(piece.path, piece.bitmap, payload);
    }
  }

  /**
   * After a peer answered the top's `NODES` with `OUT_OF_RANGE`: the first
   * chunk's envelope, checked against the root. True if the tree is that
   * one chunk (now in); false if it has more (the peer that said so lied).
   * Throws a ProofError for an envelope that does not verify.
   */
  addTopChunk(envelope: Uint8Array): boolean {
    const core = this.#live();
    if (core === undefined) return true;
    const chunk = verifyChunk(this.#root, 0, envelope);
    try {
      return core.addTopChunk(chunk);
    } finally {
      chunk.free();
    }
  }

  /** The index of the changed chunk at `path`, once known: to ask it whole from a peer that serves no `LEAVES` or `ENTRIES`. */
  chunkIndex(path: Uint8Array): number | undefined {
    return this.#live()?.chunkIndex(path);
  }

  /** The changed chunk at `path` whole: its envelope, checked against the root at `index` (throws a ProofError for a lie). */
  addChunk(path: Uint8Array, index: number, envelope: Uint8Array): void {
    const core = this.#live();
    if (core === undefined) return;
    const chunk = verifyChunk(this.#root, index, envelope);
    try {
      core.addChunk(path, chunk);
    } finally {
      chunk.free();
    }
  }

  /** Reads the old chunks the answers so far need and writes what they made; one settle at a time. */
  settle(): Promise<void> {
    const run = this.#settling.then(() => this.#settle());
    this.#settling = run.catch(() => {});
    return run;
  }

  async #settle(): Promise<void> {
    const core = this.#live();
    if (core === undefined) return;
    for (let round = 0; ; round++) {
      if (round > MAX_ROUNDS) throw new StoreError('STORE_CORRUPT', 'a catch-up read more chunks than a tree holds');
      const needed = core.needed();
      if (needed.length === 0) break;
      await fetchRecords(this.#host.backend, needed, (_, key, value) => core.supply(key, value));
    }
    this.#collect(core);
    if (this.#putBytes >= WRITE_BATCH_BYTES || (this.#puts.length > 0 && performance.now() - this.#wroteAt >= WRITE_EVERY_MS)) await this.#flush();
  }

  /** Takes what the core made: records, and the subtrees it took. */
  #collect(core: CatchUp): void {
    for (const put of core.takePuts()) {
      this.#puts.push(put);
      this.#putBytes += put[1].length + put[2].length;
    }
    for (const [path, levels, answer] of core.takeProgress()) {
      const value = new Uint8Array(1 + answer.length);
      value[0] = levels;
      value.set(answer, 1);
      this.#puts.push(['meta', catchUpProgressKey(path), value]);
      this.#putBytes += value.length;
    }
  }

  async #flush(): Promise<void> {
    if (this.#puts.length === 0) return;
    const puts = this.#puts;
    this.writtenBytes += this.#putBytes;
    this.#puts = [];
    this.#putBytes = 0;
    this.#wroteAt = performance.now();
    await this.#host.backend.write({ puts });
  }

  /**
   * Once everything is fetched: marks stale what the new version no longer
   * uses and commits it. Returns its version, the tags of peers whose key
   * copies lied, and `changedIndices`: the indices, in the new version's
   * chunk order, of its `changedChunks` changed chunks (those that differ
   * from every chunk of the head: fetched, or taken back from an earlier
   * run), increasing; every other chunk is one of the head's, shared
   * (perhaps at another index). Empty when the head is the root already.
   */
  async finish(): Promise<{ version: number; liars: number[]; changedIndices: Uint32Array }> {
    try {
      if (this.#core === undefined) return { version: this.version, liars: [], changedIndices: new Uint32Array(0) };
      await this.settle();
      if (!this.#core.isFetched) throw new StoreError('SYNC_PENDING', 'the catch-up is not complete');
      await this.#flush();
      this.#changed = this.#core.changedChunks;
      this.#restored = this.#core.restoredChunks;
      const { writeSet: w, liars, changedIndices } = this.#core.finish();
      this.#core = undefined;
      this.writtenBytes += w.puts.reduce((n, [, k, v]) => n + k.length + v.length, 0);
      const batch: WriteBatch = {
        puts: [...w.puts, ...staleMarks(w.stale), ['versions', versionKey(w.version), w.versionRecord]],
        deletes: [['meta', CATCHUP_KEY]],
        deleteRanges: [['meta', CATCHUP_PROGRESS_START, CATCHUP_PROGRESS_END]],
      };
      await this.#host.commitCaughtUp(batch, w.version, w.versionRecord);
      return { version: w.version, liars, changedIndices };
    } finally {
      this.#release();
    }
  }

  /**
   * Stops: what was verified is written at once and stays for the next run
   * of this catch-up (or `discardSync`); then the session is released.
   */
  async close(): Promise<void> {
    if (this.#released) return;
    try {
      await this.#settling;
      if (this.#core?.capacityMismatch) await this.#host.abandon();
      else if (this.#core !== undefined) {
        this.#collect(this.#core);
        await this.#flush();
      }
    } finally {
      this.#release();
    }
  }

  #release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#core?.free();
    this.#core = undefined;
    this.#host.release();
  }

  /** The core, or `undefined` when the head is the root already (nothing to do). */
  #live(): CatchUp | undefined {
    if (this.#released) throw new StoreError('STORE_CLOSED', 'the catch-up is over');
    return this.#core;
  }
}
