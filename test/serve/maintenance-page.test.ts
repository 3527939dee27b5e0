import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

// The web page during maintenance (issue 25): the fleet's pause on the jobs list and a job's
// page, and a job's pauses and resumes (its own and the fleet's) on its page.
describe.each(STORES)('the pages during maintenance (%s)', (kind) => {
  it('show the fleet paused, and the pause events of the job', async () => {
    const box = storeBox(kind);
    const job = box.job('nightly');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const server = await serve([], box.env);
    expect(await (await server.get('/')).text()).toContain('<div id="fleet" data-live></div>');
    expect(await (await server.get(`/jobs/${job}`)).text()).toContain('<div id="pauses" data-live><p class="muted">Never paused.</p></div>');

    expect((await cronguard(['disable', job, '--reason', 'flaky', '--by', 'alice'], box.env)).code).toBe(0);
    expect((await cronguard(['enable', job, '--by', 'alice'], box.env)).code).toBe(0);
    expect((await cronguard(['disable', '--all', '--reason', 'db <upgrade>', '--until', '+1h', '--by', 'ops'], box.env)).code).toBe(0);

    const list = await (await server.get('/')).text();
    expect(list).toMatch(/<div id="fleet" data-live><p class="notice warn" role="status"><strong>Fleet paused<\/strong> since <time datetime="[^"]+Z">[^<]+<\/time> by ops, until <time datetime="[^"]+Z">[^<]+<\/time>: db &lt;upgrade&gt;\. No job runs; requests wait\. <code>cronguard enable --all<\/code> resumes it\.<\/p><\/div>/);
    expect(list).toContain('<span class="state disabled">paused</span> <span class="muted">fleet-wide</span>');

    const page = await (await server.get(`/jobs/${job}`)).text();
    expect(page).toContain('<strong>Fleet paused</strong>');
    const rows = [...page.matchAll(/<tr data-event="\d+">([\s\S]*?)<\/tr>/g)].map((m) => (m[1] as string).replace(/<time datetime="[^"]+">[^<]+<\/time>/g, 'T').replace(/\n/g, ''));
    expect(rows).toEqual([
      '<td data-label="When">T</td><td data-label="What">paused <span class="state disabled">fleet-wide</span></td><td data-label="Who">ops</td><td data-label="Until">T</td><td data-label="Why">db &lt;upgrade&gt;</td>',
      '<td data-label="When">T</td><td data-label="What">resumed</td><td data-label="Who">alice</td><td data-label="Until">-</td><td data-label="Why"></td>',
      '<td data-label="When">T</td><td data-label="What">paused</td><td data-label="Who">alice</td><td data-label="Until">-</td><td data-label="Why">flaky</td>',
    ]);
    // The job is not paused on its own: no Resume button that would resume nothing.
    expect(page).not.toContain('name="resume"');

    expect((await cronguard(['enable', '--all'], box.env)).code).toBe(0);
    expect(await (await server.get('/')).text()).toContain('<div id="fleet" data-live></div>');
  });
});

const SHOTS = '/tmp/serve-shots';

describe.skipIf(!chromiumPresent)(browserTitle('the pages during maintenance in a browser'), () => {
  const browser = useChromium(SHOTS, { timezoneId: 'Europe/Warsaw' });

  it('a person sees the fleet paused, on the list and on the job, with its pauses', async () => {
    const box = sandbox();
    await cronguard(['-n', 'report', '--', 'true'], box.env);
    await cronguard(['disable', 'report', '--reason', 'flaky upstream', '--by', 'alice'], box.env);
    await cronguard(['enable', 'report', '--by', 'alice'], box.env);
    await cronguard(['disable', '--all', '--reason', 'database upgrade', '--until', '+2h', '--by', 'ops'], box.env);
    const server = await serve(['-q'], box.env);
    const page: Page = await browser().newPage();
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(server.url);
    expect(await page.locator('#fleet').textContent()).toMatch(/^Fleet paused since .+ by ops, until .+: database upgrade\. No job runs; requests wait\. cronguard enable --all resumes it\.$/);
    await page.screenshot({ path: `${SHOTS}/fleet-paused-list.png`, fullPage: true });
    await page.goto(`${server.url}/jobs/report`);
    expect(await page.locator('#pauses tbody tr').count()).toBe(3);
    expect(await page.locator('#pauses tbody tr').first().textContent()).toContain('fleet-wide');
    await page.screenshot({ path: `${SHOTS}/fleet-paused-job.png`, fullPage: true });
    await page.close();
  });
});
