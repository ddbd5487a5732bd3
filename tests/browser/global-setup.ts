// Before the browser suites: Chromium and the WASM build must exist (npm test
// builds the WASM first), and the light client's dist/ is rebuilt so that
// the pages never bundle a stale copy of its sources.
import { existsSync } from 'node:fs';
import { buildLightClient, checkWasmBuilt } from './build.mjs';
import { CHROMIUM_PATH } from './chromium.mjs';

export default function globalSetup(): void {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: run bash scripts/bootstrap.sh (apt chromium) or set BPAVL_CHROMIUM`);
  }
  checkWasmBuilt();
  buildLightClient();
}
