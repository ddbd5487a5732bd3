// Prints the raw and gzip size of the built .wasm (after `npm run build`).
import { readFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';

const url = new URL('../pkg/bpavl_wasm_bg.wasm', import.meta.url);
const wasm = await readFile(url);
const gzip = gzipSync(wasm, { level: 9 }).length;
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`pkg/bpavl_wasm_bg.wasm: ${wasm.length} bytes (${kib(wasm.length)}), gzip -9 ${gzip} bytes (${kib(gzip)})`);
console.log(JSON.stringify({ wasm_bytes: wasm.length, wasm_gzip_bytes: gzip }));
