import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

interface Family {
  name: string;
  type: string;
  metrics: { labels?: Record<string, string>; value: string }[];
}
// prom2json's parser, ported: it throws on text the format does not allow.
const parseExposition = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];
// Prometheus' own linter, when this machine has it (Debian's `prometheus` package).
const promtool = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find(existsSync);

// Validates `text` with both parsers and returns it as {family: {job[,status]: value}}.
function parsed(text: string): Record<string, Record<string, number>> {
  if (promtool) execFileSync(promtool, ['check', 'metrics'], { input: text });
  const out: Record<string, Record<string, number>> = {};
  for (const family of parseExposition(text)) {
    out[family.name] = Object.fromEntries(
      family.metrics.map((m) => [[m.labels?.job, m.labels?.status].filter(Boolean).join(','), Number(m.value)]),
    );
  }
  return out;
}

describe.each(STORES)('metrics (%s)', (kind) => {
  it('--metrics-dir rewrites the job\'s textfile at start (running) and end, in a format Prometheus reads', async () => {
    const box = storeBox(kind);
    const job = box.job('exported');
    const dir = box.path('textfiles');
    mkdirSync(dir);
    const file = join(dir, `cronguard_${job}.prom`);
    await cronguard(['-n', job, '--metrics-dir', dir, '--', 'true'], box.env);
    const log = box.path('log');
    const running = start(['-n', job, '--', fixture('hold.sh'), log, box.path('go')], { ...box.env, CRONGUARD_METRICS_DIR: dir });
    await waitFor(() => lines(log).length > 0 && parsed(readFileSync(file, 'utf8')).cronguard_running?.[job] === 1, 'the running state in the textfile');
    release(box.path('go'));
    await running.done;
    await cronguard(['-n', job, '--metrics-dir', dir, '--', 'sh', '-c', 'kill -TERM $$'], box.env);
    const m = parsed(readFileSync(file, 'utf8'));
    expect(m.cronguard_running).toEqual({ [job]: 0 });
    expect(m.cronguard_last_exit_code).toEqual({ [job]: 143 });
    expect(m.cronguard_runs_total).toMatchObject({ [`${job},succeeded`]: 2, [`${job},killed`]: 1, [`${job},failed`]: 0 });
    expect(m.cronguard_last_success_timestamp_seconds?.[job]).toBeGreaterThan(Date.now() / 1000 - 3600);
    expect(Object.keys(m)).toEqual(expect.arrayContaining(['cronguard_last_start_timestamp_seconds', 'cronguard_last_duration_seconds']));
    expect(readdirSync(dir)).toEqual([`cronguard_${job}.prom`]);
  });

  it('`cronguard metrics` prints every job, with 0 for a job that never succeeded', async () => {
    const box = storeBox(kind);
    const [good, bad] = [box.job('good'), box.job('bad')];
    await cronguard(['-n', good, '--', 'true'], box.env);
    await cronguard(['-n', bad, '--', 'false'], box.env);
    const result = await cronguard(['metrics'], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const m = parsed(result.stdout);
    expect(m.cronguard_last_success_timestamp_seconds?.[bad]).toBe(0);
    expect(m.cronguard_last_exit_code).toEqual({ [good]: 0, [bad]: 1 });
    expect(m.cronguard_runs_total?.[`${bad},failed`]).toBe(1);
  });

  it('a metrics dir it cannot write costs the job nothing but one warning', async () => {
    const box = storeBox(kind);
    const job = box.job('unwritable');
    const notDir = box.path('a-file');
    writeFileSync(notDir, '');
    const result = await cronguard(['-n', job, '--metrics-dir', notDir, '--', 'echo', 'ran'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n' });
    expect(result.stderr).toMatch(new RegExp(`^cronguard: ${job}: cannot write metrics to .*a-file/cronguard_${job}.prom \\(.*\\); the job is not affected\\n$`));
    expect((await box.runs()).map((r) => r.status)).toEqual(['succeeded']);
  });
});

describe('metrics: bad input', () => {
  it('refuses --metrics-dir with --no-log (64), running nothing', async () => {
    const box = storeBox('sqlite');
    const result = await cronguard(['-n', 'x', '--no-log', '--metrics-dir', box.dir, '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: --metrics-dir: the metrics come from the run log, which --no-log turns off/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });
});
