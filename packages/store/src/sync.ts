/**
 * A sync into the store (`docs/store.md`, "Syncing into a store"): the
 * sink that `syncState({ store })` writes verified chunks to. Each chunk's
 * entry, chunk and progress records go in one atomic write, batched while
 * the disk catches up; the engine keeps no chunk data. A new run of the same
 * root takes back every stored chunk that still checks out against the root
 * and fetches the rest; the finished sync writes the inner nodes and the
 * version record in one atomic write.
 * @module
 */

import { type ChunkWrite, type StoredHead, StoreSync, type VerifiedChunk, type WriteSet } from '@bpavl/wasm';
import type { StorageBackend, WriteBatch } from '../../storage/src/port.ts';
import { StoreError } from './errors.ts';
import { fetchRecords, indexOfProgress, PROGRESS_END, PROGRESS_START, progressKey, staleMarks, SYNC_KEY, versionKey } from './records.ts';

/**
 * Bytes of records gathered into one write. Entry records have random keys,
 * so a small write dirties nearly a page per record: SQLite took 56 µs a
 * record in writes of 1,000, 8 µs in writes of 20,000 and 7 µs in writes of
 * 80,000 (docs/store.md, "Syncing into a store").
 */
const WRITE_BATCH_BYTES = 4 << 20;
/**
 * A write starts once this many chunks (or WRITE_BATCH_BYTES) are pending,
 * so that what is kept grows in steps however fast chunks arrive; a sink's
 * first write takes no more than this many, so that some are kept early.
 */
const WRITE_BATCH_CHUNKS = 64;
/**
 * The most bytes of records a later write takes (and always one chunk):
 * a write stays bounded however far the disk falls behind, yet large
 * enough to write many records a page (writes of at most 64 chunks made a
 * 1M sync 16.7 → 26.5 s).
 */
const WRITE_MAX_BYTES = 32 << 20;
/** The longest a smaller batch waits for more chunks before it is written anyway (ms). */
const WRITE_WAIT_MS = 200;
/** Progress records taken back per round on resume. */
const RESTORE_BATCH = 256;

type Put = readonly [table: string, key: Uint8Array, value: Uint8Array];

/** The bytes `puts` write (keys and values). */
function putBytes(puts: readonly Put[]): number {
  return puts.reduce((n, [, key, value]) => n + key.length + value.length, 0);
}

/** One verified chunk's records (its entries, its chunk record, its progress record): written together. */
interface PendingChunk {
  readonly puts: Put[];
  readonly bytes: number;
}

/** What the sink needs of the state it writes into. */
export interface SinkHost {
  readonly backend: StorageBackend;
  /** Writes the finished version's batch (the state learns its new head). */
  commitSynced(batch: WriteBatch, version: number, versionRecord: Uint8Array, capacity: number): Promise<void>;
  /** The empty version, for a root that is an empty tree's. */
  commitEmpty(root: Uint8Array): Promise<number>;
  /** The sink is done (finished, closed or failed): the state takes writes again once finished. */
  release(): void;
  /** Forgets the sync and what it stored: it can never finish (its chunks have another capacity than the head's). */
  abandon(): Promise<void>;
}

/** The chunk records of `keys` in one read, in their order (`undefined` for no key, or a record the store lacks). */
async function readChunks(backend: StorageBackend, keys: readonly (Uint8Array | undefined)[]): Promise<(Uint8Array | undefined)[]> {
  const values = await backend.getMany('chunks', keys.filter((k) => k !== undefined));
  let at = 0;
  return keys.map((k) => (k === undefined ? undefined : values[at++]));
}

