/**
 * Formatting helpers for the demo's numbers, bytes and hashes (display only).
 * @module
 */

/** Lowercase hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

/** Bytes from hex (whitespace and a `0x` prefix allowed); `undefined` if it is not hex. */
export function fromHex(text: string): Uint8Array | undefined {
  const clean = text.trim().replace(/^0x/i, '').replace(/\s+/g, '');
  if (clean.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(clean)) return undefined;
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** `abcdef12…34567890`: the first and last `n` hex digits. */
export function shortHex(hex: string, n = 8): string {
  return hex.length <= 2 * n + 1 ? hex : `${hex.slice(0, n)}…${hex.slice(-n)}`;
}

/** Decimal megabytes (the unit of the progress bar and the chart). */
export function mb(bytes: number): string {
  const v = bytes / 1e6;
  return `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} MB`;
}

/** Bytes with a unit that keeps 2–3 significant digits. */
export function bytesText(n: number): string {
  if (n < 1000) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(n < 1e4 ? 1 : 0)} kB`;
  return mb(n);
}

/** A rate in MB/s. */
export function rateText(bytesPerSecond: number): string {
  return `${(bytesPerSecond / 1e6).toFixed(bytesPerSecond < 1e7 ? 2 : 1)} MB/s`;
}

/** Milliseconds, rounded sensibly. */
export function msText(ms: number): string {
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

/** Seconds as `4.2 s`, `1 min 05 s`. */
export function secondsText(s: number): string {
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${String(Math.round(s - 60 * m)).padStart(2, '0')} s`;
}

/** An integer with thousands separators. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}
