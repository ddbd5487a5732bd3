/**
 * The bpavl demo page: a state sync from untrusted peers, live. All protocol
 * work is `@bpavl/light-client` (`syncState`, the verifiers, the wire
 * codec); this file only wires the form to it and draws its events.
 * @module
 */

import { type CatchUpResult, catchUp, SyncError, type SyncEvent, syncState } from '@bpavl/light-client/sync';
import type { State } from '@bpavl/store';
import { ThroughputChart } from './chart.js';
import { bytesText, count, fromHex, mb, msText, rateText, secondsText, shortHex, toHex } from './format.js';
import { CatchUpList, type PublishedHead, pollHeads } from './follow.js';
import { ChunkGrid } from './grid.js';
import { LocalState } from './local.js';
import { SyncModel } from './model.js';
import { PeerTable } from './peer-table.js';
import { type DemoConfig, type Dial, dials, modeText, parsePeerList, peerListText, type Transport } from './peers.js';
import { QueryPanel } from './query.js';
import './style.css';

const $ = <T extends HTMLElement>(sel: string) => document.querySelector<T>(sel)!;

const form = $<HTMLFormElement>('#setup-form');
const rootInput = $<HTMLInputElement>('#root');
const rootHelp = $('#root-help');
const rootError = $('#root-error');
const peerList = $<HTMLTextAreaElement>('#peer-list');
const peersHelp = $('#peers-help');
const peersError = $('#peers-error');
const startButton = $<HTMLButtonElement>('#start');
const stopButton = $<HTMLButtonElement>('#stop');
const clearButton = $<HTMLButtonElement>('#clear-local');
const localStatus = $('#local-status');
const banner = $('#banner');
const progressBar = $<HTMLProgressElement>('#progress');
const progressText = $('#progress-text');
const logList = $<HTMLOListElement>('#log');
const logEmpty = $('#log-empty');
const followCard = $('#follow');
const headStatus = $('#head-status');
const followBox = $<HTMLInputElement>('#follow-head');
const gridEl = $('#grid');

let config: DemoConfig | undefined;
let current: { ctl: AbortController; model: SyncModel; dials: Map<string, Dial>; timer: ReturnType<typeof setInterval> } | undefined;
/** The model the grid shows: the last sync's, or the kept state's after a reload (kept after it ends, for the grid's tooltips). */
let lastModel: SyncModel | undefined;
let lastDials = new Map<string, Dial>();
/** What the grid shows when it is a catch-up's new version (its tooltips say so), else `undefined`. */
let gridCatchUp: { fromVersion: number; version: number; what: string } | undefined;
/** Where syncs are written, and caught up: one store in IndexedDB. */
const local = new LocalState();
/** The running catch-up, if any (a sync is `current`). */
let catching: AbortController | undefined;
/** The moving head's published heads, oldest first (empty: a fixed state). */
let heads: PublishedHead[] = [];
const catchUps = new CatchUpList($<HTMLOListElement>('#follow-log'));
/** The kept state whose head is the trusted root, once one is. */
let synced: State | undefined;
/** Versions the kept state keeps while it follows the head: older ones are pruned after each catch-up. */
const KEEP_LAST = 3;
/** Failed catch-ups in a row, and the timer of the next try (none is started meanwhile). */
let failures = 0;
let retryTimer: ReturnType<typeof setTimeout> | undefined;

function transport(): Transport {
  return (form.elements.namedItem('transport') as RadioNodeList).value as Transport;
}

function currentDials(): Dial[] {
  return dials(parsePeerList(peerList.value, config?.peers).lines, transport());
}

function setError(input: HTMLElement, el: HTMLElement, message: string | undefined): void {
  el.hidden = message === undefined;
  el.textContent = message ?? '';
  if (message === undefined) input.removeAttribute('aria-invalid');
  else input.setAttribute('aria-invalid', 'true');
}

/** The trusted root from the form, or `undefined` with the field marked. */
function trustedRoot(): Uint8Array | undefined {
  const root = fromHex(rootInput.value);
  if (!root || root.length !== 32) {
    setError(rootInput, rootError, 'The trusted root is 32 bytes: 64 hex digits.');
    return undefined;
  }
  setError(rootInput, rootError, undefined);
  return root;
}

// ---------------------------------------------------------------- views

const grid = new ChunkGrid($('#grid'), $('#chunk-tip'), describeChunk);
const table = new PeerTable($<HTMLTableSectionElement>('#peer-table tbody'));
const chart = new ThroughputChart($('#chart'), $('#chart-caption'));
const query = new QueryPanel({
  root: trustedRoot,
  local: () => synced,
  dials: currentDials,
  workload: () => (config ? { entries: config.entryCount, seed: BigInt(config.seed) } : undefined),
});

