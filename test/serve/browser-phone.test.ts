import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { cronguard, release, sandbox, start, waitFor } from '../helpers.js';
import { storeBox } from '../stores.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { runsSoFar, serve } from './serve-helpers.js';

// The pages on a 390 px phone in dark mode, in Debian's chromium driven by playwright-core:
// nothing wider than the screen, sorting without the table's headers, text that can be
// read, and a run's output opened at its end. Screenshots go to /tmp/serve-shots/phone.
const SHOTS = '/tmp/serve-shots/phone';
const PHONE = { width: 390, height: 844 };
const title = browserTitle('serve on a phone, in the dark');

// WCAG 2's contrast ratio of two computed colours (rgb() or rgba() with full alpha).
function contrast(a: string, b: string): number {
  const luminance = (css: string) => {
    const [r, g, b] = (css.match(/[\d.]+/g) ?? []).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    }) as [number, number, number];
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p) as [number, number];
  return (x + 0.05) / (y + 0.05);
}

const style = (l: Locator, property: string) => l.evaluate((e, p) => e.ownerDocument.defaultView?.getComputedStyle(e).getPropertyValue(p) ?? '', property);
// How wide the page lays out, against the screen's width.
const layoutWidth = (page: Page) => page.locator('html').evaluate((e) => e.scrollWidth);

