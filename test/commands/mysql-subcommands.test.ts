import { mkdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { MYSQL_MIGRATIONS } from '../../src/store/mysql/migration-files.js';
import { collected, cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { mysqlClient } from '../mysql-helpers.js';
import { mysqlBox } from './mysql-box.js';

// Every subcommand on a MySQL run log, run as the built binary after real runs: exit code,
// stdout and stderr, as an operator sees them.
describe('subcommands on a MySQL log', () => {
  it('history, logs, status, check and metrics read what the runs recorded', async () => {
    const box = mysqlBox();
    const [ok, bad] = [box.job('ok'), box.job('bad')];
    expect(await cronguard(['-n', ok, '--', 'sh', '-c', 'echo "<out>"'], box.env)).toMatchObject({ code: 0, stdout: '<out>\n', stderr: '' });
    const failed = await cronguard(['-n', bad, '--', 'sh', '-c', 'echo oops >&2; exit 3'], box.env);
    expect(failed).toMatchObject({ code: 3, stdout: '' });
    expect(failed.stderr).toMatch(new RegExp(`^oops\ncronguard: ${bad}: failed with exit 3 after \\S+ \\(run 2; cronguard logs 2\\)\n$`));

    const history = await cronguard(['history'], box.env);
    expect(history).toMatchObject({ code: 0, stderr: '' });
    expect(history.stdout).toMatch(new RegExp(`^ID +JOB +STATUS .*\\n2 +${bad} +failed .*\\n1 +${ok} +succeeded .*\\n$`));
    const rows = JSON.parse((await cronguard(['history', '--json'], box.env)).stdout);
    expect(rows).toMatchObject([
      { id: 2, job: bad, status: 'failed', exit_code: 3, output: 'oops\n', lock_backend: 'mysql', lock_key: mysqlLockName(box.database, bad) },
      { id: 1, job: ok, status: 'succeeded', exit_code: 0, output: '<out>\n', trigger: 'cron' },
    ]);

    expect(await cronguard(['logs', ok], box.env)).toMatchObject({ code: 0, stdout: '<out>\n', stderr: '' });
    expect(await cronguard(['logs', '2'], box.env)).toMatchObject({ code: 0, stdout: 'oops\n', stderr: '' });

    const status = await cronguard(['status'], box.env);
    expect(status).toMatchObject({ code: 0, stderr: '' });
    expect(status.stdout).toMatch(new RegExp(`^JOB .*\\n${bad} +idle +failed .*\\n${ok} +idle +succeeded .*\\n$`));
    expect(JSON.parse((await cronguard(['status', '--json'], box.env)).stdout)).toMatchObject([
      { job: bad, last_status: 'failed', last_exit_code: 3, pending_requests: 0 },
      { job: ok, last_status: 'succeeded', last_exit_code: 0 },
    ]);

    expect(await cronguard(['check', ok, '--max-age', '1h'], box.env)).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^OK - ${ok} succeeded `)), stderr: '' });
    expect(await cronguard(['check', bad, '--max-age', '1h'], box.env)).toMatchObject({ code: 2, stdout: expect.stringMatching(new RegExp(`^CRITICAL - ${bad} last run failed \\(exit 3\\)`)) });

    const metrics = await cronguard(['metrics'], box.env);
    expect(metrics).toMatchObject({ code: 0, stderr: '' });
    expect(metrics.stdout).toContain(`cronguard_last_exit_code{job="${bad}"} 3\n`);
    expect(metrics.stdout).toContain(`cronguard_last_exit_code{job="${ok}"} 0\n`);
    expect(metrics.stdout).toContain(`cronguard_running{job="${ok}"} 0\n`);
    // A run's own textfile (--metrics-dir) comes from the same log.
    mkdirSync(box.path('prom'));
    expect(await cronguard(['-n', ok, '--metrics-dir', box.path('prom'), '--', 'true'], box.env)).toMatchObject({ code: 0 });
    expect(readFileSync(box.path(`prom/cronguard_${ok}.prom`), 'utf8')).toContain(`cronguard_last_exit_code{job="${ok}"} 0\n`);
  });

  it('logs -f follows a running job; locks shows its GET_LOCK, verified by the server', async () => {
    const box = mysqlBox();
    const job = box.job('live');
    const go = box.path('go');
    const run = start(['-n', job, '--', fixture('lines.sh'), go, '2', '4'], box.env);
    // The tables may not exist yet when first looked at.
    const started = () => box.rows(`SELECT 1 FROM ${box.D}.runs WHERE status = 'running' AND child_pid IS NOT NULL`).catch(() => []);
    await waitFor(async () => (await started()).length > 0, 'the run to start');
    const follower = start(['logs', '-f', job], box.env);
    const seen = collected(follower);
    release(`${go}.1`);
    await waitFor(() => seen.stdout().includes('line 1\n'), 'the follower to show line 1');

    const locks = await cronguard(['locks', '--json'], box.env);
    expect(locks).toMatchObject({ code: 0, stderr: '' });
    const [row] = await box.rows<{ id: number; pid: number }>(`SELECT id, pid FROM ${box.D}.runs`);
    expect(JSON.parse(locks.stdout)).toEqual([
      { job, lock: 'mysql', key: mysqlLockName(box.database, job), host: expect.any(String), pid: row?.pid, run_id: Number(row?.id), since: expect.any(String), holder_pid: null, verified: true },
    ]);
    expect((await cronguard(['locks'], box.env)).stdout).toMatch(new RegExp(`^JOB +LOCK .*\\n${job} +mysql `));

    release(`${go}.2`);
    const [ran, followed] = await Promise.all([run.done, follower.done]);
    expect(ran).toMatchObject({ code: 4, stdout: 'line 1\nline 2\n' });
    expect(followed).toMatchObject({ code: 0, stdout: 'line 1\nline 2\n' });
    expect(followed.stderr).toMatch(new RegExp(`^cronguard logs: run ${row?.id} \\(${job}\\) ended: failed, exit 4, after \\S+\\n$`));
    expect(await cronguard(['locks'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: no locks held\n' });
  });

  it('locks shows a --no-log run of a job the log knows, by its name alone', async () => {
    const box = mysqlBox();
    const job = box.job('quiet');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const log = box.path('log');
    const quiet = start(['-n', job, '--no-log', '--', fixture('hold.sh'), log, box.path('go')], box.env);
    await waitFor(() => lines(log).length > 0, 'the unlogged run to start');
    const listed = JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout);
    release(box.path('go'));
    await quiet.done;
    expect(listed).toEqual([{ job, lock: 'mysql', key: mysqlLockName(box.database, job), host: null, pid: null, run_id: null, since: null, holder_pid: null, verified: true }]);
  });

  it('locks shows a job held off by an application holding its GET_LOCK name (docs/fleet-mysql.md\'s SQL)', async () => {
    const box = mysqlBox();
    const job = box.job('held-off');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const app = await mysqlClient();
    try {
      const [[got]] = (await app.query("SELECT GET_LOCK(CONCAT('cg:', LEFT(SHA2(CONCAT('cronguard:', ?, ':', ?), 256), 40)), 0) AS got", [box.database, job])) as unknown as [{ got: number }[]];
      expect(got?.got).toBe(1);
      expect(JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout)).toEqual([
        { job, lock: 'mysql', key: mysqlLockName(box.database, job), host: null, pid: null, run_id: null, since: null, holder_pid: null, verified: true },
      ]);
    } finally {
      await app.end();
    }
    expect(await cronguard(['locks'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: no locks held\n' });
  });

  it('disable pauses a job on every host, enable resumes it; prune deletes old runs', async () => {
    const box = mysqlBox();
    const job = box.job('paused');
    expect(await cronguard(['disable', job, '--reason', 'maintenance'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: `cronguard: ${job} paused (cronguard enable ${job} resumes it)\n` });
    const skipped = await cronguard(['-n', job, '--', 'echo', 'ran'], box.env);
    expect(skipped).toMatchObject({ code: 0, stdout: '' });
    expect((await cronguard(['status', job], box.env)).stdout).toMatch(/\n {2}state +paused: maintenance\n/);
    expect(await cronguard(['enable', job], box.env)).toMatchObject({ code: 0, stdout: '', stderr: `cronguard: ${job} resumed\n` });
    expect(await cronguard(['-n', job, '--', 'echo', 'ran'], box.env)).toMatchObject({ code: 0, stdout: 'ran\n' });

    for (let i = 0; i < 3; i++) await cronguard(['-n', job, '--', 'true'], box.env);
    await box.rows(`UPDATE ${box.D}.runs SET started_at = started_at - INTERVAL 100 DAY`);
    const pruned = await cronguard(['prune', '--older-than', '90d', '--keep', '1'], box.env);
    expect(pruned).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: pruned 3 runs and 0 requests older than 90d00h (each job keeps its latest 1 and its latest success)\n' });
    expect((await box.rows<{ id: number }>(`SELECT id FROM ${box.D}.runs`)).map((r) => Number(r.id))).toEqual([4]);
  });

  it('a server that does not answer is 69, in one line naming it', async () => {
    const box = mysqlBox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: 'mysql://root@127.0.0.1:1' };
    for (const args of [['history'], ['status'], ['locks'], ['requests'], ['request', 'x'], ['migrate'], ['prune', '--older-than', '1d']]) {
      expect(await cronguard(args, env), args[0]).toMatchObject({ code: 69, stdout: '', stderr: `cronguard ${args[0]}: cannot reach MySQL at root@127.0.0.1:1: ECONNREFUSED\n` });
    }
  });

  it('migrate creates the database once; readers never create it', async () => {
    const box = mysqlBox();
    for (const args of [['history'], ['logs', 'x'], ['locks'], ['status']]) {
      const result = await cronguard(args, box.env);
      expect(result).toMatchObject({ code: 1, stdout: '' });
      expect(result.stderr).toMatch(new RegExp(`^cronguard [a-z]+: no run log in database ${box.database} at \\S+ \\(nothing was recorded there, or this user may not read it: see Grants in man cronguard\\)\\n$`));
    }
    expect(await box.rows('SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [box.database])).toEqual([]);
    const current = `run log schema at version ${MYSQL_MIGRATIONS.length}\n`;
    expect(await cronguard(['migrate'], box.env)).toMatchObject({ code: 0, stdout: current, stderr: '' });
    expect(await cronguard(['migrate'], box.env)).toMatchObject({ code: 0, stdout: current, stderr: '' });
    expect(await cronguard(['history'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: expect.any(String) });
  });
});
