// The paper's Baseline state sync, client side, for bench:sync: fetch the
// Baseline chunks (benchmark-only wire kinds 5 BASELINE_CHUNK and
// 6 BASELINE_ROOTS, spec/wire.md) over WebSockets, apply them strictly in
// order with the Importer of @bpavl/baseline-wasm (crates/baseline), and
// compare the root only at the very end.
//
// Modelled on CometBFT's state sync (statesync/syncer.go): `fetchers`
// concurrent chunk fetchers (CometBFT's `chunk_fetchers`, default 4), each
// asking a randomly chosen peer for the next unallocated chunk; chunks are
// applied in order as they arrive. A chunk cannot be checked on its own, so
// a lie is found only when the final root differs, and nothing says which
// peer lied. Then, like CometBFT rejecting the snapshot's senders, the client
// starts over from ONE peer at a time, picked at random among the peers not
// tried yet, until the root matches; every failed single-peer attempt rejects
// that peer ("banned"). An import that breaks structurally (a record that
// does not parse) ends its attempt early, as CometBFT's app would reject the chunk.
import { TransportError } from '@bpavl/light-client/sync';
import { encodeFrame, FrameDecoder, MAX_RESPONSE_BYTES, Status } from '@bpavl/light-client/wire';
import { BaselineKind, decodeBaselineResponse, decodeBaselineRootsPayload, encodeBaselineRequest } from '../../packages/testnet/src/baseline.ts';
import { Importer } from '@bpavl/baseline-wasm';

/** One WebSocket to a serving peer, with pipelined Baseline requests. */
class BaselineConnection {
  constructor(url) {
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.decoder = new FrameDecoder(MAX_RESPONSE_BYTES);
    this.closed = false;
  }

