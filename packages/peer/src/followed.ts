/**
 * The versions of a state directory that other processes write, served as
 * they come and go (`bpavl serve --db`): a version that `import`, `sync
 * --db` or a rollback commits is served without a restart, and one that a
 * prune or a rollback drops is no longer listed and is answered
 * `UNKNOWN_ROOT` (`spec/wire.md`, `ROOTS`).
 *
 * Why on demand, not on a timer: the version records are read again
 * (`State.refresh`) when a question needs the list, before a `ROOTS`
 * answer (at most `FOLLOW_INTERVAL_MS` old) and before an `UNKNOWN_ROOT`
 * one (read after the request came, so that a client told of a root just
 * committed is served it). An idle server then reads nothing, and no
 * answer rests on a list older than the interval. Reads run one at a time
 * and start at least `FOLLOW_INTERVAL_MS` apart, whatever the requests.
 *
 * A directory with no store yet (`serve --db --wait-for-store`) is followed
 * the same way (`FollowedState.awaiting`): each of these reads tries to
 * open the store instead, nothing is served until one opens, and then its
 * versions are followed as above.
 * @module
 */

import type { DamagedVersion, State, VersionInfo } from '@bpavl/store';
import { FOLLOW_INTERVAL_MS } from './constants.ts';
import { storedVersion } from './db-commands.ts';
import { type AnyServedTree, StaticTreeSource, toHex, type TreeSource } from './source.ts';

/** Where a `FollowedState` reports. */
export interface FollowLog {
  /** Versions served, and no longer served. */
  log?(message: string): void;
  /** A version whose record fails its checks (not served), or a read of the records that failed (the list stays as it was); each said once while it lasts. */
  warn(message: string): void;
}

/**
 * Every retained version of a read-only `State`, followed as other
 * processes commit, prune and roll back.
 *
 * @example
 * ```ts
 * const state = await openState({ path, readOnly: true });
 * const peer = await startPeer(new FollowedState(state, { warn: console.error }));
 * ```
 */
export class FollowedState implements TreeSource {
  #state: State | undefined;
  /** With `awaiting`: opens the store, `undefined` while there is none yet; the state it gives is this one's to close. */
  readonly #opener: (() => Promise<State | undefined>) | undefined;
  readonly #report: FollowLog;
  #served: StaticTreeSource;
  /** The versions whose records failed their checks at the last read, and whether the read itself failed (each reported once). */
  #damaged = new Set<number>();
  #failing = false;
  /** When the last read started (performance.now()); opening the state was one. */
  #lastStart = performance.now();
  /** The read running now, and the next one, waiting for it or for the interval. */
  #running: Promise<void> | undefined;
  #next: Promise<void> | undefined;
  #closed = false;

  /**
   * Serves the versions `state` holds now, and reports those whose records
   * failed their checks (`damagedVersions()`). The caller closes `state`,
   * after `close()`.
   */
  constructor(state: State, report: FollowLog);
  /** @internal `awaiting`'s. */
  constructor(state: { awaitStore: () => Promise<State | undefined> }, report: FollowLog);
  constructor(state: State | { awaitStore: () => Promise<State | undefined> }, report: FollowLog) {
    this.#report = report;
    if ('awaitStore' in state) {
      this.#opener = state.awaitStore;
      this.#served = new StaticTreeSource([]);
      return;
    }
    const opened = state as State;
    this.#state = opened;
    this.#served = new StaticTreeSource(opened.versions().map((v) => storedVersion(opened, v)));
    this.#warnDamaged(opened.damagedVersions());
  }

  /**
   * A directory that holds no store yet: serves no version, and calls
   * `open` where a followed state would read its version records again
   * (on demand, one at a time, at least `FOLLOW_INTERVAL_MS` apart), until
   * it gives a state (`undefined`: still none; a throw is reported once,
   * and the next read tries again). That state is then followed, and
   * `close()` closes it.
   */
  static awaiting(open: () => Promise<State | undefined>, report: FollowLog): FollowedState {
    return new FollowedState({ awaitStore: open }, report);
  }

