/**
 * The moving head: the demo launcher's feed of trusted roots (`/head.json`,
 * standing in for a chain's header feed) and the list of catch-ups the page
 * made to them. No protocol logic: the catch-up is `@bpavl/light-client`'s.
 * @module
 */

import { count, mb, secondsText, shortHex } from './format.js';

/** One published head (`/head.json`), oldest first. */
export interface PublishedHead {
  version: number;
  root: string;
  entryCount: number;
  chunkCount: number;
  /** About the bytes a full sync of this version fetches. */
  bytes: number;
  /** When the launcher published it (ms since the epoch). */
  at: number;
}

/** Polls `/head.json` every `everyMs` for the page's life; calls `onHeads` when the newest head changes. */
export function pollHeads(everyMs: number, onHeads: (heads: PublishedHead[]) => void): void {
  let newest = '';
  const poll = async () => {
    try {
      const res = await fetch('head.json', { cache: 'no-store' });
      if (!res.ok) return;
      const { heads } = (await res.json()) as { heads: PublishedHead[] };
      const last = heads.at(-1);
      if (last && last.root !== newest) {
        newest = last.root;
        onHeads(heads);
      }
    } catch {
      // The launcher stopped, or a poll overlapped a reload: the next poll tries again.
    }
  };
  void poll();
  setInterval(() => void poll(), everyMs);
}

/** One finished catch-up, as the list shows it. */
export interface CatchUpRow {
  /** The feed's version of the root caught up to (the store numbers its own versions). */
  feedVersion: number | undefined;
  root: string;
  bytes: number;
  fullBytes: number | undefined;
  changedChunks: number;
  chunkCount: number;
  seconds: number;
  banned: { peer: string; code: string }[];
}

/** The list of catch-ups, newest first (at most `max` shown). */
export class CatchUpList {
  readonly #list: HTMLOListElement;
  readonly #max: number;

  constructor(list: HTMLOListElement, max = 20) {
    this.#list = list;
    this.#max = max;
  }

  add(row: CatchUpRow, peerLabel: (address: string) => string): void {
    const li = document.createElement('li');
    li.dataset.root = row.root;
    if (row.feedVersion !== undefined) li.dataset.version = String(row.feedVersion);
    li.dataset.peers = row.banned.map((b) => b.peer).join(' ');
    li.dataset.bytes = String(row.bytes);
    if (row.fullBytes !== undefined) li.dataset.full = String(row.fullBytes);
    li.dataset.banned = String(row.banned.length);
    li.dataset.codes = row.banned.map((b) => b.code).join(' ');
    li.dataset.changed = String(row.changedChunks);
    li.dataset.chunks = String(row.chunkCount);
    const of = row.fullBytes ? ` of ≈ ${mb(row.fullBytes)} (${((100 * row.bytes) / row.fullBytes).toFixed(1)} %)` : '';
    const head = document.createElement('div');
    head.innerHTML = `<strong>${row.feedVersion === undefined ? 'root' : `head ${row.feedVersion}`}</strong> <code>${shortHex(row.root)}</code>: <strong class="fetched">${mb(row.bytes)}</strong> fetched${of}`;
    const detail = document.createElement('div');
    detail.className = 'muted';
    detail.textContent =
      `${count(row.changedChunks)} of ${count(row.chunkCount)} chunks changed · ${secondsText(row.seconds)} · ` +
      (row.banned.length ? `banned: ${row.banned.map((b) => `${peerLabel(b.peer)} ${b.code}`).join(', ')}` : 'no peer banned');
    li.append(head, detail);
    this.#list.prepend(li);
    while (this.#list.children.length > this.#max) this.#list.lastElementChild!.remove();
  }

  clear(): void {
    this.#list.replaceChildren();
  }
}