  open(timeoutMs) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url);
      ws.binaryType = 'arraybuffer';
      this.ws = ws;
      const t = setTimeout(() => {
        ws.close();
        reject(new TransportError('CONNECT_FAILED', `${this.url}: no connection within ${timeoutMs} ms`));
      }, timeoutMs);
      ws.onopen = () => {
        clearTimeout(t);
        resolve(this);
      };
      ws.onmessage = (ev) => {
        if (typeof ev.data === 'string') return this.fail(new Error('text message'));
        let bodies;
        try {
          bodies = this.decoder.push(new Uint8Array(ev.data));
        } catch (e) {
          return this.fail(e);
        }
        for (const body of bodies) {
          let res;
          try {
            res = decodeBaselineResponse(body);
          } catch (e) {
            return this.fail(e);
          }
          const p = this.pending.get(res.id);
          if (p === undefined || p.kind !== res.kind) return this.fail(new Error(`unexpected response ${res.id}`));
          this.pending.delete(res.id);
          clearTimeout(p.timer);
          p.resolve(res);
        }
      };
      ws.onclose = () => {
        clearTimeout(t);
        this.fail(new TransportError('CONNECTION_CLOSED', `${this.url} closed`));
        reject(new TransportError('CONNECT_FAILED', `cannot connect to ${this.url}`));
      };
      ws.onerror = () => {};
    });
  }

  /** Sends a request; resolves with the response, rejects on timeout or a closed / faulty connection. */
  request(req, timeoutMs) {
    if (this.closed) return Promise.reject(new TransportError('CONNECTION_CLOSED', `${this.url} closed`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new TransportError('TIMEOUT', `${this.url}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { kind: req.kind, resolve, reject, timer });
      this.ws.send(encodeFrame(encodeBaselineRequest({ ...req, id })));
    });
  }

  fail(err) {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    try {
      this.ws?.close();
    } catch {
      // Already closing.
    }
  }

  close() {
    this.fail(new TransportError('CONNECTION_CLOSED', 'closed by the client'));
  }
}

const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Syncs the Baseline state whose trusted root is `root` from `peers` (ws://
 * URLs). Resolves with { seconds, chunks, chunksSent, refetched, banned,
 * attempts }; rejects if no attempt yields the trusted root, or on `signal`.
 *
 * @param {object} o
 * @param {Uint8Array} o.root             the trusted root (the bench built the same state)
 * @param {string[]} o.peers
 * @param {() => number} o.random         uniform in [0, 1): picks peers
 * @param {number} [o.fetchers]           concurrent chunk requests (default 4, as CometBFT)
 * @param {number} [o.requestTimeoutMs]   per request (default 10,000)
 * @param {number} [o.maxRetries]         failed requests per attempt before it is given up (default 64)
 * @param {AbortSignal} [o.signal]
 * @param {(msg: string) => void} [o.log]
 */
export async function baselineSync(o) {
  const fetchers = o.fetchers ?? 4;
  const timeoutMs = o.requestTimeoutMs ?? 10_000;
  const maxRetries = o.maxRetries ?? 64;
  const log = o.log ?? (() => {});
  const t0 = performance.now();
  const stats = { chunksSent: 0, refetched: 0, banned: 0, attempts: [] };
  const requested = new Set();
  const conns = new Map();
  const aborted = () => {
    if (o.signal?.aborted) throw o.signal.reason ?? new Error('aborted');
  };

  try {
    // Connect to every peer and ask each for its Baseline roots (a hint: the chunk count).
    const opened = await Promise.allSettled(o.peers.map((url) => new BaselineConnection(url).open(timeoutMs)));
    opened.forEach((r, i) => {
      if (r.status === 'fulfilled') conns.set(o.peers[i], r.value);
      else log(`baseline: ${o.peers[i]} unreachable`);
    });
    aborted();
    let count;
    const hints = await Promise.allSettled([...conns.values()].map((c) => c.request({ kind: BaselineKind.Roots }, timeoutMs)));
    for (const h of hints) {
      if (h.status !== 'fulfilled' || h.value.status !== Status.Ok) continue;
      let roots;
      try {
        roots = decodeBaselineRootsPayload(h.value.payload);
      } catch {
        continue;
      }
      const mine = roots.find((r) => equal(r.root, o.root));
      if (mine && mine.chunks > 0) {
        count = mine.chunks;
        break;
      }
    }
    if (count === undefined) throw new Error('baseline: no peer offers the trusted root');

    /** One full download from `from` (peer URLs); resolves to why it failed, or undefined when the root matched. */
    const attempt = async (from) => {
      let importer = new Importer();
      const buffered = new Map();
      let next = 0;
      let applied = 0;
      let failures = 0;
      let failed;
      const apply = () => {
        while (failed === undefined && buffered.has(applied)) {
          const chunk = buffered.get(applied);
          buffered.delete(applied);
          try {
            importer.addChunk(chunk);
          } catch (e) {
            failed = `chunk ${applied} does not import (${e.code ?? e.message})`;
            return;
          }
          applied++;
        }
      };
      const fetchOne = async (index) => {
        for (;;) {
          aborted();
          if (failed !== undefined) return;
          const usable = from.filter((u) => conns.has(u) && !conns.get(u).closed);
          if (usable.length === 0) {
            failed = 'no usable peer left';
            return;
          }
          const url = usable[Math.floor(o.random() * usable.length)];
          if (requested.has(index)) stats.refetched++;
          requested.add(index);
          let res;
          try {
            res = await conns.get(url).request({ kind: BaselineKind.Chunk, root: o.root, index }, timeoutMs);
          } catch (e) {
            res = undefined;
            log(`baseline: chunk ${index} from ${url}: ${e.message}`);
          }
          if (res?.status === Status.Ok) {
            stats.chunksSent++;
            buffered.set(index, res.payload);
            apply();
            return;
          }
          if (++failures > maxRetries) {
            failed = `${failures} failed requests`;
            return;
          }
          if (res?.status === Status.Busy) await new Promise((r) => setTimeout(r, 100));
          else if (res !== undefined) {
            // UNKNOWN_ROOT / OUT_OF_RANGE / BAD_REQUEST for a chunk that exists: this peer will not help.
            conns.get(url).close();
          }
        }
      };
      const fetcher = async () => {
        while (failed === undefined && next < count) await fetchOne(next++);
      };
      try {
        await Promise.all(Array.from({ length: fetchers }, fetcher));
        aborted();
        if (failed !== undefined) return failed;
        apply();
        if (applied !== count) return `only ${applied} of ${count} chunks applied`;
        const finishing = importer;
        importer = undefined; // finish() consumes it, also when it throws
        let got;
        try {
          got = finishing.finish();
        } catch (e) {
          return `the import does not complete (${e.code ?? e.message})`;
        }
        return equal(got, o.root) ? undefined : 'root mismatch';
      } finally {
        importer?.free();
      }
    };

    // Pass 1: all peers at once.
    const everyone = [...conns.keys()];
    let why = await attempt(everyone);
    stats.attempts.push({ peers: everyone.length, ok: why === undefined, why });
    if (why !== undefined) {
      log(`baseline: download from all ${everyone.length} peers failed (${why}); falling back to one peer at a time`);
      // Fallback: one peer at a time, in random order, until the root matches.
      const untried = [...everyone];
      while (why !== undefined && untried.length > 0) {
        const url = untried.splice(Math.floor(o.random() * untried.length), 1)[0];
        why = await attempt([url]);
        stats.attempts.push({ peers: 1, peer: url, ok: why === undefined, why });
        if (why !== undefined) {
          stats.banned++;
          conns.get(url)?.close();
          log(`baseline: ${url} rejected (${why})`);
        }
      }
      if (why !== undefined) throw new Error(`baseline: no peer yields the trusted root (last: ${why})`);
    }
    return { seconds: (performance.now() - t0) / 1000, chunks: count, ...stats };
  } finally {
    for (const c of conns.values()) c.close();
  }
}
