/**
 * Gives memory back after a burst of answers. A range flood leaves hundreds
 * of megabytes of answer buffers that V8 has no reason to collect once the
 * process is idle (nothing allocates, so no collection runs), and their
 * backing stores stay with the process. Once the answer bytes queued in the
 * transports have passed `burstBytes` and then stayed at zero for `quietMs`,
 * this runs one full collection. Measured by `npm run bench:flood`
 * (bench/README.md).
 * @module
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Queued answer bytes that count as a burst. */
export const BURST_BYTES = 64 << 20;
/** How long the server must stay without queued answers. */
export const QUIET_MS = 2_000;
const POLL_MS = 500;

/** The full collection V8 runs for `gc()`, without starting Node with `--expose-gc`. */
function fullGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * Watches `answerBytes()` and collects once after each burst (`collect`,
 * V8's full collection by default); returns a function that stops
 * watching. The timer never keeps the process alive.
 */
export function collectAfterBursts(answerBytes: () => number, opts: { burstBytes?: number; quietMs?: number; collect?: () => void } = {}): () => void {
  const burstBytes = opts.burstBytes ?? BURST_BYTES;
  const quietMs = opts.quietMs ?? QUIET_MS;
  const gc = opts.collect ?? fullGc();
  let burst = false;
  let quietSince: number | undefined;
  const timer = setInterval(() => {
    const bytes = answerBytes();
    if (bytes >= burstBytes) burst = true;
    if (bytes > 0) {
      quietSince = undefined;
      return;
    }
    quietSince ??= Date.now();
    if (burst && Date.now() - quietSince >= quietMs) {
      burst = false;
      gc();
    }
  }, POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
