import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { userName } from '../../src/util/user.js';
import { cronguard, fixture, release, sandbox, start, waitFor } from '../helpers.js';
import { STORES, type StoreBox, storeBox } from '../stores.js';

interface Event {
  job: string | null;
  action: string;
  at: string;
  by: string;
  reason: string | null;
  until: string | null;
  fleet_wide: boolean;
}

// `disable --all` (issue 25, maintenance): every job pauses fleet-wide, those not in the log
// yet too, decided in each store's admission; `enable --all` ends it; `--until` ends it by
// itself; `--drain` waits for the runs under way. Every pause and resume is kept.
describe.each(STORES)('maintenance: disable --all (%s)', (kind) => {
  const ran = async (box: StoreBox, job: string) => (await box.runs()).filter((r) => r.job === job).length;
  const status = async (box: StoreBox, job: string) => {
    const result = await cronguard(['status', job, '--json'], box.env);
    expect(result.code).toBe(0);
    return (JSON.parse(result.stdout) as Record<string, unknown>[])[0] as Record<string, unknown> & { pause_events: Event[] };
  };

  it('pauses every job, one never seen too: nothing runs, requests wait; enable --all resumes all but a job paused on its own', async () => {
    const box = storeBox(kind);
    const [old, own, fresh] = [box.job('old'), box.job('own'), box.job('fresh')];
    for (const job of [old, own]) expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect((await cronguard(['disable', own, '--reason', 'broken'], box.env)).code).toBe(0);
    const paused = await cronguard(['disable', '--all', '--reason', 'db upgrade'], box.env);
    expect(paused).toMatchObject({ code: 0, stdout: '' });
    expect(paused.stderr).toBe('cronguard: every job paused fleet-wide (cronguard enable --all resumes it)\n');

    const marker = box.path('ran');
    for (const job of [old, fresh]) {
      const skipped = await cronguard(['-v', '-n', job, '--', 'sh', '-c', `echo x >> ${marker}`], box.env);
      expect(skipped.code).toBe(0);
      expect(skipped.stderr).toMatch(new RegExp(`${job}: paused fleet-wide since \\S+ by \\S+@\\S+: db upgrade \\(cronguard enable --all resumes it\\); skipping with exit 0`));
    }
    // The look before a shared lock (run/loop/due.ts) and a lease's admission say the same.
    const locks = [['-l', 'flock', '--lock-file', box.path('shared.lock')], ...(kind === 'sqlite' ? [] : [['-l', 'lease']])];
    for (const lock of locks) {
      const skipped = await cronguard(['-v', '-n', fresh, ...lock, '--', 'sh', '-c', `echo x >> ${marker}`], box.env);
      expect(skipped).toMatchObject({ code: 0 });
      expect(skipped.stderr).toContain(`${fresh}: paused fleet-wide since `);
    }
    expect(existsSync(marker)).toBe(false);
    expect(await ran(box, fresh)).toBe(0);
    // A request waits for the end of the pause.
    const requested = await cronguard(['request', old], box.env);
    expect(requested.code).toBe(0);
    expect((await cronguard(['-n', old, '--on-request', '--', 'sh', '-c', `echo x >> ${marker}`], box.env)).code).toBe(0);
    expect(existsSync(marker)).toBe(false);
    expect((await box.requests()).map((q) => q.status)).toEqual(['pending']);

    // status says so at the top, each job says why; check says paused like a paused job.
    const all = await cronguard(['status'], box.env);
    expect(all.stdout.split('\n')[0]).toMatch(/^FLEET PAUSED since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d by \S+@\S+: db upgrade \(cronguard enable --all resumes it\)$/);
    expect(await status(box, old)).toMatchObject({ state: 'disabled', disabled_fleet_wide: true, disabled_reason: 'db upgrade' });
    expect(await status(box, own)).toMatchObject({ state: 'disabled', disabled_fleet_wide: false, disabled_reason: 'broken' });
    const check = await cronguard(['check', old, '--max-age', '1h'], box.env);
    expect(check.code).toBe(0);
    expect(check.stdout).toMatch(new RegExp(`^OK - ${old} is paused fleet-wide by \\S+@\\S+: db upgrade \\(not checked;`));
    // enable NAME of a job the fleet's pause holds changes nothing.
    const notOwn = await cronguard(['enable', old], box.env);
    expect(notOwn.stderr).toBe(`cronguard: ${old} was not paused on its own; the fleet is paused (cronguard enable --all resumes it)\n`);

    const resumed = await cronguard(['enable', '--all'], box.env);
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toBe(`cronguard: the fleet resumed; paused on their own still: ${own}\n`);
    expect((await cronguard(['status'], box.env)).stdout).not.toContain('FLEET PAUSED');
    expect((await cronguard(['-n', own, '--', 'sh', '-c', `echo own >> ${marker}`], box.env)).code).toBe(0);
    expect(existsSync(marker)).toBe(false);
    expect((await cronguard(['-n', fresh, '--', 'sh', '-c', `echo fresh >> ${marker}`], box.env)).code).toBe(0);
    expect((await cronguard(['-n', old, '--on-request', '--', 'sh', '-c', `echo old >> ${marker}`], box.env)).code).toBe(0);
    expect(readFileSync(marker, 'utf8')).toBe('fresh\nold\n');
    expect((await box.requests()).map((q) => q.status)).toEqual(['succeeded']);
    expect((await cronguard(['enable', '--all'], box.env)).stderr).toBe('cronguard: the fleet was not paused\n');
  });

  it('--until: the pause ends by itself, the fleet\'s and a job\'s own', async () => {
    const box = storeBox(kind);
    const [a, b] = [box.job('until-a'), box.job('until-b')];
    expect((await cronguard(['-n', a, '--', 'true'], box.env)).code).toBe(0);
    const fleet = await cronguard(['disable', '--all', '--until', '+3s'], box.env);
    expect(fleet.code).toBe(0);
    expect(fleet.stderr).toMatch(/^cronguard: every job paused fleet-wide \(cronguard enable --all resumes it, or it resumes by itself at \S+Z\)\n$/);
    expect((await status(box, a)).disabled_until).toMatch(/Z$/);
    // Polled: each invocation is judged at its admission; one comes after the until.
    await waitFor(async () => (await cronguard(['-n', b, '--', 'true'], box.env)).code === 0 && (await ran(box, b)) === 1, 'the fleet to resume by itself');
    expect(await status(box, a)).toMatchObject({ state: 'idle', disabled_fleet_wide: false, disabled_until: null });

    expect((await cronguard(['disable', a, '--until', '+3s', '--reason', 'short'], box.env)).code).toBe(0);
    expect((await cronguard(['-n', a, '--', 'true'], box.env)).code).toBe(0);
    await waitFor(async () => (await cronguard(['-n', a, '--', 'true'], box.env)).code === 0 && (await ran(box, a)) >= 2, 'the job to resume by itself');
    expect((await status(box, a)).state).not.toBe('disabled');
  });

  it('--drain returns when the run under way has ended, and after D names the runs still active (exit 124)', async () => {
    const box = storeBox(kind);
    const job = box.job('drained');
    const [marks, barrier] = [box.path('marks'), box.path('barrier')];
    const held = start(['-n', job, '--', 'sh', fixture('hold.sh'), marks, barrier], box.env);
    await waitFor(() => existsSync(marks), 'the run to start');
    const [run] = (await box.runs()).filter((r) => r.status === 'running');

    const late = await cronguard(['disable', '--all', '--drain', '1s'], box.env);
    expect(late.code).toBe(124);
    const lines = late.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe('cronguard: every job paused fleet-wide (cronguard enable --all resumes it)');
    expect(lines.slice(1)).toEqual([expect.stringMatching(new RegExp(`^cronguard: still running after --drain 1s: ${job} on ${hostname()} \\(pid \\d+, run ${run?.id}, since \\S+\\)$`))]);

    const draining = start(['disable', '--all', '--drain', '10m', '--reason', 'again'], box.env);
    let said = '';
    draining.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('paused fleet-wide'), 'the pause');
    release(barrier);
    expect((await held.done).code).toBe(0);
    const drained = await draining.done;
    expect(drained.code).toBe(0);
    expect(drained.stderr).toContain('cronguard: drained: no run of any job is active\n');
    expect((await box.runs()).filter((r) => r.status === 'running')).toEqual([]);
  });

  it('keeps every pause and resume (who, when, why, until, fleet-wide): status NAME and --json show them', async () => {
    const box = storeBox(kind);
    const job = box.job('events');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect((await cronguard(['disable', job, '--reason', 'flaky', '--by', 'alice'], box.env)).code).toBe(0);
    expect((await cronguard(['enable', job], box.env)).code).toBe(0);
    expect((await cronguard(['disable', '--all', '--reason', 'upgrade', '--until', '+1h'], box.env)).code).toBe(0);
    expect((await cronguard(['enable', '--all', '--by', 'bob'], box.env)).code).toBe(0);
    const me = `${userName()}@${hostname()}`;
    const events = (await status(box, job)).pause_events;
    expect(events.map((e) => [e.action, e.job, e.fleet_wide, e.by, e.reason])).toEqual([
      ['resume', null, true, 'bob', null],
      ['pause', null, true, me, 'upgrade'],
      ['resume', job, false, me, null],
      ['pause', job, false, 'alice', 'flaky'],
    ]);
    expect(events[1]?.until).toMatch(/Z$/);
    expect(Date.parse(events[1]?.until as string)).toBeGreaterThan(Date.parse(events[1]?.at as string));
    for (const e of events) expect(e.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const human = (await cronguard(['status', job], box.env)).stdout.split('\n');
    const log = human.slice(human.findIndex((l) => l.startsWith('  pause log')));
    expect(log.slice(0, 4)).toEqual([
      expect.stringMatching(/^ {2}pause log {4}\S+ \S+ \(.*\) resumed fleet-wide by bob$/),
      expect.stringMatching(/^ {15}\S+ \S+ \(.*\) paused fleet-wide by \S+@\S+, until \S+ \S+ \(.*\): upgrade$/),
      expect.stringMatching(/^ {15}\S+ \S+ \(.*\) resumed by \S+@\S+$/),
      expect.stringMatching(/^ {15}\S+ \S+ \(.*\) paused by alice: flaky$/),
    ]);
  });

  it.each([
    [['disable', '--all', '--until', '25:00'], "--until: '25:00' is not a time (use now, +10m, 03:00, tomorrow 03:00, 2026-12-01 03:00 or an ISO time)"],
    [['disable', '--all', '--until', '2020-01-01T00:00:00Z'], '--until: 2020-01-01T00:00:00Z is in the past; give a time to come (+2h, 03:00, an ISO time)'],
    [['disable', '--all', '--until', 'now'], '--until: now is in the past; give a time to come (+2h, 03:00, an ISO time)'],
    [['disable', '--all', '--drain', '5x'], "--drain: invalid duration '5x' (use e.g. 500ms, 10s, 5m, 2h, 1d, 1h30m or a number of seconds)"],
    [['disable', '--all', 'NAME'], '--all pauses the whole fleet; give no NAME with it'],
    [['disable'], 'which job? cronguard disable NAME (or --all for every job)'],
    [['enable', '--all', 'NAME'], '--all resumes the whole fleet; give no NAME with it'],
  ])('refuses %j with one line, exit 64, nothing changed', async (args, message) => {
    const box = storeBox(kind);
    const job = box.job('bad');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const refused = await cronguard(args.map((a) => (a === 'NAME' ? job : a)), box.env);
    const [verb] = args;
    expect(refused).toMatchObject({ code: 64, stdout: '', stderr: `cronguard ${verb}: ${message} (see cronguard ${verb} --help)\n` });
    expect(await status(box, job)).toMatchObject({ state: 'idle', pause_events: [] });
    expect((await cronguard(['status'], box.env)).stdout).not.toContain('FLEET PAUSED');
  });
});

describe('maintenance: --help', () => {
  it('disable and enable say --all, --until and --drain (and its exit code)', async () => {
    const disable = await cronguard(['disable', '--help'], sandbox().env);
    expect(disable).toMatchObject({ code: 0, stderr: '' });
    expect(disable.stdout).toMatch(/^Usage: cronguard disable \[options\] \[name\]/);
    for (const flag of ['--all', '--until <time>', '--reason <text>', '--drain <duration>', '--by <who>']) expect(disable.stdout).toContain(flag);
    // As commander wraps it: words, whatever the width.
    const words = (text: string) => text.replace(/\s+/g, ' ');
    expect(words(disable.stdout)).toContain('--drain <duration> then wait up to DURATION until no run is active; still some: each named, exit 124');
    const enable = await cronguard(['enable', '--help'], sandbox().env);
    expect(words(enable.stdout)).toContain("--all end the fleet's pause (disable --all); jobs paused on their own stay paused");
    expect((await cronguard(['--help'], sandbox().env)).stdout).toContain('disable --all      pause every job, for maintenance (--until TIME, --drain D)');
  });
});
