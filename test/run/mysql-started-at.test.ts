import { describe, expect, it } from 'vitest';
import { cronguard, lines, start, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';

// An admission held on its way to the server (a proxy that paused, a failover's switch) is
// recorded as started when it got its lock, on the server's clock, not when it was sent
// (issue 35, item 10, MySQL's side). What the proxy holds from: the admission's packet that
// takes GET_LOCK, the lease's epoch, the first packet of the log's admission under flock.
const HELD_FROM = { mysql: 'GET_LOCK', lease: 'lease_epochs', flock: 'disabled_reason AS reason' } as const;

describe('mysql: started_at of an admission held on its way', () => {
  for (const [lock, text] of Object.entries(HELD_FROM)) {
    it(`-l ${lock}: when it got its lock, after the hold, before its command began`, async () => {
      const box = mysqlSandbox();
      const job = box.job(`held-${lock}`);
      const through = await mysqlProxy();
      const env = { ...box.env, CRONGUARD_DATABASE_URL: through.url };
      // The log made and known to this host: the admission is the run's first statement.
      expect(await cronguard(['-l', lock, '-n', job, '--', 'true'], env)).toMatchObject({ code: 0, stderr: '' });
      through.holdFrom(text);
      const began = box.path('began');
      const run = start(['-l', lock, '-n', job, '--', 'sh', '-c', `date +%s%3N > ${began}`], env);
      await waitFor(() => through.holding(), 'the admission to be held');
      const resumed = Date.now();
      through.resume();
      expect(await run.done).toMatchObject({ code: 0, stderr: '' });
      const [, row] = await mysqlQuery<{ started_at: Date }>(`SELECT started_at FROM \`${box.database}\`.runs WHERE job = ? ORDER BY id`, [job]);
      // The server's clock is this machine's.
      expect(row?.started_at.getTime()).toBeGreaterThanOrEqual(resumed);
      expect(row?.started_at.getTime()).toBeLessThanOrEqual(Number(lines(began)[0]));
    });
  }
});
