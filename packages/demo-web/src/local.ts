/**
 * The state this page keeps in the browser: `@bpavl/store` on IndexedDB, one
 * database, so that a sync interrupted by a reload or a closed tab resumes
 * from what it stored, a finished one is read again after a reload without
 * syncing, and a kept state catches up to a newer root instead of being
 * fetched again (as `bpavl sync --db` does).
 * @module
 */

import { openIndexedDbBackend, writerHolds } from '@bpavl/storage/indexeddb';
import { openState, type State, TABLES } from '@bpavl/store';

const PREFIX = 'bpavl-demo-';
const NAME = `${PREFIX}state`;

/** The page's one kept state (a page is its one writer). */
export class LocalState {
  #state: Promise<State> | undefined;

  /** The kept state, opened once and kept open. */
  open(): Promise<State> {
    if (this.#state === undefined) {
      const opening = openIndexedDbBackend({ name: NAME, tables: TABLES }).then((backend) => openState({ backend }));
      opening.catch(() => {
        if (this.#state === opening) this.#state = undefined;
      });
      this.#state = opening;
    }
    return this.#state;
  }

  /** Whether another tab has the state open for writing (the store's one writer). */
  async heldElsewhere(): Promise<boolean> {
    // This page's own writer lets go first: a writer left is another tab's.
    await this.#close();
    return writerHolds(NAME);
  }

  /** Closes the state and deletes every database of this demo (call `heldElsewhere` first: a tab that has it open loses it). */
  async clear(): Promise<void> {
    await this.#close();
    const names = (await indexedDB.databases()).map((d) => d.name).filter((n): n is string => n?.startsWith(PREFIX) ?? false);
    await Promise.all(
      names.map(
        (name) =>
          new Promise<void>((resolve, reject) => {
            const req = indexedDB.deleteDatabase(name);
            req.onsuccess = () => resolve();
            req.onerror = () => reject(req.error);
            req.onblocked = () => resolve(); // another tab holds it: deleted once it lets go
          }),
      ),
    );
  }

  async #close(): Promise<void> {
    const state = this.#state;
    this.#state = undefined;
    await state?.then((s) => s.close(), () => {});
  }
}
