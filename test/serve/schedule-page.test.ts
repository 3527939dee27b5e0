import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

const scheduleOf = async (job: string, env: NodeJS.ProcessEnv) => (await cronguard(['schedule', job], env)).stdout;

// The job page's schedule field (issue 24): the same checks as `cronguard schedule`, behind
// the CSRF token, and not there at all on a read-only server.
describe.each(STORES)('the job page\'s schedule field (%s)', (kind) => {
  it('saves, shows and clears a schedule; a bad one is a 400 that says why, storing nothing', async () => {
    const box = storeBox(kind);
    const job = box.job('nightly');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve([], box.env);
    const csrf = await server.csrf(`/jobs/${job}`);
    const saved = await server.post(`/jobs/${job}/schedule`, { csrf, schedule: ' CRON_TZ=Europe/Warsaw  0 3 * * MON-FRI ' });
    expect(saved.status).toBe(303);
    expect(saved.headers.get('location')).toBe(`/jobs/${job}?scheduled=1`);
    expect(await scheduleOf(job, box.env)).toBe('TZ=Europe/Warsaw 0 3 * * MON-FRI\n');
    const page = await (await server.get(`/jobs/${job}?scheduled=1`)).text();
    // With when it next fires: the job ran just now, so not before its next 03:00 in Warsaw.
    expect(page).toMatch(/<dd id="schedule"><code>TZ=Europe\/Warsaw 0 3 \* \* MON-FRI<\/code> <span class="muted">next<\/span> <time datetime="\d{4}-\d\d-\d\dT0[12]:00:00\.000Z">/);
    expect(page).toContain('name="schedule" value="TZ=Europe/Warsaw 0 3 * * MON-FRI"');
    expect(page).toContain('Schedule saved.');

    const bad = await server.post(`/jobs/${job}/schedule`, { csrf, schedule: '0 3 * * 8' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("Schedule: &#39;0 3 * * 8&#39; is not valid: weekday 8 is outside 0-7");
    if (kind === 'postgres') {
      // What set_schedule() refuses is a 400 too, with its reason.
      const pgOnly = await server.post(`/jobs/${job}/schedule`, { csrf, schedule: 'TZ=US/Pacific-New 0 3 * * *' });
      expect(pgOnly.status).toBe(400);
      expect(await pgOnly.text()).toContain("Schedule: PostgreSQL&#39;s set_schedule() refuses it: unknown time zone &#39;US/Pacific-New&#39;");
    }
    expect((await server.post(`/jobs/${job}/schedule`, { csrf, schedule: '<script>alert(1)</script>' })).status).toBe(400);
    const nul = await server.post(`/jobs/${job}/schedule`, { csrf, schedule: 'every 1m\0' });
    expect(nul.status).toBe(400);
    expect(await nul.text()).toContain("invalid duration &#39;1m\\x00&#39;");
    // A form without the field clears nothing.
    const missing = await server.post(`/jobs/${job}/schedule`, { csrf });
    expect(missing.status).toBe(400);
    expect(await missing.text()).toContain('Schedule: the form has no schedule field');
    expect((await server.post(`/jobs/${job}/schedule`, { csrf, schedule: 'constructor' })).status).toBe(400);
    expect(await scheduleOf(job, box.env)).toBe('TZ=Europe/Warsaw 0 3 * * MON-FRI\n');

    expect((await server.post(`/jobs/${job}/schedule`, { csrf, schedule: '' })).headers.get('location')).toBe(`/jobs/${job}?scheduled=0`);
    expect(await scheduleOf(job, box.env)).toBe('none\n');
  });

  it('refuses a POST without the CSRF token (403), and a job the log does not know (404)', async () => {
    const box = storeBox(kind);
    const job = box.job('guarded');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve([], box.env);
    const csrf = await server.csrf(`/jobs/${job}`);
    expect((await server.post(`/jobs/${job}/schedule`, { schedule: 'every 1m' })).status).toBe(403);
    expect((await server.post(`/jobs/${job}/schedule`, { csrf, schedule: 'every 1m' }, { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    expect((await server.post(`/jobs/${box.job('nosuch')}/schedule`, { csrf, schedule: 'every 1m' })).status).toBe(404);
    expect(await scheduleOf(job, box.env)).toBe('none\n');
  });
});

describe('the schedule field on a read-only server', () => {
  it('is not shown, and its POST is refused (403)', async () => {
    const box = sandbox();
    await cronguard(['-n', 'ro', '--', 'true'], box.env);
    await cronguard(['schedule', 'ro', '--every', '1h'], box.env);
    const server = await serve(['--read-only'], box.env);
    const page = await (await server.get('/jobs/ro')).text();
    expect(page).toMatch(/<dd id="schedule"><code>every 1h<\/code> <span class="muted">next<\/span> <time /);
    expect(page).not.toContain('name="schedule"');
    expect((await server.post('/jobs/ro/schedule', { schedule: '' })).status).toBe(403);
    expect(await scheduleOf('ro', box.env)).toBe('every 1h\n');
  });
});

const SHOTS = '/tmp/serve-shots';

describe.skipIf(!chromiumPresent)(browserTitle('the schedule field in a browser'), () => {
  const browser = useChromium(SHOTS, { timezoneId: 'Europe/Warsaw' });

  it('a person types a schedule, saves it and sees it; a mistake is said in words', async () => {
    const box = sandbox();
    await cronguard(['-n', 'report', '--', 'true'], box.env);
    const server = await serve(['-q'], box.env);
    const page: Page = await browser().newPage();
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(`${server.url}/jobs/report`);
    expect(await page.locator('#schedule').textContent()).toBe('none');
    await page.fill('input[name="schedule"]', '*/15 8-18 * * 1-5');
    await Promise.all([page.waitForURL(/\?scheduled=1$/), page.click('button[name="set-schedule"]')]);
    expect(await page.locator('#schedule code').textContent()).toBe('*/15 8-18 * * 1-5');
    expect(await page.locator('#schedule').textContent()).toMatch(/^\*\/15 8-18 \* \* 1-5 (next|due since) \S/);
    expect(await page.inputValue('input[name="schedule"]')).toBe('*/15 8-18 * * 1-5');
    await page.screenshot({ path: `${SHOTS}/job-schedule.png`, fullPage: true });
    await page.fill('input[name="schedule"]', 'every now and then');
    await page.click('button[name="set-schedule"]');
    await expect.poll(() => page.locator('body').textContent()).toContain('Schedule: every: invalid duration');
    await page.screenshot({ path: `${SHOTS}/job-schedule-refused.png`, fullPage: true });
    expect(await scheduleOf('report', box.env)).toBe('*/15 8-18 * * 1-5\n');
    await page.close();
  });
});
