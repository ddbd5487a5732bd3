// How the browser suites and `npm run bench:verify` launch Chromium: Debian's
// package (installed by scripts/bootstrap.sh), never a Playwright download.
// Playwright adds --headless (for `headless: true`) and a fresh temporary
// --user-data-dir by itself; the flags below keep the browser off the network.

/** `BPAVL_CHROMIUM` overrides the path. */
export const CHROMIUM_PATH = process.env.BPAVL_CHROMIUM || '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-quic',
];

/** Options for `chromium.launch()` (and Playwright's `use.launchOptions`). */
export const launchOptions = { executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true };
