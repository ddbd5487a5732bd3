// Browser suites (tests/browser) and the demo's end-to-end suite (tests/e2e),
// `*.spec.ts`, run by `npm test`
// (scripts/test.sh) as `npx --no playwright test`. They drive Debian's
// Chromium (tests/browser/chromium.mjs); Playwright never downloads a browser.
import { defineConfig } from '@playwright/test';
import { launchOptions } from './tests/browser/chromium.mjs';

export default defineConfig({
  testDir: 'tests',
  testMatch: ['browser/**/*.spec.ts', 'e2e/**/*.spec.ts'],
  globalSetup: './tests/browser/global-setup.ts',
  outputDir: 'test-results/browser',
  forbidOnly: !!process.env.CI,
  retries: 0,
  workers: 1,
  timeout: 120_000,
  reporter: [['list']],
  use: {
    browserName: 'chromium',
    headless: true,
    launchOptions,
    trace: 'off',
    screenshot: 'only-on-failure',
  },
});
