import { describe, expect, it } from 'vitest';
import { mysqlBox } from '../commands/mysql-box.js';
import { cronguard, start } from '../helpers.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

// The browser test of Run now (browser-postgres.test.ts) on a MySQL log: the waiting loop
// polls for the request, the page polls the log for its live update; neither has NOTIFY.
const SHOTS = '/tmp/serve-shots';
const title = browserTitle('serve in a browser, MySQL log');

describe.skipIf(!chromiumPresent)(title, () => {
  const browser = useChromium(SHOTS);

  it('Run now on a job served by an --on-request --for loop shows the new run, succeeded, without a reload', async () => {
    const box = mysqlBox();
    const job = box.job('export');
    const command = ['sh', '-c', 'echo "served with $# args: $*"', 'sh'];
    await cronguard(['-n', job, '--', ...command], box.env);
    const loop = start(['-n', job, '--on-request', '--for', '5m', '--', ...command], box.env);
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(`${server.url}/jobs/${job}`);
    await page.fill('textarea[name="args"]', '<script>alert(1)</script>\nsecond arg');
    const clicked = Date.now();
    await Promise.all([page.waitForURL(/\?requested=\d+$/), page.click('button[name="run"]')]);
    // Landed after the redirect: from here on the page must update itself.
    await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }));
    const newest = page.locator('#runs tbody tr').first();
    await expect.poll(async () => `${await newest.getAttribute('data-run')} ${await newest.locator('.status').textContent()}`, { timeout: 60_000 }).toBe('2 succeeded');
    const shownAfter = Date.now() - clicked;
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    await expect.poll(() => page.locator('#requests tbody tr').first().locator('.status').textContent()).toBe('succeeded');
    expect(await page.locator('#requests tbody tr').first().locator('code.arg').allTextContents()).toEqual(['<script>alert(1)</script>', 'second arg']);
    await expect.poll(() => page.locator('#notice').textContent()).toMatch(/^Request 1 succeeded by run 2\.$/);
    expect(await cronguard(['logs', '2'], box.env)).toMatchObject({ code: 0, stdout: 'served with 2 args: <script>alert(1)</script> second arg\n' });
    await page.screenshot({ path: `${SHOTS}/job-run-now-mysql.png`, fullPage: true });
    console.log(`Run now (mysql): the new run showed as succeeded ${shownAfter} ms after the click`);
    loop.child.kill('SIGTERM');
    await loop.done;
    await page.close();
  });
});