  /** The state followed; `undefined` while an awaited store is not open yet. */
  get state(): State | undefined {
    return this.#state;
  }

  trees(): readonly AnyServedTree[] {
    return this.#served.trees();
  }

  lookup(root: Uint8Array): AnyServedTree | undefined {
    return this.#served.lookup(root);
  }

  drop(tree: AnyServedTree): void {
    this.#served = new StaticTreeSource(this.#served.trees().filter((t) => t !== tree));
  }

  /** Reads the version records again: with `fresh`, a read that starts after this call, else one at most `FOLLOW_INTERVAL_MS` old. Never rejects. */
  update(fresh: boolean): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (!fresh) {
      if (this.#running !== undefined) return this.#running;
      if (performance.now() - this.#lastStart < FOLLOW_INTERVAL_MS) return Promise.resolve();
    }
    this.#next ??= new Promise<void>((resolve) => {
      const start = () => {
        this.#next = undefined;
        if (this.#closed) return resolve();
        this.#lastStart = performance.now();
        const read = this.#read();
        this.#running = read;
        void read.then(() => {
          if (this.#running === read) this.#running = undefined;
          resolve();
        });
      };
      void (this.#running ?? Promise.resolve()).then(() => {
        setTimeout(start, Math.max(0, this.#lastStart + FOLLOW_INTERVAL_MS - performance.now())).unref();
      });
    });
    return this.#next;
  }

  /** Lets the read running now end; no read starts after it (close the state then, unless `awaiting` opened it: closed here). */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#running;
    if (this.#opener !== undefined) await this.#state?.close();
  }

  /** One read of the version records (or an open of the awaited store); a failure leaves the list as it was, and the next read tries again. */
  async #read(): Promise<void> {
    const state = this.#state;
    try {
      if (state === undefined) {
        await this.#openAwaited();
      } else {
        this.#warnDamaged(await state.refresh());
        this.#serve(state.versions());
      }
      this.#failing = false;
    } catch (e) {
      const what = state === undefined ? 'opening the store failed, serving no version until it opens' : 'reading the version records failed, serving the versions as before';
      if (!this.#closed && !this.#failing) this.#report.warn(`${what}: ${describe(e)}`);
      this.#failing = true;
    }
  }

  /** Opens the awaited store if it is there now, and serves its versions. */
  async #openAwaited(): Promise<void> {
    const state = await this.#opener!();
    if (state === undefined) return;
    if (this.#closed) {
      await state.close();
      return;
    }
    this.#state = state;
    this.#report.log?.(`the store was made: following it (${state.versions().length} versions)`);
    this.#warnDamaged(state.damagedVersions());
    this.#serve(state.versions());
  }

  /** Reports each damaged version not reported at the last read. */
  #warnDamaged(damaged: DamagedVersion[]): void {
    for (const { version, error } of damaged) {
      if (!this.#damaged.has(version)) this.#report.warn(`version ${version} is not served: ${describe(error)}`);
    }
    this.#damaged = new Set(damaged.map((d) => d.version));
  }

  /** Serves `versions`, keeping the served tree of each version already served with the same root. */
  #serve(versions: VersionInfo[]): void {
    const key = (t: { version: number; root: Uint8Array }) => `${t.version} ${toHex(t.root)}`;
    const held = new Map(this.#served.trees().map((t) => [key(t), t]));
    const state = this.#state!;
    const trees = versions.map((v) => held.get(key(v)) ?? storedVersion(state, v));
    const now = new Set(trees);
    for (const t of trees) if (!held.has(key(t))) this.#report.log?.(`serving version ${t.version} (root ${toHex(t.root)})`);
    for (const t of held.values()) if (!now.has(t)) this.#report.log?.(`version ${t.version} was pruned or rolled back by another process: no longer served`);
    this.#served = new StaticTreeSource(trees);
  }
}

function describe(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  return `${typeof code === 'string' ? `${code} ` : ''}${e instanceof Error ? e.message : String(e)}`;
}
