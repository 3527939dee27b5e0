import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cronguard, ROOT, sandbox } from '../helpers.js';
import { HAVE_TMUX, onScreen } from '../tmux.js';

const HEADERS = ['JOB', 'STATE', 'LAST', 'AGO', 'OK AGO', 'OK%', 'MEDIAN', 'P95', 'NEXT', 'RECENT', 'REQ'];

// Jobs that fill every column of `status`: a long name, a failure, --min-interval (NEXT)
// and a pending request (REQ). No COLUMNS of the test runner's own.
async function fullTable() {
  const box = sandbox();
  const { COLUMNS: _, ...env } = box.env;
  const long = `a-rather-long-job-name-for-the-nightly-report-${'x'.repeat(30)}`;
  await cronguard(['-n', long, '--min-interval', '1h', '--', 'true'], env);
  await cronguard(['-n', 'flaky', '--', 'true'], env);
  await cronguard(['-n', 'flaky', '--', 'false'], env);
  await cronguard(['request', 'flaky'], env);
  return { env, long };
}

const header = (table: string) => table.split('\n')[0] ?? '';
const shown = (table: string) => HEADERS.filter((h) => new RegExp(`(^| )${h}( |$)`).test(header(table)));

describe('status: as wide as asked, and a chart in plain ASCII', () => {
  it('piped, it drops and cuts nothing; COLUMNS, when set, is the width to fit', async () => {
    const { env, long } = await fullTable();
    const piped = (await cronguard(['status'], env)).stdout;
    expect(shown(piped)).toEqual(HEADERS);
    expect(piped).toContain(long);
    const wide = (await cronguard(['status'], { ...env, COLUMNS: '200' })).stdout;
    expect(shown(wide)).toEqual(HEADERS);
    const narrow = (await cronguard(['status'], { ...env, COLUMNS: '60' })).stdout;
    for (const row of narrow.trimEnd().split('\n')) expect(row.length).toBeLessThanOrEqual(60);
    expect(shown(narrow).length).toBeLessThan(HEADERS.length);
  });

  it.runIf(HAVE_TMUX)('on an 80-column terminal under the C locale: fitted, the sparkline in ASCII bars', async () => {
    const { env } = await fullTable();
    const screen = await onScreen(['status'], { ...env, LANG: 'C', LC_ALL: '', LC_CTYPE: '' }, 80);
    const rows = screen.trimEnd().split('\n');
    for (const row of rows) expect(row.length).toBeLessThanOrEqual(80);
    expect(shown(screen)).toContain('RECENT');
    // A success then a failure: a bar, then a cross; nothing but bars and crosses.
    expect(rows.find((r) => r.startsWith('flaky'))).toMatch(/ [_.:|]x /);
    expect(screen).not.toMatch(/[=+*#@]/);
  });
});

describe('requests and the man page', () => {
  it('requests labels its times with their zone, as history does', async () => {
    const box = sandbox();
    await cronguard(['request', 'job'], box.env);
    const table = await cronguard(['requests'], { ...box.env, TZ: 'UTC' });
    expect(table.stdout).toMatch(/^ID +JOB +STATUS +REQUESTED \(UTC\) +NOT BEFORE /);
  });

  it('keeps `--batch [--batch-max N]` on one line, and its crontab lines name cronguard by its full path', () => {
    const page = execFileSync('man', ['-l', `${ROOT}/man/cronguard.1`], { encoding: 'utf8', env: { ...process.env, MANWIDTH: '80', MAN_KEEP_FORMATTING: '', LANG: 'C.UTF-8' } });
    expect(page).toMatch(/^ {7}--batch \[--batch-max N\]\n/m);
    const schedule = /^ +([*\d/,-]+ ){5}/;
    const crontab = page.split('\n').filter((l) => schedule.test(l) && l.includes('cronguard '));
    expect(crontab.length).toBeGreaterThan(3);
    for (const line of crontab) expect(line.replace(schedule, '')).toMatch(/^\/usr\/local\/bin\/cronguard /);
  });
});
