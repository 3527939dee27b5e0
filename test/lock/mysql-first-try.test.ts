import { describe, expect, it } from 'vitest';
import { collected, lines, start, waitFor } from '../helpers.js';
import { mysqlSandbox } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';

// Without a log the lock is taken alone, and an invocation's first try comes before any wait.
// A connection lost during that try, after the server was reached, is no first connection's
// failure: a waiter (-w) connects again and goes on waiting, as for a loss later in its wait;
// each slot's try (--max-running) too. Without -w there is nothing to wait for: 69, one line.
describe('mysql --no-log: the connection lost during the first try of the lock', () => {
  for (const slots of [1, 2]) {
    it(`-w${slots > 1 ? `, --max-running ${slots}` : ''}: the waiter connects again and runs, once`, async () => {
      const box = mysqlSandbox();
      const job = box.job(`first-try-${slots}`);
      const ran = box.path('ran');
      const through = await mysqlProxy();
      through.holdFrom('GET_LOCK');
      const args = ['--no-log', '-v', '-w', '2m', ...(slots > 1 ? ['--max-running', String(slots)] : []), '-n', job];
      const waiter = start([...args, '--', 'sh', '-c', `echo ran >> ${ran}`], { ...box.env, CRONGUARD_DATABASE_URL: through.url });
      const said = collected(waiter);
      await waitFor(() => through.holding(), 'the first try to be on its way');
      // The held try never reaches the server; new connections pass.
      through.cut();
      through.resume();
      const result = await waiter.done;
      expect(result.code, said.stderr()).toBe(0);
      expect(lines(ran)).toEqual(['ran']);
      expect(result.stderr).toMatch(/: succeeded, exit 0\n/);
    }, 120_000);
  }

  it('without -w: 69, one line, nothing run', async () => {
    const box = mysqlSandbox();
    const job = box.job('first-try-now');
    const ran = box.path('ran');
    const through = await mysqlProxy();
    through.holdFrom('GET_LOCK');
    const run = start(['--no-log', '-n', job, '--', 'sh', '-c', `echo ran >> ${ran}`], { ...box.env, CRONGUARD_DATABASE_URL: through.url });
    await waitFor(() => through.holding(), 'the first try to be on its way');
    through.cut();
    through.resume();
    const result = await run.done;
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/^cronguard: cannot reach MySQL at [^\n]*: ECONNRESET\n$/);
    expect(lines(ran)).toEqual([]);
  }, 120_000);
});
