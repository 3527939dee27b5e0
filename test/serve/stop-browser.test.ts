import { hostname } from 'node:os';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { fixture, isAlive, lines, start, waitFor } from '../helpers.js';
import { storeBox } from '../stores.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

// The Stop buttons in a real browser (Debian's chromium, driven by playwright-core), and
// their POSTs refused without the form's CSRF field and on a read-only server.
const SHOTS = '/tmp/serve-shots';
const title = browserTitle('serve: the Stop button in a browser');

describe.skipIf(!chromiumPresent)(title, () => {
  const browser = useChromium(SHOTS);

  async function open(url: string): Promise<Page> {
    const page = await browser().newPage();
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(url);
    return page;
  }

  it('Stop on a running run stops its whole tree; the page shows it killed, by whom, without a reload', async () => {
    const box = storeBox('sqlite');
    const pids = box.path('pids');
    const run = start(['-n', 'long-export', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    const server = await serve(['-q'], box.env);
    const page = await open(`${server.url}/runs/1`);
    expect(await page.locator('button[name="stop"]').count()).toBe(1);
    await page.screenshot({ path: `${SHOTS}/run-stop-button.png` });
    await Promise.all([page.waitForURL(/\/runs\/1\?stopping=1$/), page.click('button[name="stop"]')]);
    expect(await page.locator('p.notice.ok').textContent()).toMatch(/^Asked to stop/);
    await expect.poll(() => page.locator('#header .status').first().textContent(), { timeout: 60_000 }).toBe('killed');
    expect(await page.locator('#header').textContent()).toContain(`stopped by web (127.0.0.1) (cronguard serve on ${hostname()}): killed by SIGTERM`);
    // The run is over: its button went with the header's update.
    expect(await page.locator('button[name="stop"]').count()).toBe(0);
    await page.screenshot({ path: `${SHOTS}/run-stopped.png` });
    expect((await run.done).code).toBe(143);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    await page.close();
  });

  it('Stop on a running job stops its run; without the CSRF field, or read-only, a POST is refused', async () => {
    const box = storeBox('sqlite');
    const pids = box.path('pids');
    const run = start(['-n', 'nightly', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    const readOnly = await serve(['-q', '--read-only'], box.env);
    expect(await (await readOnly.get('/runs/1')).text()).not.toContain('name="stop"');
    expect(await (await readOnly.get('/jobs/nightly')).text()).not.toContain('name="stop"');
    expect((await readOnly.post('/runs/1/stop', {})).status).toBe(403);
    expect((await readOnly.post('/jobs/nightly/stop', {})).status).toBe(403);
    const server = await serve(['-q'], box.env);
    expect((await server.post('/runs/1/stop', {})).status).toBe(403);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(true);
    expect((await box.runs())[0]?.status).toBe('running');
    const page = await open(`${server.url}/jobs/nightly`);
    await page.screenshot({ path: `${SHOTS}/job-stop-button.png` });
    await Promise.all([page.waitForURL(/\/jobs\/nightly\?stopping=1$/), page.click('button[name="stop"]')]);
    await expect.poll(() => page.locator('#runs tbody tr').first().locator('.status').textContent(), { timeout: 60_000 }).toMatch(/^killed/);
    await page.screenshot({ path: `${SHOTS}/job-stopped.png` });
    expect((await run.done).code).toBe(143);
    // Nothing left to stop: said, not done (409).
    const token = await server.csrf('/jobs/nightly');
    const again = await server.post('/runs/1/stop', { csrf: token });
    expect(again.status).toBe(409);
    expect(await again.text()).toBe('run 1 of nightly is not running (killed); nothing to stop.');
    await page.close();
  });
});
