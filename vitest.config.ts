// Vitest for every TypeScript suite in the repository (run by `npm test`,
// scripts/test.sh). Browser and end-to-end suites have their own runner.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'tests/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**', '**/pkg/**', 'tests/e2e/**', 'tests/browser/**', '**/test/browser/**'],
    environment: 'node',
  },
});
