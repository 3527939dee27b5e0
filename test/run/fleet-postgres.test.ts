import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BINARY, type Finished, fixture, lines, start, waitFor } from '../helpers.js';
import { onHost } from '../hosts.js';
import { holdingClient, pgRuns, pgSandbox, sql } from '../pg-helpers.js';


const at = (time: string) => `2026-03-01T${time}Z`;

describe('one run per tick across a fleet', () => {
  it('a short job that ran on one host is skipped, silently and counted, by another in the same minute', async () => {
    const box = pgSandbox();
    const job = box.job('tick');
    const log = box.path('record');
    const a = await onHost('host-a', at('03:00:01'), ['-n', job, '--', fixture('record.sh'), log], box.env).done;
    const b = await onHost('host-b', at('03:00:02'), ['-n', job, '--', fixture('record.sh'), log], box.env).done;
    expect(a).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(b).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);
    const rows = await pgRuns(box.schema);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ host: 'host-a', status: 'succeeded', overlaps: 1 });
    expect(rows[0]?.tick).toEqual(new Date(at('03:00:00.000')));
  });

  it.each([
    ['the postgres lock', []],
    ['local flocks with the shared log', ['-l', 'flock']],
  ])('a run that served a request claims the minute too: another host\'s invocation in it skips (%s)', async (_what, lockArgs) => {
    const box = pgSandbox();
    const job = box.job('served');
    const log = box.path('record');
    expect((await start(['request', job], box.env).done).code).toBe(0);
    const a = await onHost('host-a', at('03:00:01'), [...lockArgs, '-n', job, '--', fixture('record.sh'), log], box.env).done;
    const b = await onHost('host-b', at('03:00:02'), [...lockArgs, '-v', '-n', job, '--', fixture('record.sh'), log], box.env).done;
    expect(a).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(b.code).toBe(0);
    expect(b.stderr).toMatch(/already ran this minute on host host-a/);
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);
    expect((await pgRuns(box.schema)).map((r) => [r.host, r.trigger, r.overlaps])).toEqual([['host-a', 'request', 1]]);
  });

  it('explains the skip with -v: which host ran this minute', async () => {
    const box = pgSandbox();
    const job = box.job('why');
    await onHost('host-a', at('03:00:01'), ['-n', job, '--', 'true'], box.env).done;
    const b = await onHost('host-b', at('03:00:30'), ['-v', '-n', job, '--', 'true'], box.env).done;
    expect(b.code).toBe(0);
    // Since when: when it got its lock, on the server's clock (not the hosts' made-up ones).
    expect(b.stderr).toMatch(new RegExp(`${job}: already ran this minute on host host-a \\(pid \\d+, run 1, since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\)`));
  });

  it('runs again in the next minute, on any host', async () => {
    const box = pgSandbox();
    const job = box.job('next');
    await onHost('host-a', at('03:00:01'), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-b', at('03:01:01'), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-a', at('03:02:01'), ['-n', job, '--', 'true'], box.env).done;
    expect((await pgRuns(box.schema)).map((r) => r.host)).toEqual(['host-a', 'host-b', 'host-a']);
  });

  it('leaves one host to its lock: the same host runs a job twice in a minute', async () => {
    const box = pgSandbox();
    const job = box.job('twice');
    await onHost('host-a', at('03:00:01'), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-a', at('03:00:20'), ['-n', job, '--', 'true'], box.env).done;
    expect((await pgRuns(box.schema)).map((r) => r.host)).toEqual(['host-a', 'host-a']);
  });

  it('does not apply to --every-tick jobs, nor to runs from a terminal', async () => {
    const box = pgSandbox();
    const job = box.job('every');
    await onHost('host-a', at('03:00:01'), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-b', at('03:00:02'), ['--every-tick', '-n', job, '--', 'true'], box.env).done;
    // script(1) gives cronguard a terminal, as when an operator runs the job by hand.
    const command = `unshare -u sh -c 'hostname host-c && exec "$0" "$@"' ${process.execPath} ${BINARY} -n ${job} -- true`;
    const clock = { NODE_OPTIONS: `--require ${fixture('clock.cjs')}`, CRONGUARD_TEST_CLOCK: at('03:00:03') };
    const terminal = spawnSync('script', ['-qec', command, '/dev/null'], { env: { ...box.env, ...clock } });
    expect(terminal.status).toBe(0);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.host, r.trigger, r.tick === null])).toEqual([
      ['host-a', 'cron', false],
      ['host-b', 'cron', false],
      ['host-c', 'manual', true],
    ]);
  });

  it('a host whose clock runs far ahead does not silence the others', async () => {
    const box = pgSandbox();
    const job = box.job('ahead');
    const now = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    const later = (minutes: number) => new Date(now.getTime() + minutes * 60_000 + 1000).toISOString();
    await onHost('fast-clock', later(60 * 24 * 180), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-a', later(0), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-b', later(0), ['-n', job, '--', 'true'], box.env).done;
    await onHost('host-b', later(1), ['-n', job, '--', 'true'], box.env).done;
    // The fast host ran on its own bogus minute; the fleet still runs once per real minute.
    expect((await pgRuns(box.schema)).map((r) => r.host)).toEqual(['fast-clock', 'host-a', 'host-b']);
  });

  it('a minute overtaken by a later one that ran elsewhere does not run, and its skip is counted there', async () => {
    const box = pgSandbox();
    const job = box.job('overtaken');
    await onHost('host-a', at('03:02:01'), ['-n', job, '--', 'true'], box.env).done;
    const late = await onHost('host-b', at('03:01:59'), ['-v', '-n', job, '--', 'true'], box.env).done;
    expect(late.code).toBe(0);
    expect(late.stderr).toMatch(/already ran this minute on host host-a/);
    expect(await pgRuns(box.schema)).toEqual([expect.objectContaining({ host: 'host-a', overlaps: 1 })]);
  });

  it.each([
    ['the postgres lock', []],
    ['local flocks with the shared log', ['-l', 'flock']],
  ])('of six hosts starting at once in one minute, exactly one runs (%s)', async (_what, lockArgs) => {
    const box = pgSandbox();
    const job = box.job('race');
    const log = box.path('record');
    const hosts = ['a', 'b', 'c', 'd', 'e', 'f'];
    const all = await Promise.all(
      hosts.map((h) => {
        // Each host has its own lock dir, as separate machines would.
        const env = { ...box.env, CRONGUARD_LOCK_DIR: box.path(`locks-${h}`) };
        return onHost(`host-${h}`, at('03:00:01'), [...lockArgs, '-n', job, '--', fixture('record.sh'), log], env).done;
      }),
    );
    for (const result of all) expect(result).toMatchObject<Partial<Finished>>({ code: 0, stdout: '', stderr: '' });
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);
    const rows = await pgRuns(box.schema);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'succeeded' });
    // Every skip is counted once: on the run, or (when it raced with the end of so short a
    // run) parked on the job for its next run.
    const [parked] = await sql<{ n: number }>(`SELECT coalesce(sum(pending_overlaps), 0)::int AS n FROM "${box.schema}".jobs`);
    expect((rows[0]?.overlaps ?? 0) + (parked?.n ?? 0)).toBe(5);
  });

  it('a host whose tick claim waited for another host\'s claim sees that host\'s run, and skips (local locks)', async () => {
    const box = pgSandbox();
    const job = box.job('wait-claim');
    const log = box.path('record');
    expect((await start(['migrate'], box.env).done).code).toBe(0);
    // Host a's admission, held open by the test: its claim of the minute and its run row,
    // not yet committed, as between the two statements of a real admission.
    const a = await holdingClient();
    await a.query('BEGIN');
    const p = { job, host: 'host-a', tick: at('03:00:00'), now: at('03:00:01'), started_at: at('03:00:01'), invoked_at: at('03:00:01'),
      fleet: true, trigger: 'cron', attempt: 1, pid: 1, username: 'a', command: 'true', lock_backend: 'flock', lock_key: 'k',
      run_key: `a-${job}`, wrapper_start: null, manual: false, on_request: false, batch: false, keep_lock: false };
    const [admitted] = (await a.query(`SELECT "${box.schema}".admit($1::jsonb) AS r`, [JSON.stringify(p)])).rows;
    expect(admitted.r).toMatchObject({ admitted: true });
    const b = onHost('host-b', at('03:00:02'), ['-l', 'flock', '-n', job, '--', fixture('record.sh'), log], box.env);
    await waitFor(async () => (await sql(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [`cronguard:${job}`.slice(0, 63)])).length > 0, 'host b to wait for host a\'s claim');
    await a.query('COMMIT');
    await a.end();
    expect(await b.done).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(lines(log)).toEqual([]);
    expect(await pgRuns(box.schema)).toEqual([expect.objectContaining({ host: 'host-a', overlaps: 1 })]);
  });

  it('a waiter (-w) of the same minute skips once the run it waited for ends; one of a later minute runs', async () => {
    const box = pgSandbox();
    const job = box.job('wait');
    const log = box.path('record');
    const barrier = box.path('go');
    const holder = onHost('host-a', at('03:00:01'), ['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const sameTick = onHost('host-b', at('03:00:02'), ['-w', '10m', '-n', job, '--', fixture('record.sh'), log], box.env);
    const laterTick = onHost('host-c', at('03:01:00'), ['-w', '10m', '-n', job, '--', fixture('record.sh'), log], box.env);
    writeFileSync(barrier, '');
    const results = await Promise.all([holder.done, sameTick.done, laterTick.done]);
    for (const result of results) expect(result).toMatchObject({ code: 0, stderr: '' });
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => r.host)).toEqual(['host-a', 'host-c']);
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(2);
  });
});
