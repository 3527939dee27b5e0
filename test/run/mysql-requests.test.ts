import { describe, expect, it } from 'vitest';
import { mysqlBox } from '../commands/mysql-box.js';
import { cronguard, lines, start, waitFor } from '../helpers.js';

// Requests on a MySQL log, end to end: made by `cronguard request` and by docs/fleet-mysql.md's plain
// INSERT a web application sends, served by --on-request loops that poll (MySQL has no
// NOTIFY), each once, with its arguments.

// A command that notes its arguments, one line per run: "a b|c|", in one write (O_APPEND):
// runs of several hosts at once never interleave their lines.
const noting = (log: string) => ['sh', '-c', `printf '%s\\n' "$(printf '%s|' "$@")" >> ${log}`, 'sh'];

describe('requests on a MySQL log', () => {
  it('by the CLI and by the documented INSERT, each served once with its arguments; request --wait, requests, --cancel', async () => {
    const box = mysqlBox();
    const job = box.job('report');
    const log = box.path('log');
    expect(await cronguard(['migrate'], box.env)).toMatchObject({ code: 0 });
    const loop = start(['-v', '-n', job, '--on-request', '--for', '1h', '--', ...noting(log)], box.env);
    let said = '';
    loop.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('holding'), 'the loop to hold the lock');

    const waited = await cronguard(['request', '--wait', job, '--', 'a b', 'c'], box.env);
    expect(waited).toMatchObject({ code: 0, stdout: '1\n', stderr: '' });
    const bySql = await box.request(job, ["it's", '"quoted"'], 'php');
    expect(bySql).toBe(2);
    await waitFor(() => lines(log).length === 2, 'the INSERTed request to be served');
    const later = await cronguard(['request', '--at', '+1h', job], box.env);
    expect(later).toMatchObject({ code: 0, stdout: '3\n', stderr: '' });
    expect(await cronguard(['request', '--cancel', '3'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: request 3 cancelled\n' });
    expect(await cronguard(['request', '--cancel', '2'], box.env)).toMatchObject({ code: 64, stderr: expect.stringMatching(/^cronguard request: request 2 is succeeded; only a pending request can be cancelled/) });

    loop.child.kill('SIGTERM');
    expect((await loop.done).code).toBe(143);
    expect(lines(log)).toEqual(['a b|c|', `it's|"quoted"|`]);
    const listed = await cronguard(['requests'], box.env);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(listed.stdout).toMatch(new RegExp(`^ID +JOB +STATUS .*\\n3 +${job} +cancelled .*\\n2 +${job} +succeeded .* php .*\\n1 +${job} +succeeded .*\\n$`));
    expect(JSON.parse((await cronguard(['requests', job, '--json'], box.env)).stdout)).toMatchObject([
      { id: 3, status: 'cancelled', run_id: null },
      { id: 2, status: 'succeeded', run_id: 2, exit_code: 0, args: ["it's", '"quoted"'], requested_by: 'php' },
      { id: 1, status: 'succeeded', run_id: 1, exit_code: 0, args: ['a b', 'c'] },
    ]);
    // The docs/fleet-mysql.md's query for a request's outcome, as the web application polls it.
    const [outcome] = await box.rows(
      `SELECT q.status, q.exit_code, r.output FROM ${box.D}.requests q LEFT JOIN ${box.D}.runs r ON r.id = q.run_id WHERE q.id = ?`,
      [bySql],
    );
    expect(outcome).toEqual({ status: 'succeeded', exit_code: 0, output: '' });
    const runs = await box.rows<{ trigger: string; request_id: number }>(`SELECT \`trigger\`, request_id FROM ${box.D}.runs ORDER BY id`);
    expect(runs.map((r) => [r.trigger, Number(r.request_id)])).toEqual([['request', 1], ['request', 2]]);
  });

  it('four hosts of a job (local locks, lock dirs of their own) claim 300 requests: each served exactly once', async () => {
    const box = mysqlBox();
    const job = box.job('fanout');
    const log = box.path('log');
    expect(await cronguard(['migrate'], box.env)).toMatchObject({ code: 0 });
    const hosts = [1, 2, 3, 4].map((h) => {
      const loop = start(['-v', '-l', 'flock', '--lock-dir', box.path(`host${h}`), '-n', job, '--on-request', '--for', '1h', '--', ...noting(log)], box.env);
      let said = '';
      loop.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
      return { loop, said: () => said };
    });
    await waitFor(() => hosts.every((h) => h.said().includes('holding')), 'the four loops to wait for requests');
    const targets = Array.from({ length: 300 }, (_, i) => `t${i + 1}`);
    await box.rows(`INSERT INTO ${box.D}.requests (job, args, requested_by) VALUES ${targets.map(() => "(?, JSON_ARRAY(?), 'php')").join(', ')}`, targets.flatMap((t) => [job, t]));
    const unfinished = async () => Number((await box.rows<{ n: number }>(`SELECT COUNT(*) AS n FROM ${box.D}.requests WHERE status IN ('pending', 'running')`))[0]?.n);
    await waitFor(async () => (await unfinished()) === 0, 'all 300 requests to be finished', 240_000);
    for (const h of hosts) h.loop.child.kill('SIGTERM');
    await Promise.all(hosts.map((h) => h.loop.done));

    expect(lines(log).sort()).toEqual(targets.map((t) => `${t}|`).sort());
    const requests = await box.rows<{ status: string; run_id: number }>(`SELECT status, run_id FROM ${box.D}.requests`);
    expect(requests.filter((r) => r.status !== 'succeeded')).toEqual([]);
    expect(new Set(requests.map((r) => Number(r.run_id))).size).toBe(300);
    const runs = await box.rows<{ status: string; request_id: number }>(`SELECT status, request_id FROM ${box.D}.runs`);
    expect(runs).toHaveLength(300);
    expect(new Set(runs.map((r) => Number(r.request_id))).size).toBe(300);
  }, 300_000);
});
