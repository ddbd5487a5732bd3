// The browser half of `npm run bench:verify` (bench/verify.mjs):
// loads the packages as an app would, fetches the payload (root, proofs,
// envelopes) that the bench serves at ./payload.bin, runs the same loops as
// Node (verify-bench.mjs) and publishes `window.__bench`; #status becomes
// "done" (or "error", with `window.__bench.error`).
import * as lc from '@bpavl/light-client/verify';
import * as wasm from '@bpavl/wasm';
import { decodePayload, measure } from './verify-bench.mjs';

const status = document.querySelector('#status');

function finish(result, state) {
  window.__bench = result;
  document.querySelector('#summary').textContent = JSON.stringify(result, null, 2);
  status.dataset.state = state;
  status.textContent = state;
}

async function main() {
  await wasm.init();
  const res = await fetch('./payload.bin');
  if (!res.ok) throw new Error(`payload.bin: HTTP ${res.status}`);
  const payload = decodePayload(new Uint8Array(await res.arrayBuffer()));
  return { ...(await measure(lc, wasm, payload)), userAgent: navigator.userAgent };
}

main().then(
  (result) => finish(result, 'done'),
  (e) => finish({ error: e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : String(e) }, 'error'),
);
