import { describe, expect, it } from 'vitest';
import { collected, lines, type Sandbox, start, waitFor } from '../helpers.js';
import { mysqlSandbox } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';
import { pgSandbox, proxy } from '../pg-helpers.js';

// Without a log a database's lock is taken alone, and an invocation's first try comes before
// any wait. A connection lost during that try, after the server was reached, is no first
// connection's failure: a waiter (-w) connects again and goes on waiting, as for a loss later
// in its wait; each slot's try too (--max-running). Without -w it is 69, one line.
interface Through {
  readonly url: string;
  holdFrom(text: string): void;
  holding(): boolean;
  resume(): void;
  cut(): void;
}
const DIALECTS: { name: string; sandbox: () => Sandbox & { job: (base: string) => string }; proxy: () => Promise<Through>; take: string; server: string }[] = [
  { name: 'mysql', sandbox: mysqlSandbox, proxy: mysqlProxy, take: 'GET_LOCK', server: 'MySQL' },
  { name: 'postgres', sandbox: pgSandbox, proxy: () => proxy(), take: 'pg_try_advisory_lock', server: 'PostgreSQL' },
];

for (const d of DIALECTS) {
  describe(`${d.name} --no-log: the connection lost during the first try of the lock`, () => {
    // The first try's statement is held in the proxy, then every connection reset: it never
    // reached the server, and new connections pass.
    const cutFirstTry = async (args: string[], ran: string, box: Sandbox) => {
      const through = await d.proxy();
      through.holdFrom(d.take);
      const run = start([...args, '--', 'sh', '-c', `echo ran >> ${ran}`], { ...box.env, CRONGUARD_DATABASE_URL: through.url });
      const said = collected(run);
      await waitFor(() => through.holding(), 'the first try to be on its way');
      through.cut();
      through.resume();
      return { result: await run.done, said };
    };

    for (const slots of [1, 2]) {
      it(`-w${slots > 1 ? `, --max-running ${slots}` : ''}: the waiter connects again and runs, once`, async () => {
        const box = d.sandbox();
        const ran = box.path('ran');
        const maxRunning = slots > 1 ? ['--max-running', String(slots)] : [];
        const { result, said } = await cutFirstTry(['--no-log', '-v', '-w', '2m', ...maxRunning, '-n', box.job(`first-try-${slots}`)], ran, box);
        expect(result.code, said.stderr()).toBe(0);
        expect(result.stderr).toMatch(/: succeeded, exit 0\n/);
        expect(lines(ran)).toEqual(['ran']);
      }, 120_000);
    }

    it('without -w: 69, one line, nothing run', async () => {
      const box = d.sandbox();
      const ran = box.path('ran');
      const { result } = await cutFirstTry(['--no-log', '-n', box.job('first-try-now')], ran, box);
      expect(result.code).toBe(69);
      expect(result.stderr.trimEnd().split('\n')).toEqual([expect.stringContaining(`${d.server} at `)]);
      expect(lines(ran)).toEqual([]);
    }, 120_000);
  });
}