describe.skipIf(!chromiumPresent)(title, () => {
  const browser = useChromium(SHOTS, { viewport: PHONE, colorScheme: 'dark' });

  it('a job page with fifty runs fits the screen, and its buttons read at 4.5:1', async () => {
    const box = storeBox('sqlite');
    await cronguard(['migrate'], box.env);
    const startedAt = new Date(Date.now() - 3_600_000);
    await box.insertRuns(Array.from({ length: 50 }, (_, i) => ({ job: 'nightly-backup', status: i % 7 === 3 ? 'failed' : 'succeeded', startedAt: new Date(startedAt.getTime() + i * 60_000), durationMs: 1000 + ((i * 37) % 11) * 400 })));
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.goto(`${server.url}/jobs/nightly-backup`);
    await page.screenshot({ path: `${SHOTS}/job.png` });
    expect(await layoutWidth(page)).toBeLessThanOrEqual(PHONE.width);
    // The sparkline shrinks to fit rather than widening the page.
    const spark = await page.locator('#summary svg.spark').boundingBox();
    expect(spark?.width).toBeGreaterThan(100);
    expect((spark?.x ?? 0) + (spark?.width ?? 0)).toBeLessThanOrEqual(PHONE.width);
    expect(spark?.height).toBe(24);
    for (const name of ['run', 'pause']) {
      const button = page.locator(`button[name="${name}"]`);
      expect(contrast(await style(button, 'color'), await style(button, 'background-color'))).toBeGreaterThanOrEqual(4.5);
    }
    await page.close();
  });

  it('the jobs page sorts on a phone, whose screen hides the table headers', async () => {
    const box = storeBox('sqlite');
    for (const name of ['alpha', 'bravo', 'charlie']) await cronguard(['-n', name, '--', 'true'], box.env);
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.goto(`${server.url}/`);
    expect(await page.locator('thead').isVisible()).toBe(false);
    expect(await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')))).toEqual(['alpha', 'bravo', 'charlie']);
    await page.selectOption('select[name="sort"]', '-name');
    await Promise.all([page.waitForURL(/sort=-name/), page.click('.filters button')]);
    expect(await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')))).toEqual(['charlie', 'bravo', 'alpha']);
    expect(await page.locator('select[name="sort"]').inputValue()).toBe('-name');
    expect(await layoutWidth(page)).toBeLessThanOrEqual(PHONE.width);
    await page.screenshot({ path: `${SHOTS}/jobs-sorted.png`, fullPage: true });
    // A page past the end (a bookmark, fewer jobs since) leads back to the last one.
    await page.goto(`${server.url}/?sort=-name&page=2`);
    await page.screenshot({ path: `${SHOTS}/jobs-past-end.png`, fullPage: true });
    expect(await page.locator('#jobs').textContent()).not.toMatch(/0–100|No jobs match/);
    await Promise.all([page.waitForURL(/page=1/), page.click('#jobs a[rel="prev"]')]);
    expect(await page.locator('tr[data-job]').count()).toBe(3);
    await page.close();
  });

  it("a run's long output opens at its end, in a box that stands out from the page", async () => {
    const box = storeBox('sqlite');
    await cronguard(['-n', 'long-report', '--', 'sh', '-c', 'seq 1 3000; printf "\\033[31merror: the disk is full\\033[0m\\n"; exit 1'], box.env);
    const server = await serve(['-q'], box.env);
    const page = await browser().newPage();
    await page.goto(`${server.url}/runs/1`);
    const output = page.locator('#output');
    const last = output.locator('span.fg1');
    expect(await last.textContent()).toBe('error: the disk is full');
    await expect.poll(() => output.evaluate((e) => e.scrollHeight - e.clientHeight - e.scrollTop)).toBeLessThanOrEqual(1);
    expect(await output.evaluate((e) => e.scrollHeight > 2 * e.clientHeight)).toBe(true);
    await output.scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${SHOTS}/run-output-end.png` });
    const [shown, inBox] = [await last.boundingBox(), await output.boundingBox()];
    expect(shown && inBox && shown.y >= inBox.y && shown.y + shown.height <= inBox.y + inBox.height).toBe(true);
    expect(await layoutWidth(page)).toBeLessThanOrEqual(PHONE.width);
    // The box's edge against the page at 3:1 (WCAG's for a component's boundary), its text at 4.5:1.
    const pageBg = await style(page.locator('body'), 'background-color');
    expect(await style(output, 'border-top-width')).toBe('1px');
    expect(contrast(await style(output, 'border-top-color'), pageBg)).toBeGreaterThanOrEqual(3);
    expect(contrast(await style(output, 'color'), await style(output, 'background-color'))).toBeGreaterThanOrEqual(4.5);
    await page.close();
  });

  it("a running job's output, picked up mid-character in red, goes on whole and in red, and the box stays at its end", async () => {
    const box = sandbox();
    const [more, end] = [box.path('more'), box.path('end')];
    const wait = (file: string) => `while [ ! -e '${file}' ]; do sleep 0.02; done`;
    // \342\202\254 is the euro sign: the page loads after its first two bytes.
    const script = `seq 1 2000; printf '\\033[31mred \\342\\202'; ${wait(more)}; printf '\\254 still red\\033[0m\\n'; ${wait(end)}`;
    const job = start(['-n', 'live-split', '--', 'sh', '-c', script], box.env);
    await waitFor(() => runsSoFar(box.stateDir).some((r) => r.status === 'running' && r.child_pid !== null), 'the job to start');
    const server = await serve(['-q'], box.env);
    await waitFor(async () => (await (await server.get('/runs/1')).text()).includes('<span class="fg1">red '), 'the live copy to hold the first bytes');
    const page = await browser().newPage();
    await page.goto(`${server.url}/runs/1`);
    const output = page.locator('#output');
    const fromEnd = () => output.evaluate((e) => e.scrollHeight - e.clientHeight - e.scrollTop);
    await expect.poll(fromEnd).toBeLessThanOrEqual(1);
    release(more);
    await expect.poll(() => output.locator('span.fg1').allTextContents()).toEqual(['red ', '€ still red']);
    expect(await output.textContent()).toMatch(/\n2000\nred € still red\n$/);
    expect(await fromEnd()).toBeLessThanOrEqual(1);
    await output.evaluate((e) => e.scrollIntoView({ block: 'end' }));
    await page.screenshot({ path: `${SHOTS}/run-live-split.png` });
    release(end);
    expect((await job.done).code).toBe(0);
    await page.close();
  });
});
