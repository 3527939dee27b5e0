import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  plugins: [
    {
      name: 'sql-as-text',
      load(id) {
        if (id.endsWith('.sql')) return `export default ${JSON.stringify(readFileSync(id, 'utf8'))};`;
        return null;
      },
    },
  ],
  define: { CRONGUARD_VERSION: JSON.stringify('test') },
  test: {
    include: ['test/**/*.test.ts'],
    // Most of a test's time is cronguard's processes and their commands, not the worker: one
    // file more than the cores keeps them busy (vitest's default, a file less, left one of
    // two cores mostly idle: 18 min for the suite, against 14 with this on a busy machine).
    maxWorkers: availableParallelism() + 1,
    // Limits that only catch a hang: the tests wait on barriers, never on time, and on a busy
    // 2-core machine (or Node.js 22, slower at some) a heavy test passed 120 s doing nothing wrong.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    globalSetup: ['test/global-setup.ts'],
  },
});
