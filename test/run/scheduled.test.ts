import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { collected, cronguard, sandbox, start, waitFor } from '../helpers.js';
import { sql } from '../pg-helpers.js';
import { STORES, type StoreBox, storeBox } from '../stores.js';

// A schedule written by hand past set_schedule()'s checks: only the store's CHECK holds it.
async function writeByHand(box: StoreBox & { schema?: string }, job: string, spec: string): Promise<void> {
  if (box.kind === 'postgres') await sql(`INSERT INTO "${box.schema}".jobs (name, schedule) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET schedule = $2`, [job, spec]);
  else await box.setSchedule(job, spec);
}

describe.each(STORES)('--scheduled (%s)', (kind) => {
  // Whether each invocation ran is checked against the rule, by when it began and ended: one
  // that began a period (less its slack) after the last start must have run, one that ended
  // before then must not have; in between, either. No timing is assumed of a busy machine.
  async function invokeEverySecond(box: StoreBox, job: string, periodMs: number, times: number): Promise<number[]> {
    const due = periodMs - Math.min(periodMs / 10, 30_000);
    const starts: number[] = [];
    for (let i = 0; i < times; i++) {
      const last = (await box.runs()).filter((r) => r.job === job).at(-1);
      const lastMs = last ? Date.parse(last.started_at) : null;
      const began = Date.now();
      expect(await cronguard(['-n', job, '--scheduled', '--', 'true'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: '' });
      const ended = Date.now();
      const now = (await box.runs()).filter((r) => r.job === job);
      const ran = now.length > (last ? now.findIndex((r) => r.id === last.id) + 1 : 0);
      if (lastMs === null || began - lastMs >= due) expect(ran, `invocation ${i} began ${began - (lastMs ?? 0)} ms after the last start`).toBe(true);
      if (lastMs !== null && ended - lastMs < due) expect(ran, `invocation ${i} ended ${ended - lastMs} ms after the last start`).toBe(false);
      if (ran) starts.push(Date.parse(now.at(-1)?.started_at as string));
      await sleep(Math.max(0, began + 1000 - Date.now()));
    }
    return starts;
  }

  it('runs a job scheduled every 2s, invoked every second, every 2s; every 1s applies at the next invocation, the crontab line untouched', async () => {
    const box = storeBox(kind);
    const job = box.job('pace');
    expect((await cronguard(['schedule', job, '--every', '2s'], box.env)).code).toBe(0);
    const starts = await invokeEverySecond(box, job, 2000, 7);
    expect(starts.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < starts.length; i++) expect((starts[i] as number) - (starts[i - 1] as number)).toBeGreaterThanOrEqual(1800);
    expect((await cronguard(['schedule', job, '--every', '1s'], box.env)).code).toBe(0);
    await invokeEverySecond(box, job, 1000, 4);
  });

  it('after downtime runs a missed fire once, not once per fire missed; a request runs whenever; a paused job not at all', async () => {
    const box = storeBox(kind);
    const job = box.job('catchup');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    // Yearly: its last fire (1 January) came long after the last run, 400 days ago.
    await box.setSchedule(job, '0 0 1 1 *');
    await box.insertRuns([{ job, status: 'succeeded', startedAt: new Date(Date.now() - 400 * 86400e3), durationMs: 1000 }]);
    const run = () => cronguard(['-v', '-n', job, '--scheduled', '--', 'true'], box.env);
    expect((await run()).stderr).toMatch(new RegExp(`cronguard: ${job}: succeeded, exit 0\\n`));
    const skipped = await run();
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toMatch(new RegExp(`cronguard: ${job}: not due: its schedule '0 0 1 1 \\*' next fires at \\d{4}-01-01T\\d\\d:00:00\\.000Z; skipping with exit 0\\n`));
    expect((await box.runs()).map((r) => r.trigger)).toEqual(['cron', 'cron']);
    await box.request(job);
    expect((await run()).code).toBe(0);
    expect((await box.runs()).map((r) => r.trigger)).toEqual(['cron', 'cron', 'request']);
    // Due again (every 1s), but paused.
    await box.setSchedule(job, 'every 1s');
    expect((await cronguard(['disable', job], box.env)).code).toBe(0);
    await sleep(1100);
    expect((await run()).stderr).toMatch(/paused since .*; skipping with exit 0\n/);
    expect(await box.runs()).toHaveLength(3);
  });

  it('does not run a job without a schedule, and says so once a day; nor one whose stored schedule cannot be read', async () => {
    const box = storeBox(kind);
    const job = box.job('unset');
    const marker = join(box.dir, 'ran');
    const run = () => cronguard(['-n', job, '--scheduled', '--', 'touch', marker], box.env);
    const fix = `set one with: cronguard schedule ${job} --every D (or --cron EXPR) (said once a day)`;
    expect(await run()).toMatchObject({ code: 0, stdout: '', stderr: `cronguard: ${job} did not run: --scheduled, but it has no stored schedule; ${fix}\n` });
    expect(await run()).toMatchObject({ code: 0, stdout: '', stderr: '' });
    await writeByHand(box, job, '61 * * * *');
    // Said for the day: the next refusal of the day is silent, whatever its reason.
    expect(await run()).toMatchObject({ code: 0, stderr: '' });
    await box.setSchedule(job, null);
    expect(existsSync(marker)).toBe(false);
    expect((await box.runs()).filter((r) => r.job === job)).toEqual([]);
    const other = box.job('bad');
    await writeByHand(box, other, '61 * * * *');
    expect(await cronguard(['-n', other, '--scheduled', '--', 'touch', marker], box.env)).toMatchObject({
      code: 0,
      stderr: `cronguard: ${other} did not run: --scheduled, but its stored schedule: '61 * * * *' is not valid: minute 61 is outside 0-59${kind === 'postgres' ? '' : ' (five fields: minute hour day-of-month month day-of-week, e.g. "0 3 * * 1-5")'}; ${fix.replace(job, other)}\n`,
    });
    expect(existsSync(marker)).toBe(false);
  });

  it.each([[['--every', '500ms']], [[]]])('in a loop (%j --for), runs each time the schedule is due and no more often', async (every) => {
    const box = storeBox(kind);
    const job = box.job('loop');
    expect((await cronguard(['schedule', job, '--every', '2s'], box.env)).code).toBe(0);
    expect(await cronguard(['-n', job, '--scheduled', ...every, '--for', '5s', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    const starts = (await box.runs()).map((r) => Date.parse(r.started_at));
    // Without --every, the loop wakes when the schedule next fires (the refusal says when).
    expect(starts.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < starts.length; i++) expect((starts[i] as number) - (starts[i - 1] as number)).toBeGreaterThanOrEqual(1800);
  });

  it('a loop without a schedule says so once, and runs when one is set meanwhile', async () => {
    const box = storeBox(kind);
    const job = box.job('loopset');
    const loop = start(['-n', job, '--scheduled', '--every', '200ms', '--for', '1h', '--', 'true'], box.env);
    const seen = collected(loop);
    await waitFor(() => seen.stderr().includes('did not run'), 'the loop to say it has no schedule');
    await box.setSchedule(job, 'every 1h');
    // Ended, so that the signal finds the loop waiting, not its command running.
    await waitFor(async () => (await box.runs()).filter((r) => r.status === 'succeeded').length === 1, 'the loop to run once the schedule is set');
    loop.child.kill('SIGTERM');
    const result = await loop.done;
    expect(result.stderr).toBe(`cronguard: ${job} did not run: --scheduled, but it has no stored schedule; set one with: cronguard schedule ${job} --every D (or --cron EXPR) (said once a day)\ncronguard: ${job}: stopped by SIGTERM while waiting for the next run\n`);
    expect(await box.runs()).toHaveLength(1);
  });
});

describe('--scheduled, what it cannot go with', () => {
  it.each([
    [['--min-interval', '1m'], '--scheduled spaces runs by the stored schedule; it cannot go with --min-interval (use "cronguard schedule NAME --every D")'],
    [['--on-request'], '--scheduled runs requests too; it cannot go with --on-request'],
    [['--no-log'], '--scheduled reads the schedule from the run log; it cannot go with --no-log'],
  ])('%j: 64, one line, nothing run', async (extra, message) => {
    const box = sandbox();
    const marker = join(box.dir, 'ran');
    expect(await cronguard(['-n', 'j', '--scheduled', ...extra, '--', 'touch', marker], box.env)).toMatchObject({
      code: 64,
      stdout: '',
      stderr: `cronguard: ${message} (see cronguard --help)\n`,
    });
    expect(existsSync(marker)).toBe(false);
  });

  it('a run log it cannot read: 69, one line, nothing run', async () => {
    const box = sandbox();
    const marker = join(box.dir, 'ran');
    mkdirSync(box.stateDir, { mode: 0o700 });
    writeFileSync(join(box.stateDir, 'cronguard.db'), 'not a database, but long enough to be read as one '.repeat(100));
    expect(await cronguard(['-n', 'j', '--scheduled', '--', 'touch', marker], box.env)).toMatchObject({
      code: 69,
      stdout: '',
      stderr: `cronguard: run log in ${box.stateDir} unavailable (open: file is not a database); --scheduled cannot tell whether j is due; nothing ran\n`,
    });
    expect(existsSync(marker)).toBe(false);
  });
});
