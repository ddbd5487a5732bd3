// The query client (@bpavl/light-client/client) in a page, over the ws://
// peers the driver passes in, with @bpavl/wasm for batch verification:
// - `window.__query({ root, peers, gets, ranges })` (tests/browser/query.spec.ts):
//   gets each key, reads each range in pages, returns what it got as hex;
// - `window.__queryBench({ root, peers, keys, indexes, entries })`
//   (bench/query.mjs): the figures of ./measure.js.
// `root` and keys are hex. #status turns "ready" once WASM is loaded.
import { createClient } from '@bpavl/light-client/client';
import * as wasm from '@bpavl/wasm';
import { measure } from './measure.js';

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const fromHex = (s) => Uint8Array.from(s.match(/../g) ?? [], (x) => parseInt(x, 16));

window.__query = async ({ root, peers, gets, ranges }) => {
  const client = createClient({ root: fromHex(root), peers, wasm });
  try {
    const values = [];
    for (const k of gets) {
      const v = await client.get(fromHex(k));
      values.push(v === undefined ? null : hex(v));
    }
    const many = (await client.getMany(gets.map(fromHex))).map((v) => (v === undefined ? null : hex(v)));
    const pages = [];
    for (const { start, end, limit } of ranges) {
      const got = [];
      for await (const page of client.range(fromHex(start), end === null ? undefined : fromHex(end), { limit })) {
        got.push({ entries: page.entries.map(([k, v]) => [hex(k), hex(v)]), complete: page.complete });
      }
      pages.push(got);
    }
    return { values, many, pages, banned: client.banned };
  } finally {
    client.close();
  }
};

window.__queryBench = async ({ root, peers, keys, indexes, entries }) => {
  const client = createClient({ root: fromHex(root), peers, wasm });
  try {
    return await measure(client, keys.map(fromHex), indexes, { entries });
  } finally {
    client.close();
  }
};

const status = document.querySelector('#status');
wasm.init().then(
  () => {
    status.dataset.state = status.textContent = 'ready';
  },
  (e) => {
    status.dataset.state = 'error';
    status.textContent = String(e);
  },
);
