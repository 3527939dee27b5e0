import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox } from '../helpers.js';
import { holdSlots } from '../slots.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

// The web page of a job run with --max-running 3 while two copies of it run: "2 of 3
// running" on the jobs page and the job's, and on the job's who holds each slot. A job
// without it beside, as it always looked. Screenshots go to SHOTS, for a person to look at.
const SHOTS = process.env.CRONGUARD_SHOTS ?? '/tmp/serve-shots/slots';
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

async function twoOfThree() {
  const box = sandbox();
  await cronguard(['-n', 'nightly-backup', '--', 'true'], box.env);
  const single = await holdSlots('mail-queue', 1, 1, box.env, box.dir);
  const report = await holdSlots('report-render', 3, 2, box.env, box.dir);
  return { box, release: () => Promise.all([single.release(), report.release()]) };
}

describe.skipIf(!chromiumPresent)(browserTitle('the web page of a job with --max-running'), () => {
  const browser = useChromium(SHOTS, { viewport: DESKTOP });

  it('reads "2 of 3 running" with a link to each slot\'s run on the jobs page; a job without it as before', async () => {
    const { box, release } = await twoOfThree();
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.goto(`${server.url}/`);
    await page.screenshot({ path: `${SHOTS}/jobs.png`, fullPage: true });
    const state = (job: string) => page.locator(`tr[data-job="${job}"] td[data-label="State"]`);
    const report = state('report-render');
    expect((await report.locator('.state').textContent())?.trim()).toBe('2 of 3 running');
    const links = await report.locator('a.slot').evaluateAll((all) => all.map((a) => [a.textContent, a.getAttribute('href')]));
    expect(links).toEqual([
      ['slot 0', '/runs/3'],
      ['slot 1', '/runs/4'],
    ]);
    // One copy: "running", since when, linked to its run, as it always read.
    expect((await state('mail-queue').locator('.state').textContent())?.trim()).toBe('running');
    expect(await state('mail-queue').locator('a').getAttribute('href')).toBe('/runs/2');
    expect(await state('mail-queue').locator('a.slot').count()).toBe(0);
    // On a phone, a card as small as a job's with one copy.
    await page.setViewportSize(PHONE);
    await page.screenshot({ path: `${SHOTS}/jobs-phone.png`, fullPage: true });
    const height = (job: string) => page.locator(`tr[data-job="${job}"]`).evaluate((r) => r.getBoundingClientRect().height);
    expect(await height('report-render')).toBeLessThanOrEqual(await height('mail-queue'));
    await page.close();
    await release();
  });

  it('names the holder of each slot on the job page: slot, run, host, pid, since', async () => {
    const { box, release } = await twoOfThree();
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.goto(`${server.url}/jobs/report-render`);
    await page.screenshot({ path: `${SHOTS}/job.png`, fullPage: true });
    const [, , first, second] = runs(box.stateDir);
    expect((await page.locator('#summary .state').textContent())?.trim()).toBe('2 of 3 running');
    const held = await page.locator('#slots li').evaluateAll((all) => all.map((li) => [li.getAttribute('data-slot'), li.textContent?.replace(/\s+/g, ' ').trim(), li.querySelector('a')?.getAttribute('href'), li.querySelector('time')?.getAttribute('datetime')]));
    expect(held).toEqual([
      ['0', expect.stringMatching(new RegExp(`^slot 0: run 3 on ${first?.host}, pid ${first?.pid}, since `)), '/runs/3', first?.started_at],
      ['1', expect.stringMatching(new RegExp(`^slot 1: run 4 on ${second?.host}, pid ${second?.pid}, since `)), '/runs/4', second?.started_at],
    ]);
    // Its runs say which slot each held.
    const slotColumn = await page.locator('#runs tr[data-run]').evaluateAll((all) => all.map((r) => [r.getAttribute('data-run'), r.querySelector('td[data-label="Slot"]')?.textContent]));
    expect(slotColumn).toEqual([
      ['4', '1'],
      ['3', '0'],
    ]);
    // A job without --max-running has no slots on its page.
    await page.goto(`${server.url}/jobs/mail-queue`);
    expect(await page.locator('#slots').count()).toBe(0);
    expect(await page.locator('#runs th', { hasText: 'Slot' }).count()).toBe(0);
    expect((await page.locator('#summary .state').textContent())?.trim()).toBe('running');
    await page.close();
    await release();
  });

  it('shows a third copy in its slot as it starts, without a reload', async () => {
    const { box, release } = await twoOfThree();
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.goto(`${server.url}/jobs/report-render`);
    expect((await page.locator('#summary .state').textContent())?.trim()).toBe('2 of 3 running');
    const third = await holdSlots('report-render', 3, 1, box.env, box.dir);
    await page.locator('#summary .state', { hasText: '3 of 3 running' }).waitFor();
    await page.screenshot({ path: `${SHOTS}/job-three.png`, fullPage: true });
    expect(await page.locator('#slots li').count()).toBe(3);
    await page.close();
    await Promise.all([release(), third.release()]);
  });
});
