import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { type StoreKind, storeBox } from '../stores.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

// The jobs page as someone on call looks at it (issue 36, item 14): how many jobs fail, at
// the top and in the browser tab's title; on a 390 px phone, the failing jobs first and cards
// small enough that a screen shows six or more; the desktop table as it was. Screenshots go
// to SHOTS, for a person to look at.
const SHOTS = process.env.CRONGUARD_SHOTS ?? '/tmp/serve-shots/failing';
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };
// Six fit on one phone screen, beside the header, filters and count: at most this tall.
const CARD_PX = 110;

const JOBS = ['alpha-sync', 'bravo-report', 'charlie-backup', 'delta-import', 'echo-prune', 'foxtrot-mail', 'golf-index', 'hotel-export'];
const FAILING = ['charlie-backup', 'golf-index'];

async function fleet(kind: StoreKind) {
  const box = storeBox(kind);
  await cronguard(['migrate'], box.env);
  const at = Date.now() - 3_600_000;
  await box.insertRuns(JOBS.flatMap((job, j) => Array.from({ length: 6 }, (_, i) => ({
    job: box.job(job),
    status: FAILING.includes(job) && i === 5 ? 'failed' : 'succeeded',
    startedAt: new Date(at + (j * 6 + i) * 30_000),
    durationMs: 800 + ((i * 37 + j * 11) % 9) * 300,
  }))));
  return box;
}

describe.skipIf(!chromiumPresent)(browserTitle('the failing jobs of the jobs page'), () => {
  describe('on a phone', () => {
    const browser = useChromium(SHOTS, { viewport: PHONE, colorScheme: 'dark' });
    it.each(['sqlite', 'postgres'] as const)('counts them at the top and in the title, lists them first, in small cards (%s)', async (kind) => {
      const box = await fleet(kind);
      const server = await serve(['-q'], box.env);
      const page = await browser().newPage();
      await page.goto(`${server.url}/`);
      await page.screenshot({ path: `${SHOTS}/phone-${kind}.png` });
      await page.screenshot({ path: `${SHOTS}/phone-${kind}-full.png`, fullPage: true });
      expect(await page.title()).toBe('(2 failing) Jobs · cronguard');
      const count = page.locator('#failing-count');
      expect((await count.textContent())?.trim()).toBe('2 failing');
      expect(await count.getAttribute('href')).toBe('/?state=failing');
      const rows = page.locator('tr[data-job]');
      const shown = await rows.evaluateAll((all) =>
        all.map((r) => ({ job: r.getAttribute('data-job'), top: r.getBoundingClientRect().top, height: r.getBoundingClientRect().height })).sort((a, b) => a.top - b.top),
      );
      expect(shown.slice(0, 2).map((r) => r.job)).toEqual(FAILING.map((j) => box.job(j)));
      for (const r of shown) expect(r.height, r.job ?? '').toBeLessThanOrEqual(CARD_PX);
      expect(shown.filter((r) => r.top + r.height <= PHONE.height).length).toBeGreaterThanOrEqual(6);
      await page.close();
    });
  });

  describe('on a desktop', () => {
    const browser = useChromium(SHOTS, { viewport: DESKTOP });
    it('counts them at the top and keeps the table in name order', async () => {
      const box = await fleet('sqlite');
      const server = await serve(['-q'], box.env);
      const page = await browser().newPage();
      await page.goto(`${server.url}/`);
      await page.screenshot({ path: `${SHOTS}/desktop.png`, fullPage: true });
      expect(await page.title()).toBe('(2 failing) Jobs · cronguard');
      expect(await page.locator('#failing-count').isVisible()).toBe(true);
      expect(await page.locator('thead').isVisible()).toBe(true);
      const order = await page.locator('tr[data-job]').evaluateAll((all) => all.map((r) => r.getAttribute('data-job')));
      expect(order).toEqual([...order].sort());
      await page.close();
    });
  });
});