/** The `ChunkSink` (`@bpavl/light-client/sync`) of a store. */
export class StoreSink {
  readonly restored: number[];
  /** Record bytes written so far (progress records included). */
  writtenBytes = 0;
  /** Chunks stored with their records (restored ones included); the others are a head's, shared. */
  changedChunks = 0;
  /** The indices of those chunks, in the order they were stored. */
  #changed: number[] = [];
  readonly #host: SinkHost;
  readonly #sync: StoreSync;
  readonly #root: Uint8Array;
  /** The capacity of the head this sync writes the next version of, if any. */
  readonly #headCapacity: number | undefined;
  /** Set when a chunk's capacity is not the head's: the sync is forgotten as it closes. */
  #abandoned = false;
  #pending: PendingChunk[] = [];
  #pendingBytes = 0;
  #writingBytes = 0;
  #writing: Promise<void> | undefined;
  /** Reads of head chunks that chunks wait for (a sync as a head's next version). */
  #matching: Promise<void> | undefined;
  #failure: unknown;
  #released = false;
  /** Set once every chunk is in, or the sync stops: what is pending is written at once. */
  #stopping = false;
  /** What `close` waits for: the last writes, then the release. */
  #closed: Promise<void> | undefined;
  /** Chunks durably stored: restored, then written by this run. */
  #stored: number;
  /** Chunks in the batch being written. */
  #writingChunks = 0;
  #onStored: (chunks: number) => void = () => {};
  #onFailure: (e: unknown) => void = () => {};

  private constructor(host: SinkHost, sync: StoreSync, root: Uint8Array, restored: number[], headCapacity: number | undefined) {
    this.#host = host;
    this.#sync = sync;
    this.#root = root;
    this.restored = restored;
    this.#stored = restored.length;
    this.#headCapacity = headCapacity;
  }

  /**
   * The sink of a sync of `root` as `version` (into a store that holds no
   * version), or as the next version of `head` (`spec/store-format.md`,
   * "Syncing as the next version"): a new one (the sync record written
   * first), or the resume of the one stored, whose chunks are checked
   * again; those that do not check out are dropped and fetched again.
   */
  static async open(host: SinkHost, root: Uint8Array, version: number, resume: boolean, head?: { tree: StoredHead; capacity: number; firstKey: Uint8Array | undefined }): Promise<StoreSink> {
    const { backend } = host;
    const sync = head === undefined ? new StoreSync(root, version) : StoreSync.next(head.tree, root, head.firstKey);
    const restored: number[] = [];
    const changed: number[] = [];
    try {
      if (!resume) await backend.write({ puts: [['meta', SYNC_KEY, root]] });
      let batch: [number, Uint8Array][] = [];
      const dropped: Uint8Array[] = [];
      const restoreBatch = async () => {
        const keys = batch.map(([, progress]) => {
          try {
            return sync.chunkKey(progress);
          } catch {
            return undefined;
          }
        });
        const records = await readChunks(backend, keys);
        // As a head's next version, a chunk written as a delta is read with its base, a head record.
        const bases = await readChunks(backend, records.map((r) => (r === undefined || head === undefined ? undefined : sync.restoreBase(r))));
        for (const [i, [index, progress]] of batch.entries()) {
          // No key: a chunk the head holds (shared), or a progress record that does not decode.
          const [record, base] = [records[i], bases[i]];
          try {
            sync.restore(index, progress, record, base);
            restored.push(index);
            if (keys[i] !== undefined) changed.push(index);
          } catch {
            dropped.push(progressKey(index));
          }
        }
        batch = [];
      };
      for await (const [key, progress] of backend.scan('meta', { start: PROGRESS_START, end: PROGRESS_END })) {
        batch.push([indexOfProgress(key), progress]);
        if (batch.length === RESTORE_BATCH) await restoreBatch();
      }
      await restoreBatch();
      // A chunk that did not check out is fetched again; its records are rewritten then.
      if (dropped.length > 0) await backend.write({ deletes: dropped.map((k) => ['meta', k] as const) });
    } catch (e) {
      sync.free();
      throw e;
    }
    const sink = new StoreSink(host, sync, root, restored, head?.capacity);
    sink.#changed = changed;
    sink.changedChunks = changed.length;
    return sink;
  }

