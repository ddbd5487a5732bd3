/**
 * Link emulation, for benchmarks (`bpavl serve --delay-ms D --rate-mb-s R`):
 * a `ByteConnection` wrapper that makes one connection's output behave as if
 * it crossed a wide-area link with a one-way delay and a bandwidth limit.
 *
 * - **Bandwidth**: a token bucket per connection, filled at `bytesPerSecond`
 *   up to `burstBytes`. A send takes its size in tokens at once and may drive
 *   the bucket into debt; the debt is the output still being "serialized",
 *   and a send leaves the bucket when the debt it joined is repaid. Frames
 *   are never reordered or split.
 * - **Delay**: only the server side is emulated, so a request arrives without
 *   delay and every response is held back a whole round trip (`2 × delayMs`)
 *   after it is serialized.
 *
 * `bufferedAmount` counts the output waiting for tokens (the debt) plus what
 * the real transport has not flushed, so the server's output backpressure
 * applies to the emulated link; bytes already "on the wire" (serialized,
 * waiting out the delay) are not counted, as in a real network. Reading is
 * not delayed. The connection handshake is not emulated.
 * @module
 */

import type { ByteConnection, ConnectionEvents } from '../../peer/src/connection.ts';

/** An emulated link. */
export interface LinkOptions {
  /** One-way delay in ms; responses are held back `2 × delayMs` (default 0). */
  delayMs?: number;
  /** Bytes per second a connection may send; `Infinity` or undefined: unlimited. */
  bytesPerSecond?: number;
  /** Token-bucket depth in bytes (default 64 KiB): how much may leave at once after an idle spell. */
  burstBytes?: number;
}

/** Default token-bucket depth. */
export const DEFAULT_BURST_BYTES = 64 * 1024;

/** Whether `link` changes anything (a delay, or a finite rate). */
export function isShaping(link: LinkOptions | undefined): link is LinkOptions {
  return link !== undefined && ((link.delayMs ?? 0) > 0 || Number.isFinite(link.bytesPerSecond ?? Infinity));
}

/**
 * Wraps `conn` so that its output crosses the emulated `link`.
 *
 * @example
 * ```ts
 * // 25 MB/s, 20 ms one way: a 100 kB response arrives ≈ 4 + 40 ms after it is sent.
 * server.handleConnection(shapeConnection(wsConnection(ws), { delayMs: 20, bytesPerSecond: 25e6 }));
 * ```
 */
export function shapeConnection(conn: ByteConnection, link: LinkOptions): ByteConnection {
  const rttMs = 2 * Math.max(0, link.delayMs ?? 0);
  const rate = link.bytesPerSecond ?? Infinity;
  if (!(rate > 0)) throw new RangeError('bytesPerSecond must be positive');
  const burst = Math.max(0, link.burstBytes ?? DEFAULT_BURST_BYTES);
  let tokens = burst;
  let last = performance.now();
  /** Output not yet handed to `conn`, in order, with when each may go. */
  const queue: { bytes: Uint8Array; written: (() => void) | undefined; at: number }[] = [];
  let head = 0;
  let timer: NodeJS.Timeout | undefined;
  let closing = false;
  let done = false;
  let events: ConnectionEvents | undefined;

  const refill = (now: number) => {
    tokens = Math.min(burst, tokens + ((now - last) * rate) / 1000);
    last = now;
  };

  const stop = () => {
    done = true;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    queue.length = 0;
    head = 0;
  };

  const flush = () => {
    timer = undefined;
    if (done) return;
    const now = performance.now();
    let sent = false;
    while (head < queue.length && queue[head]!.at <= now) {
      conn.send(queue[head]!.bytes, queue[head]!.written);
      queue[head++] = undefined as never;
      sent = true;
    }
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head > 1024) {
      queue.splice(0, head);
      head = 0;
    }
    if (head < queue.length) arm();
    else if (closing) {
      done = true;
      conn.close();
      return;
    }
    if (sent) events?.drain();
  };

  const arm = () => {
    if (timer !== undefined || head >= queue.length) return;
    timer = setTimeout(flush, Math.max(0, queue[head]!.at - performance.now()));
  };

  return {
    label: `${conn.label} (emulated link: ${rttMs / 2} ms one way${Number.isFinite(rate) ? `, ${rate / 1e6} MB/s` : ''})`,
    attach(e) {
      events = e;
      conn.attach({
        bytes: (data) => e.bytes(data),
        fault: () => e.fault(),
        drain: () => e.drain(),
        end: () => e.end(),
        closed: () => {
          stop();
          e.closed();
        },
      });
    },
    send(bytes, written) {
      if (done || closing) return;
      const now = performance.now();
      let serializedAt = now;
      if (Number.isFinite(rate)) {
        refill(now);
        tokens -= bytes.length;
        if (tokens < 0) serializedAt = now + (-tokens * 1000) / rate;
      }
      if (rttMs === 0 && serializedAt === now && head >= queue.length) {
        conn.send(bytes, written);
        return;
      }
      queue.push({ bytes, written, at: serializedAt + rttMs });
      arm();
    },
    get bufferedAmount() {
      if (!Number.isFinite(rate)) return conn.bufferedAmount;
      refill(performance.now());
      return Math.max(0, -tokens) + conn.bufferedAmount;
    },
    pause: () => conn.pause(),
    resume: () => conn.resume(),
    close() {
      if (done || closing) return;
      closing = true;
      if (head >= queue.length) {
        done = true;
        conn.close();
      }
    },
    abort() {
      stop();
      conn.abort();
    },
  };
}
