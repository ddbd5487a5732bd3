// The browser half of `npm run bench:browser` (bench/browser.mjs): no
// UI, just `syncState` of @bpavl/light-client/sync over the ws:// peers the
// bench passes in. Two ways in:
// - timed runs: the page is opened with `?run=<JSON { root, peers, options,
//   warmup }>` in a Chromium that no DevTools client is attached to, and
//   POSTs what `__syncBench` resolves to (or `{ error }`) to `/result`;
// - with Playwright (--profile, --diagnose, --playwright): the bench calls
//   `window.__syncBench({ root, peers, … })` once #status is "ready".
// `root` is hex. With `warmup`, one untimed sync runs first (its seconds
// are reported as `warmupSeconds`), as bench:sync does. With `store`, the
// timed sync writes into a new IndexedDB store (`@bpavl/store`), deleted after.
// With `reloadAt` (a chunk count; timed runs only), the sync writes into a
// new IndexedDB store and the page reloads itself once that many chunks are
// durably stored; the reloaded page resumes the sync from the store
// (`resume`: the store's name) and reports what it restored and fetched.
import { connectWebSocket, syncState } from '@bpavl/light-client/sync';
import { openIndexedDbBackend } from '@bpavl/storage/indexeddb';
import { openState, TABLES } from '@bpavl/store';
import * as wasm from '@bpavl/wasm';

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const fromHex = (s) => Uint8Array.from(s.match(/../g), (x) => parseInt(x, 16));

/**
 * `diagnose`: keeps every chunk payload received (through a `connect` that
 * wraps the WebSocket transport) and, after the sync, times `verifyChunk` of
 * @bpavl/wasm over them in this page: the CPU the sync needs, against its
 * wall time.
 */
function keeping(kept) {
  return async (address, signal) => {
    const conn = await connectWebSocket(address, signal);
    const request = conn.request.bind(conn);
    conn.request = async (req, opts) => {
      const res = await request(req, opts);
      if (res.status === 0 && res.payload) kept.push({ index: req.index, payload: res.payload });
      return res;
    };
    return conn;
  };
}

function timeVerify(trusted, kept) {
  const t0 = performance.now();
  for (const { index, payload } of kept) {
    try {
      wasm.verifyChunk(trusted, index, payload).free();
    } catch {
      // a Byzantine peer's chunk
    }
  }
  return (performance.now() - t0) / 1000;
}

/** An IndexedDB store for one run (a new one unless `name` is given), and how to throw it away. */
async function newStore(name = `bpavl-bench-${Date.now()}-${Math.random().toString(36).slice(2)}`) {
  const state = await openState({ backend: await openIndexedDbBackend({ name, tables: TABLES }) });
  const drop = async () => {
    await state.close();
    await new Promise((ok) => {
      const req = indexedDB.deleteDatabase(name);
      req.onsuccess = req.onerror = req.onblocked = () => ok();
    });
  };
  return { state, drop, name };
}

/**
 * The first half of a reload run: a sync into a new store, left by a reload
 * of the page (to `?run=` with `resume`) once `reloadAt` chunks are durably
 * stored. Resolves only if the sync ends first, which is an error.
 */
async function syncUntilReload(run) {
  const stored = await newStore();
  const next = { ...run, reloadAt: undefined, resume: stored.name };
  let leaving = false;
  const onEvent = (e) => {
    if (e.type !== 'stored' || e.chunks < run.reloadAt || leaving) return;
    leaving = true;
    location.replace(`${location.pathname}?run=${encodeURIComponent(JSON.stringify(next))}`);
  };
  await syncState({ ...run.options, root: fromHex(run.root), peers: run.peers, onEvent, store: stored.state });
  if (!leaving) {
    await stored.drop();
    throw new Error(`the sync ended before ${run.reloadAt} chunks were stored`);
  }
  return new Promise(() => {}); // the page is going away
}

/** The second half: the reloaded page resumes the sync from the store `run.resume`. */
async function resumeAfterReload(run) {
  const stored = await newStore(run.resume);
  let restored = [];
  const fetched = new Set();
  let firstRequestSeconds;
  const onEvent = (e) => {
    if (e.type === 'restored') restored = e.indices;
    else if (e.type === 'chunk-verified') fetched.add(e.index);
    else if (e.type === 'request') firstRequestSeconds ??= performance.now() / 1000; // since the reload
  };
  try {
    const result = await syncState({ ...run.options, root: fromHex(run.root), peers: run.peers, onEvent, store: stored.state });
    return {
      ok: hex(stored.state.head().root) === run.root,
      chunkCount: result.chunkCount,
      restoredChunks: restored.length,
      fetchedChunks: fetched.size,
      redownloadedChunks: restored.filter((i) => fetched.has(i)).length,
      resumeStartSeconds: firstRequestSeconds,
    };
  } finally {
    await stored.drop();
  }
}

window.__syncBench = async ({ root, peers, diagnose = false, options = {}, warmup = false, store = false }) => {
  const kept = [];
  const trusted = fromHex(root);
  let warmupSeconds;
  if (warmup) {
    const w0 = performance.now();
    const warm = await syncState({ ...options, root: trusted, peers });
    warmupSeconds = (performance.now() - w0) / 1000;
    warm.tree.free();
  }
  let verifiedBytes = 0;
  let verifiedChunks = 0;
  let rejected = 0;
  const banned = [];
  const onEvent = (e) => {
    if (e.type === 'chunk-verified') {
      verifiedBytes += e.bytes;
      verifiedChunks += 1;
    } else if (e.type === 'chunk-rejected') rejected += 1;
    else if (e.type === 'peer-banned') banned.push({ peer: e.peer, code: e.code });
  };
  const stored = store ? await newStore() : undefined;
  const t0 = performance.now();
  const result = await syncState({ ...options, root: trusted, peers, onEvent, ...(diagnose && { connect: keeping(kept) }), ...(stored && { store: stored.state }) });
  const seconds = (performance.now() - t0) / 1000;
  try {
    const rebuilt = hex(stored ? stored.state.head().root : result.tree.head().root);
    return {
      ok: rebuilt === root,
      rebuiltRoot: rebuilt,
      seconds,
      engineSeconds: result.seconds,
      verifiedBytes,
      verifiedChunks,
      receivedBytes: result.bytes,
      chunkCount: result.chunkCount,
      refetches: result.refetches,
      rejected,
      banned,
      engineRejected: result.rejected,
      engineBanned: result.banned.length,
      mb_s: verifiedBytes / seconds / 1e6,
      ...(warmupSeconds !== undefined && { warmupSeconds }),
      ...(diagnose && { verify_seconds: [timeVerify(trusted, kept), timeVerify(trusted, kept), timeVerify(trusted, kept)] }),
    };
  } finally {
    result.tree?.free();
    await stored?.drop();
  }
};

const status = document.querySelector('#status');
status.dataset.state = 'ready';
status.textContent = 'ready';

// Without a DevTools client (the bench's default): the options come in the
// URL's `?run=` (JSON), the result goes back as a POST to `/result`.
const run = new URLSearchParams(location.search).get('run');
if (run !== null) {
  const post = (body) => fetch('/result', { method: 'POST', body: JSON.stringify(body) });
  const options = JSON.parse(run);
  const go = options.reloadAt !== undefined ? syncUntilReload : options.resume !== undefined ? resumeAfterReload : window.__syncBench;
  go(options).then(
    (r) => post(r),
    (e) => post({ error: String(e?.stack ?? e) }),
  );
}
