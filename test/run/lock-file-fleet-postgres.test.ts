import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { databaseUrl, pgRuns, pgSandbox } from '../pg-helpers.js';

// With the fleet's database in the configuration file (as docs/fleet-postgres.md's fleet section advises),
// a crontab line with --lock-file takes that flock and logs to the database: --lock-file
// says which lock is wanted (issue 36, item 8: it was refused, 64, every minute).
describe('--lock-file with a database configured', () => {
  it('implies -l flock, the run logged in the database; -l postgres beside it is a usage error', async () => {
    const box = pgSandbox();
    const job = box.job('shop');
    const config = box.path('cronguard.conf');
    writeFileSync(config, `database_url = ${databaseUrl()}\nschema = ${box.schema}\n`, { mode: 0o600 });
    const env = { ...box.env, CRONGUARD_DATABASE_URL: undefined, CRONGUARD_SCHEMA: undefined, CRONGUARD_CONFIG: config };
    const file = box.path('shop.lock');
    const [log, go] = [box.path('log'), box.path('go')];
    const run = start(['-n', job, '--lock-file', file, '--', fixture('hold.sh'), log, go], env);
    await waitFor(() => lines(log).length === 1, 'the command to start');
    // The file is flocked, as util-linux flock sees it.
    expect(spawnSync('flock', ['-n', file, 'true']).status).toBe(1);
    release(go);
    expect(await run.done).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.lock_backend, r.lock_key])).toEqual([['succeeded', 'flock', file]]);
    const refused = await cronguard(['-n', job, '-l', 'postgres', '--lock-file', file, '--', 'true'], env);
    expect(refused).toMatchObject({ code: 64, stderr: 'cronguard: --lock-file names a file for flock to lock; it cannot go with -l postgres (leave out -l, or use -l flock) (see cronguard --help)\n' });
  });
});