function peerLabel(address: string | undefined): string {
  if (address === undefined) return '?';
  const d = current?.dials.get(address) ?? lastDials.get(address);
  return d ? `${d.peer} (${d.transport === 'ws' ? 'WebSocket' : 'libp2p'})` : address;
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function describeChunk(index: number): { label: string; html: string } {
  const c = (current?.model ?? lastModel)?.cells.get(index);
  const state = c?.state ?? 'pending';
  const up = gridCatchUp;
  const words = {
    pending: 'pending',
    inflight: 'in flight',
    verified: 'verified',
    rejected: 'rejected, waiting for another peer',
    restored: 'restored from this browser (verified by an earlier run)',
    changed: `changed: fetched by the catch-up to ${up?.what ?? 'the new root'} (or a run of it that was interrupted) and verified`,
    kept: `unchanged: kept from this browser's version ${up?.fromVersion ?? '?'}, not fetched`,
  }[state];
  const lines = [`<strong>Chunk ${index}</strong> · ${words}`];
  let label = `Chunk ${index}: ${words}`;
  if (c?.state === 'inflight') {
    lines.push(`asked of ${esc(peerLabel(c.peer))}`);
    label += `, asked of ${peerLabel(c.peer)}`;
  }
  if (c?.state === 'verified') {
    lines.push(`from ${esc(peerLabel(c.peer))}`, `${bytesText(c.bytes ?? 0)} · ${msText(c.ms ?? 0)} · at ${(c.at ?? 0).toFixed(2)} s`);
    label += ` from ${peerLabel(c.peer)}, ${bytesText(c.bytes ?? 0)}, ${msText(c.ms ?? 0)}`;
  }
  for (const r of c?.rejections ?? []) {
    lines.push(`<span class="bad">rejected from ${esc(peerLabel(r.peer))}: <code>${esc(r.code)}</code> at ${r.at.toFixed(2)} s</span>`);
    label += `; rejected from ${peerLabel(r.peer)} with ${r.code}`;
  }
  return { label, html: lines.join('<br>') };
}

function renderIdleTable(): void {
  if (current || catching) return;
  const ds = currentDials();
  table.setDials(ds);
  query.refreshPeers();
  const { lines, bad } = parsePeerList(peerList.value, config?.peers);
  const known = lines.filter((l) => l.mode !== undefined).length;
  peersHelp.textContent =
    `${lines.length} peer${lines.length === 1 ? '' : 's'}, ${ds.length} address${ds.length === 1 ? '' : 'es'} for this transport` +
    (config && known > 0 ? `; ${lines.filter((l) => l.mode).length} of them Byzantine (the table shows each mode).` : '.');
  setError(peerList, peersError, bad.length > 0 ? `Not an address (ignored): ${bad.slice(0, 3).join(', ')}` : undefined);
}

function renderProgress(m: SyncModel): void {
  const now = performance.now();
  const total = m.chunkCount;
  progressBar.max = total ?? 1;
  progressBar.value = total === undefined ? 0 : m.done;
  const seconds = m.seconds(now);
  const parts: string[] = [];
  if (total === undefined) parts.push(m.endedAt === undefined ? 'waiting for the first verified chunk' : 'no chunk verified');
  else parts.push(`${count(m.done)} / ${count(total)} chunks`);
  const estTotal = total !== undefined && m.done > 0 ? (m.bytes / m.done) * total : undefined;
  parts.push(estTotal !== undefined && m.done < (total ?? 0) ? `${mb(m.bytes)} of ≈ ${mb(estTotal)}` : mb(m.bytes));
  parts.push(rateText(m.bytesPerSecond));
  if (m.endedAt === undefined && m.etaSeconds !== undefined) parts.push(`ETA ${secondsText(m.etaSeconds)}`);
  parts.push(`${secondsText(seconds)} elapsed`);
  if (m.rejected > 0) parts.push(`${m.rejected} rejected`);
  if (m.stored > 0) parts.push(`${count(m.stored)} kept in this browser`);
  progressText.textContent = parts.join(' · ');
  progressText.dataset.stored = String(m.stored);
}

/** What a refusal that is no lie means, for the log's quiet line. */
const REFUSALS: Record<string, string> = {
  BUSY: 'a peer at its request limit',
  CONNECT_FAILED: 'a peer down or restarting',
  CONNECTION_CLOSED: 'a connection that closed',
  TIMEOUT: 'a slow answer',
  UNKNOWN_ROOT: 'a peer not serving this root yet',
  BAD_REQUEST: 'a peer that predates the request',
};

function renderLog(m: SyncModel): void {
  const items = m.log.map((e) => {
    const li = document.createElement('li');
    if (e.index !== undefined) li.dataset.index = String(e.index);
    li.dataset.code = e.code;
    if (e.ban) li.dataset.ban = e.ban;
    const code = `<code class="code">${esc(e.code)}</code>`;
    if (e.index === undefined && e.kind === undefined) {
      // A catch-up's ban that came with no rejected answer.
      li.innerHTML = `<span class="t">${e.at.toFixed(2)} s</span> ${esc(peerLabel(e.peer))} <span class="bad">banned</span>: ${code} <span class="muted">(${esc(e.reason ?? '')})</span>`;
      return li;
    }
    const what = e.index === undefined ? `catch-up ${esc(e.kind ?? '')} request` : `chunk <strong>${e.index}</strong>`;
    li.innerHTML =
      `<span class="t">${e.at.toFixed(2)} s</span> ${what} from ${esc(peerLabel(e.peer))}: ${code}` +
      (e.index === undefined
        ? e.ban === 'already'
          ? ' <span class="muted">(already banned) → asked of another peer</span>'
          : ' <span class="bad">→ banned</span><span class="muted">, asked of another peer</span>'
        : e.late
        ? ` <span class="refetch">(already verified from ${esc(peerLabel(e.refetchedFrom))})</span>`
        : e.refetchedFrom
          ? ` <span class="refetch">→ refetched from ${esc(peerLabel(e.refetchedFrom))}, verified</span>`
          : m.endedAt === undefined
            ? ' <span class="muted">→ refetching…</span>'
            : ' <span class="muted">→ not verified before the sync ended</span>');
    return li;
  });
  if (m.transient.size > 0) {
    // Refusals are no lies: a peer busy or restarting is asked again later, and nobody is banned. Counted, not listed.
    const codes = [...m.transient].sort((a, b) => b[1] - a[1]);
    const total = codes.reduce((n, [, k]) => n + k, 0);
    const li = document.createElement('li');
    li.className = 'transient';
    li.dataset.transient = String(total);
    li.dataset.codes = codes.map(([c, k]) => `${c}:${k}`).join(' ');
    li.innerHTML =
      `${count(total)} refusal${total === 1 ? '' : 's'}, not lies (no ban; each request went to another peer): ` +
      codes.map(([c, k]) => `${count(k)} × <code>${esc(c)}</code>${REFUSALS[c] ? ` (${REFUSALS[c]})` : ''}`).join(', ');
    items.push(li);
  }
  logList.replaceChildren(...items);
  logEmpty.hidden = items.length > 0;
  logEmpty.textContent = 'No rejected answers yet.';
}

/** Draws what changed in `m`. */
function render(m: SyncModel): void {
  const now = performance.now();
  drawGrid(m);
  const seconds = m.seconds(now);
  for (const p of m.peers.values()) table.update(p, seconds);
  m.dirtyPeers.clear();
  if (m.dirtyProgress) renderProgress(m);
  if (m.dirtyLog) {
    renderLog(m);
    m.dirtyLog = false;
  }
}

/** Draws what changed in `m`'s cells. */
function drawGrid(m: SyncModel): void {
  if (m.totalChanged && m.chunkCount !== undefined) {
    grid.build(m.chunkCount);
    for (const i of m.cells.keys()) m.dirtyCells.add(i);
    m.totalChanged = false;
  }
  if (grid.size > 0) {
    for (const i of m.dirtyCells) grid.update(i, m.cells.get(i)!);
    m.dirtyCells.clear();
  }
}

function frame(): void {
  if (!current) return;
  render(current.model);
  requestAnimationFrame(frame);
}

// ---------------------------------------------------------------- banner

function showBanner(state: 'verified' | 'failed' | 'stopped', html: string): void {
  banner.dataset.state = state;
  banner.className = `banner ${state}`;
  banner.innerHTML = html;
  banner.hidden = false;
}

function bannedList(m: SyncModel): string {
  const banned = [...m.peers.values()].filter((p) => p.status === 'banned');
  return banned.map((p) => `${esc(peerLabel(p.address))} <code class="code">${esc(p.code ?? '?')}</code>`).join(', ');
}

// ---------------------------------------------------------------- sync

function setRunning(running: boolean): void {
  startButton.disabled = running;
  stopButton.disabled = !running;
  clearButton.disabled = running;
  rootInput.readOnly = running;
  peerList.readOnly = running;
  for (const r of form.querySelectorAll<HTMLInputElement>('input[name=transport]')) r.disabled = running;
  document.body.dataset.sync = running ? 'running' : 'idle';
}

async function start(): Promise<void> {
  if (current || catching) return;
  const root = trustedRoot();
  const ds = currentDials();
  if (ds.length === 0) {
    setError(peerList, peersError, `No ${transport() === 'both' ? '' : transport() === 'ws' ? 'WebSocket ' : 'libp2p '}address in the peer list.`);
  }
  if (!root) return rootInput.focus();
  if (ds.length === 0) return peerList.focus();
  const kept = await local.open().catch(() => undefined);
  const keptHead = kept?.head();
  const pending = await kept?.pendingSync();
  // Another run may have started while the store was opened.
  if (current || catching) return;
  if (kept && keptHead && !pending) {
    // A kept state at another root catches up to this one: only what changed is fetched.
    if (toHex(keptHead.root) !== toHex(root)) return follow(kept, root, ds);
    // Already kept at this root: nothing to fetch, and the last run's result stays on the page.
    await showLocal();
    progressText.textContent = `Nothing to sync: this browser already keeps the state at this root (version ${keptHead.version}).`;
    return;
  }
  // The head moves faster than a sync finishes: while following it, an unfinished sync of an older head is
  // resumed first (the catch-up to the newest head follows), as long as the peers still serve its root.
  const resume = pending && heads.length > 0 && followBox.checked && toHex(pending.root) !== toHex(root);
  if (resume) rootInput.value = toHex(pending.root);
  return sync(resume ? pending.root : root, ds);
}

/** Syncs the state at `root` from the peers `ds` into the kept state (resuming an unfinished sync of `root`). */
async function sync(root: Uint8Array, ds: Dial[]): Promise<void> {
  synced = undefined;
  query.setTreeAvailable(false);
  banner.hidden = true;
  delete banner.dataset.state;
  const dialMap = new Map(ds.map((d) => [d.address, d]));
  const model = new SyncModel(
    ds.map((d) => d.address),
    performance.now(),
  );
  const ctl = new AbortController();
  const timer = setInterval(() => {
    model.sample(performance.now());
    chart.update(model.samples);
  }, 250);
  current = { ctl, model, dials: dialMap, timer };
  lastModel = model;
  lastDials = dialMap;
  table.setDials(ds);
  grid.reset();
  gridCatchUp = undefined;
  gridEl.dataset.root = toHex(root);
  chart.reset();
  renderLog(model);
  setRunning(true);
  requestAnimationFrame(frame);

  const onEvent = (e: SyncEvent) => model.apply(e, performance.now());
  try {
    const state = await local.open();
    // The user asked for this root: an unfinished sync of another root is dropped.
    const pending = await state.pendingSync();
    if (pending && toHex(pending.root) !== toHex(root)) await state.discardSync();
    const result = await syncState({ root, peers: ds.map((d) => d.address), signal: ctl.signal, onEvent, store: state });
    const rebuilt = toHex(state.head()!.root);
    if (rebuilt === toHex(root)) synced = state;
    model.end(performance.now());
    const ok = rebuilt === toHex(root);
    showBanner(
      ok ? 'verified' : 'failed',
      ok
        ? `<h2>✓ Root verified</h2>
           <p class="root">root <code data-field="root">${rebuilt}</code></p>
           <ul class="stats">
             <li><strong data-field="time">${secondsText(result.seconds)}</strong> to sync</li>
             <li><strong data-field="bytes">${mb(model.bytes)}</strong> verified in ${count(result.chunkCount - result.restored)} chunks${result.bytes > model.bytes ? ` (${mb(result.bytes)} received)` : ''}</li>
             ${result.restored > 0 ? `<li><strong data-field="restored">${count(result.restored)}</strong> chunks restored from this browser, not fetched again</li>` : ''}
             <li><strong data-field="rejected">${result.rejected}</strong> rejected chunk${result.rejected === 1 ? '' : 's'}</li>
             <li><strong>${result.banned.length}</strong> peer${result.banned.length === 1 ? '' : 's'} banned${result.banned.length ? `: ${bannedList(model)}` : ''}</li>
           </ul>
           <p class="muted">Every chunk was verified on arrival against the trusted root, and the state rebuilt from them, kept in this browser (IndexedDB) as version ${result.version}, has that same root.</p>`
        : `<h2>✗ Rebuilt root differs</h2><p>The rebuilt state's root <code>${rebuilt}</code> is not the trusted root. This is a bug.</p>`,
    );
    query.setTreeAvailable(ok);
  } catch (e) {
    model.end(performance.now());
    // syncState settles only once the store's last writes landed, and its last 'stored' event counts them.
    const keptChunks = model.stored;
    if (ctl.signal.aborted) {
      showBanner(
        'stopped',
        `<h2>■ Stopped</h2><p>You stopped the sync after ${secondsText(model.seconds(performance.now()))} with ${count(model.done)} of ${model.chunkCount === undefined ? '?' : count(model.chunkCount)} chunks verified, <strong data-field="kept">${count(model.stored)}</strong> of them kept in this browser: Start sync resumes from them.</p>`,
      );
    } else if (e instanceof SyncError && heads.length > 0 && rootExpired(e)) {
      // The peers serve only the last versions of the moving head: this root will never be served again.
      await (await local.open()).discardSync();
      const newest = heads.at(-1)!;
      rootInput.value = newest.root;
      const keep = config?.follow?.keepVersions;
      showBanner(
        'failed',
        `<h2>✗ Root no longer served: <code data-field="code">UNKNOWN_ROOT</code></h2>
         <p>The peers serve only the last ${keep ?? 'few'} versions of the moving head${keep && config?.follow ? ` (${secondsText(keep * config.follow.seconds)})` : ''}, and this sync of root <code>${shortHex(toHex(root))}</code> did not finish in that time.
         Its ${count(keptChunks)} kept chunks were dropped, and the trusted root moved to the newest head (version ${newest.version}): Start sync syncs it.</p>`,
      );
    } else if (e instanceof SyncError) {
      showBanner(
        'failed',
        `<h2>✗ Sync failed: <code data-field="code">${e.code}</code></h2><p>${esc(capitalize(e.message))}.</p>${model.peers.size ? `<p>Banned: ${bannedList(model) || 'none'}.</p>` : ''}`,
      );
    } else {
      const code = (e as { code?: unknown }).code;
      // A state kept in an older layout of the store (or damaged) is refused, never read: say how to start over.
      const corrupt = code === 'STORE_CORRUPT' ? '<p>The state kept in this browser cannot be used (damaged, or written by an older version of this page): Clear local data, then start the sync again.</p>' : '';
      showBanner(
        'failed',
        `<h2>✗ Sync failed${typeof code === 'string' ? `: <code data-field="code">${esc(code)}</code>` : ''}</h2><p>${esc((e as Error)?.message ?? String(e))}</p>${corrupt}${code === 'STORE_LOCKED' ? `<p>${ANOTHER_TAB}</p>` : ''}`,
      );
    }
  } finally {
    clearInterval(timer);
    model.sample(performance.now());
    current = undefined;
    render(model);
    chart.update(model.samples, true);
    const focus = document.activeElement;
    setRunning(false);
    takeNewestHead();
    void showLocal().then(followHead);
    // Move focus to the outcome only if the user was on the sync's buttons (not typing elsewhere).
    if (focus === stopButton || focus === startButton || focus === document.body || focus === null) banner.focus();
  }
}

/** Whether every peer not banned answered `UNKNOWN_ROOT`: the root is no longer served (it was, when it was published). */
function rootExpired(e: SyncError): boolean {
  return e.code === 'NO_HONEST_PEERS' && e.peers.some((p) => p.code === 'UNKNOWN_ROOT') && e.peers.every((p) => p.code === 'UNKNOWN_ROOT' || p.outcome === 'banned');
}

form.addEventListener('submit', (e) => {
  e.preventDefault();
  void start();
});
stopButton.addEventListener('click', () => (current?.ctl ?? catching)?.abort(new DOMException('stopped by the user', 'AbortError')));
followBox.addEventListener('change', followHead);
clearButton.addEventListener('click', () => void clearLocal());

// ---------------------------------------------------------------- local state

/** What the page says when another tab holds the kept state (the store has one writer: `STORE_LOCKED`). */
const ANOTHER_TAB = 'Another tab of this page has the state kept in this browser open: use that tab, or close it and reload this one.';

/** Says what this browser keeps, and lets the query panel read it when its root is the trusted root. */
async function showLocal(): Promise<void> {
  if (current || catching) return;
  const root = fromHex(rootInput.value);
  const asked = root?.length === 32 ? toHex(root) : undefined;
  try {
    const state = await local.open();
    const head = state.head();
    const pending = head ? undefined : await state.pendingSync();
    const have = head !== undefined && toHex(head.root) === asked;
    const partial = pending !== undefined && toHex(pending.root) === asked;
    synced = have ? state : undefined;
    query.setTreeAvailable(have);
    localStatus.dataset.kept = have ? 'synced' : head ? 'other' : partial ? 'partial' : pending ? 'other-partial' : 'none';
    localStatus.dataset.chunks = String(head ? head.chunkCount : (pending?.chunksStored ?? 0));
    localStatus.dataset.versions = String(state.versions().length);
    const versions = heads.length > 0 && head ? ` While it follows the head it keeps its last ${KEEP_LAST} versions (now ${state.versions().length}); older ones are pruned.` : '';
    localStatus.textContent =
      (have
        ? `This browser keeps the synced state of this root (${count(head.entryCount)} entries): the query panel reads it without syncing again.`
        : head
          ? `This browser keeps the state at another root (${count(head.entryCount)} entries, root ${shortHex(toHex(head.root))}): Start sync catches it up to the trusted root, fetching only what changed.`
          : partial
            ? `This browser keeps ${count(pending.chunksStored)} verified chunks of an unfinished sync of this root: Start sync resumes from them.`
            : pending
              ? heads.length > 0 && followBox.checked
                ? `This browser keeps ${count(pending.chunksStored)} verified chunks of an unfinished sync of an older head (root ${shortHex(toHex(pending.root))}): Start sync resumes it if the peers still serve that root, then catches up to the newest head.`
                : `This browser keeps ${count(pending.chunksStored)} verified chunks of an unfinished sync of another root: Start sync drops them.`
              : 'Nothing of this state is kept in this browser yet.') + versions;
    // After a reload the grid shows the kept chunks, not "chunk count unknown" (unless a run has drawn its own meanwhile).
    if (head && !lastModel && !current && !catching) showKept(toHex(head.root), head.chunkCount, head.version);
  } catch (e) {
    const code = (e as { code?: string }).code;
    localStatus.dataset.kept = 'error';
    localStatus.textContent = `The local state cannot be read: ${code ?? (e as Error).message}. ${code === 'STORE_LOCKED' ? ANOTHER_TAB : 'Clear local data to start over.'}`;
  }
}

/** Draws a kept state (`root`) of `chunkCount` chunks: every cell restored from this browser. */
function showKept(root: string, chunkCount: number, version: number): void {
  const now = performance.now();
  const model = new SyncModel([], now);
  model.apply({ type: 'restored', chunks: chunkCount, chunkCount, indices: Array.from({ length: chunkCount }, (_, i) => i) }, now);
  model.end(now);
  model.dirtyProgress = false;
  lastModel = model;
  gridCatchUp = undefined;
  gridEl.dataset.root = root;
  render(model);
  progressBar.max = chunkCount;
  progressBar.value = chunkCount;
  // A catch-up's line, if one already ran, says more.
  if (progressText.textContent === 'Not started.') progressText.textContent = `${count(chunkCount)} / ${count(chunkCount)} chunks kept in this browser (its version ${version}).`;
}

// ---------------------------------------------------------------- catch-up

/** Catches the kept state up to `root` from the peers `ds`: only what changed is fetched and verified. */
async function follow(state: State, root: Uint8Array, ds: Dial[]): Promise<void> {
  const ctl = new AbortController();
  catching = ctl;
  clearTimeout(retryTimer);
  retryTimer = undefined;
  synced = undefined;
  query.setTreeAvailable(false);
  // The last result (the sync's "Root verified", or a failure with its code) stays shown until this one ends.
  lastDials = new Map(ds.map((d) => [d.address, d]));
  // The peer table and the rejection log show this catch-up: its requests, rejections and bans.
  const model = new SyncModel(
    ds.map((d) => d.address),
    performance.now(),
  );
  table.setDials(ds);
  renderLog(model);
  const drawPeers = () => {
    const seconds = model.seconds(performance.now());
    for (const p of model.peers.values()) table.update(p, seconds);
    if (model.dirtyLog) renderLog(model);
    model.dirtyLog = false;
  };
  setRunning(true);
  const hex = toHex(root);
  const published = heads.find((h) => h.root === hex);
  const from = state.head()!;
  const what = published ? `head ${published.version}` : `root ${shortHex(hex)}`;
  progressText.textContent = `Catching up from version ${from.version} to ${what}…`;
  let ok = false;
  try {
    // The user (or the head) asked for this root: an unfinished catch-up to another root is dropped.
    const other = state.pendingCatchUp();
    if (other && toHex(other) !== hex) await state.discardSync();
    const r = await catchUp({
      store: state,
      root,
      peers: ds.map((d) => d.address),
      signal: ctl.signal,
      onEvent: (e) => {
        model.applyCatchUp(e, performance.now());
        if (e.type === 'progress') progressText.textContent = `Catching up to ${what}: ${mb(e.bytes)} fetched, ${count(e.changedChunks)} changed chunks found so far`;
        else if (e.type === 'banned' || e.type === 'rejected') drawPeers();
      },
    });
    // Following, the kept state would grow by every version: only the last few are kept.
    await state.prune({ keepLast: KEEP_LAST });
    ok = true;
    failures = 0;
    const head = state.head()!;
    synced = state;
    query.setTreeAvailable(true);
    rootInput.value = hex;
    catchUps.add(caughtUpRow(r, published, head.chunkCount), peerLabel);
    // The grid now describes the version caught up to (its chunk count may differ): what this catch-up changed, and what it kept.
    model.showVersion(head.chunkCount, r.changedIndices);
    lastModel = model;
    gridCatchUp = { fromVersion: r.fromVersion, version: r.version, what };
    gridEl.dataset.root = hex;
    drawGrid(model);
    progressBar.max = head.chunkCount;
    progressBar.value = head.chunkCount;
    progressText.textContent =
      `Caught up to ${what}: ${mb(r.bytes)} fetched${published ? ` of ≈ ${mb(published.bytes)} for a full sync` : ''}; ` +
      `${count(r.changedChunks)} of ${count(head.chunkCount)} chunks changed.`;
    showBanner(
      'verified',
      `<h2>✓ Caught up to <span data-field="version">${esc(what)}</span>: root verified</h2>
       <p class="root">root <code data-field="root">${hex}</code></p>
       <ul class="stats">
         <li><strong data-field="fetched">${mb(r.bytes)}</strong> fetched${published ? ` of <span data-field="full" data-bytes="${published.bytes}">≈ ${mb(published.bytes)}</span> that a full sync fetches (${((100 * r.bytes) / published.bytes).toFixed(1)} %)` : ''}</li>
         <li><strong data-field="changed">${count(r.changedChunks)}</strong> of ${count(head.chunkCount)} chunks changed</li>
         <li><strong>${secondsText(r.seconds)}</strong> to catch up</li>
         <li><strong data-field="banned">${r.banned.length}</strong> peer${r.banned.length === 1 ? '' : 's'} banned${r.banned.length ? `: ${r.banned.map((b) => `${esc(peerLabel(b.peer))} <code class="code">${esc(b.code)}</code>`).join(', ')}` : ''}</li>
       </ul>
       <p class="muted">The state kept in this browser moved from its version ${r.fromVersion} to its version ${r.version} (this browser numbers its own versions): the chunks and nodes that did not change are shared with the old version, and every new piece was verified against the trusted root on arrival.</p>`,
    );
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const failed = `<h2>✗ Catch-up failed${typeof code === 'string' ? `: <code data-field="code">${esc(code)}</code>` : ''}</h2><p>${esc((e as Error)?.message ?? String(e))}</p>`;
    if (ctl.signal.aborted) {
      // Stopped by the user: not restarted by the next head.
      followBox.checked = false;
      showBanner(
        'stopped',
        '<h2>■ Stopped</h2><p>You stopped the catch-up, and following the head is off. What it verified is kept in this browser: the next catch-up to this root takes it back.</p>',
      );
      progressText.textContent = `The catch-up to ${what} did not finish.`;
    } else if (typeof code === 'string' && code.startsWith('STORE_')) {
      // The kept state itself failed (deleted by another tab, or damaged): trying again cannot help.
      followBox.checked = false;
      showBanner('failed', `${failed}<p>The state kept in this browser cannot be used any more (deleted or damaged): following the head stopped. Clear local data, then Start sync.</p>`);
      progressText.textContent = `The catch-up to ${what} did not finish, and following the head stopped.`;
    } else {
      // Peers down or all lying: try again later, waiting longer after each failure (2, 4, 8 … 60 s).
      failures += 1;
      const seconds = Math.min(60, 2 ** failures);
      retryTimer = setTimeout(() => {
        retryTimer = undefined;
        followHead();
      }, seconds * 1000);
      showBanner('failed', failed);
      progressText.textContent = `The catch-up to ${what} did not finish (failure ${failures} in a row): trying again in ${seconds} s.`;
    }
  } finally {
    model.end(performance.now());
    drawPeers();
    catching = undefined;
    setRunning(false);
    takeNewestHead();
    await showLocal();
    if (ok) followHead();
  }
}

function caughtUpRow(r: CatchUpResult, published: PublishedHead | undefined, chunkCount: number) {
  return {
    feedVersion: published?.version,
    root: toHex(r.root),
    bytes: r.bytes,
    fullBytes: published?.bytes,
    changedChunks: r.changedChunks,
    chunkCount,
    seconds: r.seconds,
    banned: r.banned.map((b) => ({ peer: b.peer, code: b.code })),
  };
}

/** With "Follow the head" on and nothing running (nor waiting to try again): catches the kept state up to the newest published root. */
function followHead(): void {
  const newest = heads.at(-1);
  if (!newest || !followBox.checked || current || catching || retryTimer) return;
  void local.open().then(
    async (state) => {
      const head = state.head();
      // An unfinished sync is resumed by Start sync, not here.
      if (!followBox.checked || !head || toHex(head.root) === newest.root || current || catching || retryTimer || (await state.pendingSync())) return;
      const ds = currentDials();
      if (ds.length > 0) await follow(state, fromHex(newest.root)!, ds);
    },
    () => {},
  );
}

/**
 * While "Follow the head" is on and nothing runs, the trusted root field
 * follows the feed: it moves to the newest head from any root the feed
 * published (not from one the user typed). An empty field takes it in any case.
 */
function takeNewestHead(): void {
  const newest = heads.at(-1);
  if (!newest || current || catching || rootInput.value === newest.root) return;
  const published = heads.some((h) => h.root === rootInput.value);
  if (rootInput.value === '' || (followBox.checked && published)) rootInput.value = newest.root;
}

/** A new head was published: the trusted root field follows it (`takeNewestHead`), and so does the kept state. */
function onHeads(next: PublishedHead[]): void {
  heads = next;
  const newest = next.at(-1)!;
  const ago = Math.max(0, (Date.now() - newest.at) / 1000);
  headStatus.innerHTML = `Head: <strong data-field="head-version">version ${newest.version}</strong>, root <code data-field="head-root">${newest.root}</code> (${count(newest.entryCount)} entries; ${ago < 1 ? 'just published' : `published ${ago.toFixed(0)} s ago`})`;
  headStatus.dataset.version = String(newest.version);
  if (config) showWorkload(config, newest);
  const before = rootInput.value;
  takeNewestHead();
  if (rootInput.value !== before) void showLocal();
  followHead();
}

async function clearLocal(): Promise<void> {
  if (current || catching) return;
  // The store has one writer: deleting its database under another tab would pull the state from under it.
  if (await local.heldElsewhere()) {
    localStatus.dataset.kept = 'error';
    localStatus.textContent = `Not cleared. ${ANOTHER_TAB}`;
    return;
  }
  clearTimeout(retryTimer);
  retryTimer = undefined;
  failures = 0;
  synced = undefined;
  query.setTreeAvailable(false);
  catchUps.clear();
  await local.clear();
  await showLocal();
}

/** The "This demo" line: the launcher's state, or the newest head's once the head moves. */
function showWorkload(c: DemoConfig, head?: PublishedHead): void {
  const byz = c.peers.filter((p) => p.mode).map((p) => `${p.name}: ${modeText(p.mode)}`);
  const workload = $('#workload');
  workload.textContent =
    `This demo: ${count(head?.entryCount ?? c.entryCount)} entries in ${count(head?.chunkCount ?? c.chunkCount)} chunks of ≤ ${c.chunk}${head ? ` (head version ${head.version})` : ''}, ` +
    `${c.peers.length} peers${byz.length ? `, ${byz.length} of them lying (${byz.join(', ')})` : ''}.`;
  workload.hidden = false;
}
peerList.addEventListener('input', renderIdleTable);
form.addEventListener('change', (e) => {
  if ((e.target as HTMLInputElement).name === 'transport') renderIdleTable();
});
rootInput.addEventListener('input', () => setError(rootInput, rootError, undefined));
rootInput.addEventListener('change', () => void showLocal());
banner.tabIndex = -1;

// ---------------------------------------------------------------- startup

async function loadConfig(): Promise<void> {
  const params = new URLSearchParams(location.search);
  try {
    const res = await fetch('peers.json', { cache: 'no-store' });
    if (res.ok) config = (await res.json()) as DemoConfig;
  } catch {
    // Not served by the demo launcher: the user fills the form.
  }
  const fromUrl = params.get('root');
  if (fromUrl) {
    rootInput.value = fromUrl;
    rootHelp.textContent = 'From the link you opened. Everything is checked against this hash and nothing else.';
  } else if (config?.follow) {
    rootHelp.textContent = 'The newest root of the head feed below. In real use it comes from a source you trust, never from a peer.';
  } else if (config) {
    rootInput.value = config.root;
    rootHelp.textContent = 'Filled in from this demo. In real use it comes from a source you trust, never from a peer.';
  }
  if (config) {
    peerList.value = peerListText(config.peers);
    document.title = `bpavl demo: ${count(config.entryCount)} entries, ${config.peers.length} peers`;
    showWorkload(config, heads.at(-1));
  }
  const t = params.get('transport');
  if (t === 'ws' || t === 'libp2p' || t === 'both') {
    (form.querySelector<HTMLInputElement>(`input[name=transport][value=${t}]`)!).checked = true;
  }
  renderIdleTable();
  if (config?.follow) {
    followCard.hidden = false;
    // The first head fills the trusted root; a feed that does not answer leaves the form to the user.
    await new Promise<void>((resolve) => {
      setTimeout(resolve, 3000);
      pollHeads(1000, (h) => {
        onHeads(h);
        resolve();
      });
    });
  }
  await showLocal();
  document.body.dataset.ready = 'true';
}

void loadConfig();