  /**
   * The indices of the `changedChunks` chunks stored with their records
   * (restored ones included), increasing: as a head's next version, the new
   * version's chunks that differ from every chunk of the head (the others
   * are the head's, shared, perhaps at another index); into an empty store,
   * every chunk stored so far.
   */
  get changedIndices(): Uint32Array {
    return Uint32Array.from(this.#changed).sort();
  }

  get chunkCount(): number | undefined {
    return this.#sync.chunkCount;
  }

  get backlogBytes(): number {
    return this.#pendingBytes + this.#writingBytes + this.#sync.waitingBytes;
  }

  watch(onStored: (chunks: number) => void, onFailure: (e: unknown) => void): void {
    this.#onStored = onStored;
    this.#onFailure = onFailure;
  }

  add(chunk: VerifiedChunk): void {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#headCapacity !== undefined && chunk.capacity !== this.#headCapacity) {
      chunk.free();
      this.#abandoned = true;
      throw new StoreError('CAPACITY_MISMATCH', "the root's tree has another chunk capacity than this store's");
    }
    const w = this.#sync.add(chunk);
    if (w !== undefined) this.#queue(w);
    else if (this.#headCapacity !== undefined) {
      // As a head's next version, a chunk is written once the head chunks around it are read.
      for (const ready of this.#sync.takeReady()) this.#queue(ready);
      if (this.#matching === undefined && this.#sync.waitingBytes > 0) {
        // Cleared when this run ends (not inside it: a run with nothing to read ends before it is assigned).
        const run = this.#match();
        this.#matching = run;
        void run.finally(() => {
          if (this.#matching === run) this.#matching = undefined;
        });
      }
    }
  }

  /** Queues a chunk's records, with its progress record, for the next write. */
  #queue(w: ChunkWrite): void {
    if (w.puts.length > 0) {
      this.changedChunks++;
      this.#changed.push(w.index);
    }
    const puts: Put[] = [...w.puts, ['meta', progressKey(w.index), w.progress]];
    const bytes = putBytes(puts);
    this.#pending.push({ puts, bytes });
    this.#pendingBytes += bytes;
    this.#writing ??= this.#drain();
  }

  /** Reads the head chunk records that chunks wait for, until none does, queueing each chunk made. */
  async #match(): Promise<void> {
    try {
      for (let needed = this.#sync.needed(); needed.length > 0; needed = this.#sync.needed()) {
        await fetchRecords(this.#host.backend, needed, (_, key, value) => this.#sync.supply(key, value));
        for (const ready of this.#sync.takeReady()) this.#queue(ready);
      }
    } catch (e) {
      this.#failure = e;
      this.#onFailure(e);
    }
  }

  /** Resolves once nothing is being read or written. */
  async #idle(): Promise<void> {
    while (this.#matching !== undefined || this.#writing !== undefined) await (this.#matching ?? this.#writing);
  }

  /** Writes what is pending, a batch at a time, until nothing is. */
  async #drain(): Promise<void> {
    try {
      while (this.#pending.length > 0) {
        // Let the chunks that arrive meanwhile join the batch, unless the sync is finishing or stopping.
        const full = () => this.#pendingBytes >= WRITE_BATCH_BYTES || this.#pending.length >= WRITE_BATCH_CHUNKS;
        for (let waited = 0; waited < WRITE_WAIT_MS && !this.#stopping && !full(); waited += 10) {
          await new Promise((r) => setTimeout(r, 10));
        }
        const [maxChunks, maxBytes] = this.#stored === this.restored.length ? [WRITE_BATCH_CHUNKS, WRITE_BATCH_BYTES] : [Infinity, WRITE_MAX_BYTES];
        let [take, bytes] = [0, 0];
        while (take < this.#pending.length && take < maxChunks && (take === 0 || bytes + this.#pending[take]!.bytes <= maxBytes)) {
          bytes += this.#pending[take++]!.bytes;
        }
        const chunks = this.#pending.splice(0, take);
        this.#writingBytes = bytes;
        this.#writingChunks = take;
        this.#pendingBytes -= bytes;
        await this.#host.backend.write({ puts: chunks.flatMap((c) => c.puts) });
        this.writtenBytes += bytes;
        this.#stored += this.#writingChunks;
        this.#writingBytes = 0;
        this.#writingChunks = 0;
        this.#onStored(this.#stored);
      }
    } catch (e) {
      this.#failure = e;
      this.#onFailure(e);
    } finally {
      this.#writing = undefined;
    }
  }

  async finish(): Promise<{ version: number }> {
    this.#stopping = true;
    try {
      await this.#idle();
      if (this.#failure !== undefined) throw this.#failure;
      if (this.#sync.received === 0) return { version: await this.#host.commitEmpty(this.#root) };
      await this.#markStale();
      const w: WriteSet = this.#sync.finish();
      const chunkCount = this.#sync.chunkCount!;
      const puts: Put[] = [...w.puts, ...staleMarks(w.stale), ['versions', versionKey(w.version), w.versionRecord]];
      this.writtenBytes += putBytes(puts);
      const batch: WriteBatch = { puts, deletes: [['meta', SYNC_KEY]], deleteRanges: [['meta', PROGRESS_START, PROGRESS_END]] };
      await this.#host.commitSynced(batch, w.version, w.versionRecord, this.#sync.capacity!);
      return { version: w.version };
    } finally {
      this.#release();
    }
  }

  /**
   * As a head's next version: reads the head's chunk records that the new
   * version does not use and writes their stale marks (and their entries'),
   * a round at a time, ahead of the last write (born at the new version, so
   * a resume writes them again and a discard removes them).
   */
  async #markStale(): Promise<void> {
    for (let needed = this.#sync.staleNeeded(); needed.length > 0; needed = this.#sync.staleNeeded()) {
      await fetchRecords(this.#host.backend, needed, (_, key, value) => this.#sync.staleSupply(key, value));
      const puts = staleMarks(this.#sync.takeStale());
      this.writtenBytes += putBytes(puts);
      if (puts.length > 0) await this.#host.backend.write({ puts });
    }
  }

  /**
   * Stops the sync: what was verified is written at once (kept for a resume), then the sink is
   * released. Resolves once those writes landed or failed (`syncState` settles only then, so
   * the store holds what its last `stored` event said); never rejects.
   */
  close(): Promise<void> {
    if (!this.#stopping) {
      this.#stopping = true;
      this.#closed = this.settled().catch(() => {}); // a failed abandon leaves the sync for `discardSync`
    }
    // Stopped by `finish`, which waits for the writes itself: wait for them here too.
    return this.#closed ?? this.#idle();
  }

  /** Resolves once nothing is being written (`State.close` waits for it); a sync that can never finish is forgotten. */
  async settled(): Promise<void> {
    await this.#idle();
    if (!this.#stopping) return;
    try {
      if (this.#abandoned) await this.#host.abandon();
    } finally {
      this.#release();
    }
  }

  #release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#sync.free();
    this.#host.release();
  }
}

/** The sink of a store whose head is the root asked for already: nothing to fetch. */
export class Synced {
  readonly restored: number[];
  readonly chunkCount: number;
  readonly backlogBytes = 0;
  readonly writtenBytes = 0;
  readonly changedChunks = 0;
  readonly changedIndices = new Uint32Array(0);
  readonly #version: number;

  constructor(version: number, chunkCount: number) {
    this.#version = version;
    this.chunkCount = chunkCount;
    this.restored = Array.from({ length: chunkCount }, (_, i) => i);
  }

  add(): void {
    throw new StoreError('SYNC_PENDING', 'the store holds this state already');
  }

  watch(): void {}

  async finish(): Promise<{ version: number }> {
    return { version: this.#version };
  }

  async close(): Promise<void> {}
}
