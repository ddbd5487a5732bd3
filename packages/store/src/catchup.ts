/**
 * A catch-up of the store's head to a newer trusted root (`docs/catchup.md`):
 * the session that `catchUp({ store })` (`@bpavl/light-client/sync`) drives.
 * The core (`CatchUp`) says what to ask peers and checks every answer; this
 * module reads the old chunks it names from the store, writes the records
 * it makes (born at the new version, so that a crash leaves nothing the
 * next open keeps), and commits the last write set.
 * @module
 */

import { CatchUp, type CatchUpFetch, type StoredHead, verifyChunk } from '@bpavl/wasm';
import type { StorageBackend, WriteBatch } from '../../storage/src/port.ts';
import { StoreError } from './errors.ts';
import { fetchRecords, versionKey } from './records.ts';

/** Levels of the new tree that one `NODES` request asks for: at most 255 nodes (about 25 KB). */
export const NODES_LEVELS = 8;
/** Bytes of records gathered into one write, as a sync's (`sync.ts`). */
const WRITE_BATCH_BYTES = 4 << 20;
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
  /** Record bytes written so far. */
  writtenBytes = 0;
  #settling: Promise<void> = Promise.resolve();
  #released = false;
  /** Changed chunks, as counted when the core was let go. */
  #changed = 0;

  /** A catch-up of `head` (`fromVersion`, committed) to `root`; without `head`, the head is `root` already. */
  constructor(host: CatchUpHost, head: StoredHead | undefined, root: Uint8Array, fromVersion: number) {
    this.#host = host;
    this.#root = root.slice();
    this.fromVersion = fromVersion;
    this.#core = head === undefined ? undefined : new CatchUp(head, root);
    this.version = this.#core?.version ?? fromVersion;
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
    return core.fetches(limit).map((f: CatchUpFetch) => (f.kind === 'nodes' ? { ...f, levels: NODES_LEVELS } : f));
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
    for (const put of core.takePuts()) {
      this.#puts.push(put);
      this.#putBytes += put[1].length + put[2].length;
    }
    if (this.#putBytes >= WRITE_BATCH_BYTES) await this.#flush();
  }

  async #flush(): Promise<void> {
    if (this.#puts.length === 0) return;
    const puts = this.#puts;
    this.writtenBytes += this.#putBytes;
    this.#puts = [];
    this.#putBytes = 0;
    await this.#host.backend.write({ puts });
  }

  /**
   * Once everything is fetched: marks stale what the new version no longer
   * uses and commits it. Returns its version and the tags of peers whose
   * key copies lied.
   */
  async finish(): Promise<{ version: number; liars: number[] }> {
    try {
      if (this.#core === undefined) return { version: this.version, liars: [] };
      await this.settle();
      if (!this.#core.isFetched) throw new StoreError('SYNC_PENDING', 'the catch-up is not complete');
      await this.#flush();
      this.#changed = this.#core.changedChunks;
      const { writeSet: w, liars } = this.#core.finish();
      this.#core = undefined;
      this.writtenBytes += w.puts.reduce((n, [, k, v]) => n + k.length + v.length, 0);
      const batch: WriteBatch = {
        puts: [...w.puts, ...w.stale.map((key) => ['stale', key, new Uint8Array()] as const), ['versions', versionKey(w.version), w.versionRecord]],
      };
      await this.#host.commitCaughtUp(batch, w.version, w.versionRecord);
      return { version: w.version, liars };
    } finally {
      this.close();
    }
  }

  /** Stops: the records written stay unborn until the next open removes them. */
  close(): void {
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
