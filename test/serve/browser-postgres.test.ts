import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox, start, waitFor } from '../helpers.js';
import { pgSandbox, proxy } from '../pg-helpers.js';
import { STORES, storeBox } from '../stores.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { runsSoFar, serve } from './serve-helpers.js';

// End to end in a real browser: Debian's chromium (from apt, as .ci/run installs it)
// driven by playwright-core. Screenshots go to /tmp/serve-shots for a person to look at.
const SHOTS = '/tmp/serve-shots';
const title = browserTitle('serve in a browser');

describe.skipIf(!chromiumPresent)(title, () => {
  const browser = useChromium(SHOTS, { timezoneId: 'Asia/Tokyo' });

  async function open(url: string, width = 1100): Promise<Page> {
    const page = await browser().newPage();
    await page.setViewportSize({ width, height: 800 });
    await page.goto(url);
    return page;
  }

  it("lists a job that just ran, with times in the browser's zone, on a desk and on a phone", async () => {
    const box = sandbox();
    for (const pause of ['0.05', '0.1', '0.02', '0.2', '0.08']) await cronguard(['-n', 'nightly-backup', '--', 'sleep', pause], box.env);
    for (const code of [0, 0, 2, 2]) await cronguard(['-n', 'broken-report', '--', 'sh', '-c', `echo oops; exit ${code}`], box.env);
    const server = await serve(['-q'], box.env);
    const page = await open(`${server.url}/`);
    await expect.poll(() => page.locator('tr[data-job="nightly-backup"] .status').textContent()).toBe('succeeded');
    await expect.poll(() => page.locator('time').allTextContents()).not.toContainEqual(expect.stringContaining('UTC'));
    expect(await page.locator('tr[data-job="nightly-backup"] time').first().getAttribute('datetime')).toMatch(/Z$/);
    expect(await page.locator('tr.failing').getAttribute('data-job')).toBe('broken-report');
    await page.screenshot({ path: `${SHOTS}/jobs.png`, fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: `${SHOTS}/jobs-phone.png`, fullPage: true });
    // The server going away is said on the page, which keeps what it last showed.
    expect(await server.stop()).toBe(0);
    await expect.poll(() => page.locator('#live-status').textContent()).toMatch(/connection to cronguard serve was lost/);
    expect(await page.locator('#live-status').isVisible()).toBe(true);
    expect(await page.locator('tr[data-job="nightly-backup"]').count()).toBe(1);
    await page.screenshot({ path: `${SHOTS}/jobs-server-gone.png` });
    await page.close();
  });

  it.each(STORES)('Run now on a job served by an --on-request --for loop shows the new run, succeeded, without a reload; pausing stops it being served (%s)', async (kind) => {
    const box = storeBox(kind);
    const job = box.job('export');
    const shot = (name: string) => `${SHOTS}/${name}${kind === 'sqlite' ? '' : `-${kind}`}.png`;
    const command = ['sh', '-c', 'echo "served with $# args: $*"', 'sh'];
    await cronguard(['-n', job, '--', ...command], box.env);
    const loop = start(['-n', job, '--on-request', '--for', '5m', '--', ...command], box.env);
    const server = await serve(['-q'], box.env);
    const page = await open(`${server.url}/jobs/${job}`);
    const before = (await box.runs()).length;
    await page.fill('textarea[name="args"]', '<script>alert(1)</script>\nsecond arg');
    const clicked = Date.now();
    await Promise.all([page.waitForURL(/\?requested=\d+$/), page.click('button[name="run"]')]);
    // Landed after the redirect: from here on the page must update itself.
    await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }));
    const newest = page.locator('#runs tbody tr').first();
    await expect.poll(async () => `${await newest.getAttribute('data-run')} ${await newest.locator('.status').textContent()}`, { timeout: 60_000 }).toBe(`${before + 1} succeeded`);
    const shownAfter = Date.now() - clicked;
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    await expect.poll(() => page.locator('#requests tbody tr').first().locator('.status').textContent()).toBe('succeeded');
    expect(await page.locator('#requests tbody tr').first().locator('code.arg').allTextContents()).toEqual(['<script>alert(1)</script>', 'second arg']);
    await expect.poll(() => page.locator('#notice').textContent()).toMatch(/^Request \d+ succeeded by run \d+\.$/);
    await page.screenshot({ path: shot('job-run-now'), fullPage: true });
    console.log(`Run now (${kind}): the new run showed as succeeded ${shownAfter} ms after the click`);

    await page.fill('input[name="reason"]', 'migrating "the" <db>');
    await Promise.all([page.waitForURL(/\?paused=1$/), page.click('button[name="pause"]')]);
    expect(await page.locator('#summary .reason').textContent()).toBe('migrating "the" <db>');
    // A request for a paused job wakes its waiting loop, which finds it paused and stops
    // without serving it; so does any later invocation.
    await Promise.all([page.waitForURL(/\?requested=\d+$/), page.click('button[name="run"]')]);
    expect((await loop.done).code).toBe(0);
    const pending = page.locator('#requests tbody tr').first().locator('.status');
    expect(await pending.textContent()).toBe('pending');
    expect(await page.locator('#notice').textContent()).toMatch(/queued: the job is paused, so it waits until the job is resumed/);
    expect(await cronguard(['-n', job, '--on-request', '--', ...command], box.env)).toMatchObject({ code: 0 });
    expect(await box.runs()).toHaveLength(before + 1);
    await page.reload();
    expect(await pending.textContent()).toBe('pending');
    await page.screenshot({ path: shot('job-paused'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: shot('job-phone'), fullPage: true });
    await page.close();
  });

  it('says on a live page that the log became unreachable, and carries on when it is back', async () => {
    const box = pgSandbox();
    const job = box.job('outage');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const db = await proxy();
    try {
      const server = await serve(['-q', '--answer-within', '5s'], { ...box.env, CRONGUARD_DATABASE_URL: db.url });
      const page = await open(`${server.url}/`);
      const status = page.locator('#live-status');
      await expect.poll(() => page.locator(`tr[data-job="${job}"]`).count()).toBe(1);
      // Cut, as a network is cut (nothing refused, nothing answered): the server's answer
      // deadline makes it a 503 within seconds. Which words say why depends on where the
      // cut found the server (a statement under way, or a new connection), so any will do.
      db.freeze();
      await expect.poll(() => status.textContent(), { timeout: 60_000 }).toMatch(/The run log cannot be read right now: .+ within 5 s\. This page shows what it last knew/);
      expect(await status.isVisible()).toBe(true);
      await page.screenshot({ path: `${SHOTS}/jobs-log-unreachable.png` });
      db.thaw();
      await expect.poll(() => status.isVisible(), { timeout: 60_000 }).toBe(false);
      expect(await page.locator(`tr[data-job="${job}"]`).count()).toBe(1);
      await page.close();
    } finally {
      await db.close();
    }
  });

  it("shows a run's hostile output escaped, in colour, and runs none of it", async () => {
    const box = sandbox();
    const hostile = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> "quoted" 'single'`;
    await cronguard(['-n', 'hostile', '--', 'sh', '-c', 'printf "plain\\n\\033[1;31m%s\\033[0m\\n\\033[32mgreen\\033[0m\\n" "$1"; exit 1', 'sh', hostile], box.env);
    const server = await serve(['-q'], box.env);
    const page = await open(`${server.url}/runs/1`);
    expect(await page.locator('#output').textContent()).toBe(`plain\n${hostile}\ngreen\n`);
    expect(await page.locator('#output span.fg1.b').textContent()).toBe(hostile);
    expect(await page.locator('#output img, #output script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    await page.screenshot({ path: `${SHOTS}/run.png`, fullPage: true });
    await page.close();
  });

  it('follows a running job live', async () => {
    const box = sandbox();
    const barrier = box.path('go');
    const job = start(['-n', 'slow', '--', 'sh', '-c', `echo one; while [ ! -e '${barrier}' ]; do sleep 0.02; done; printf '\\033[33mtwo\\033[0m\\n'`], box.env);
    await waitFor(() => runsSoFar(box.stateDir).some((r) => r.child_pid !== null), 'the job to start');
    const server = await serve(['-q'], box.env);
    const page = await open(`${server.url}/runs/1`);
    await expect.poll(() => page.locator('#output').textContent()).toMatch(/^one\n/);
    await page.screenshot({ path: `${SHOTS}/run-live.png`, fullPage: true });
    await (await import('node:fs/promises')).writeFile(barrier, '');
    await expect.poll(() => page.locator('#header .status').textContent(), { timeout: 60_000 }).toBe('succeeded');
    expect(await page.locator('#output').textContent()).toBe('one\ntwo\n');
    expect((await job.done).code).toBe(0);
    await page.close();
  });
});
