import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { storeBox } from '../stores.js';
import { HAVE_TMUX, onScreen } from '../tmux.js';

const HOUR = 3_600_000;

// status and history as a person sees them: in a real terminal, of the usual size and a
// narrow one, in colour, in their own time zone.
describe.skipIf(!HAVE_TMUX)('status and history in a terminal (tmux)', () => {
  it('status fits the terminal, colours failures, and draws the sparkline', async () => {
    const box = storeBox('sqlite');
    await cronguard(['migrate'], box.env);
    const long = `nightly-report-builder-for-the-finance-department-${'x'.repeat(20)}`;
    await box.insertRuns([
      ...Array.from({ length: 20 }, (_, i) => ({ job: 'backup', status: i === 15 ? 'failed' : 'succeeded', startedAt: new Date(Date.now() - (20 - i) * HOUR), durationMs: 40_000 + i * 1000 })),
      { job: long, status: 'failed', startedAt: new Date(Date.now() - HOUR), durationMs: 5000, exitCode: 2 },
    ]);
    const env = { ...box.env, LANG: 'C.UTF-8', TZ: 'Europe/Paris' };
    for (const width of [80, 60]) {
      const screen = await onScreen(['status'], env, width);
      const rows = screen.trimEnd().split('\n');
      expect(rows[0]).toMatch(/^JOB +STATE +LAST/);
      for (const row of rows) expect(row.length, row).toBeLessThanOrEqual(width);
      expect(screen).toMatch(/^backup +idle +succeeded .*[▁▂▃▄▅▆▇█]{3}×[▁▂▃▄▅▆▇█]{4}$/mu);
      expect(screen).toMatch(/^nightly-report-bu\S*… +idle +failed 2 /m);
    }
    const coloured = await onScreen(['status'], env, 80, 40, true);
    expect(coloured).toMatch(/\x1b\[31m×/);
    const detail = await onScreen(['status', 'backup'], env);
    expect(detail).toMatch(/^backup {2}\(times in (CET|GMT\+1)\)\n {2}state {8}idle\n/);
    // Durations grow run by run, from the shortest (▁) to the longest (█); run 16 failed.
    expect(detail).toMatch(/ {2}recent {7}▁[▁▂▃▄▅▆▇█]{14}×[▁▂▃▄▅▆▇█]{3}█\n/u);
    expect(detail).toMatch(/ {2}last success run 20 in 59s\n {15}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(1h00m ago\)\n/);
    for (const row of detail.split('\n')) expect(row.length, row).toBeLessThanOrEqual(80);
    expect(detail).toMatch(/95% of the last 20 succeeded; median 49s, p95 58s/);
  });

  it('history shows local times with the zone, and cuts the command to the terminal', async () => {
    const box = storeBox('sqlite');
    await cronguard(['-n', 'chatty', '--', 'echo', 'a long argument list that goes on and on', 'and', 'on', 'past the edge'], box.env);
    const screen = await onScreen(['history'], { ...box.env, TZ: 'America/New_York' }, 100);
    const [header, row] = screen.trimEnd().split('\n') as [string, string];
    expect(header).toMatch(/^ID +JOB +STATUS +TRIGGER +STARTED \(E[SD]T\) +DURATION +EXIT +SKIPS +HOST +COMMAND$/);
    expect(row.length).toBeLessThanOrEqual(100);
    expect(row).toMatch(/^1 +chatty +succeeded +cron +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d .* echo 'a long.*…$/);
    const utc = new Date();
    const local = new Date(utc.toLocaleString('en-US', { timeZone: 'America/New_York' }));
    expect(row).toContain(`${local.getFullYear()}-${String(local.getMonth() + 1).padStart(2, '0')}-${String(local.getDate()).padStart(2, '0')} ${String(local.getHours()).padStart(2, '0')}:`);
  });
});
