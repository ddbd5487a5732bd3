/**
 * The state this page keeps in the browser: `@bpavl/store` on IndexedDB,
 * one database per trusted root, so that a sync interrupted by a reload or
 * a closed tab resumes from what it stored, and a finished one is read
 * again after a reload without syncing.
 * @module
 */

import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { openState, type State, TABLES } from '@bpavl/store';
import { toHex } from './format.js';

const PREFIX = 'bpavl-demo-';

/** The open state of one root at a time (a page is its one writer). */
export class LocalState {
  #root: string | undefined;
  #state: Promise<State> | undefined;

  /** The state kept for `root`, opened once and kept open. */
  of(root: Uint8Array): Promise<State> {
    const hex = toHex(root);
    if (this.#root !== hex || this.#state === undefined) {
      void this.#close();
      this.#root = hex;
      const opening = openIndexedDbBackend({ name: PREFIX + hex, tables: TABLES }).then((backend) => openState({ backend }));
      opening.catch(() => {
        if (this.#state === opening) this.#state = undefined;
      });
      this.#state = opening;
    }
    return this.#state;
  }

  /** Closes the state and deletes every database of this demo. */
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
    this.#root = undefined;
    await state?.then((s) => s.close(), () => {});
  }
}
