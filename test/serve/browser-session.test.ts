import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { browserTitle, chromiumPresent, useChromium } from './chromium.js';
import { serve } from './serve-helpers.js';

// The cookies as a real browser treats them (SameSite), in Debian's chromium. Screenshots
// go to /tmp/serve-shots-session for a person to look at.
const SHOTS = '/tmp/serve-shots-session';
const TOKEN = 'a-token-for-the-browser-0123456789';
const title = browserTitle('serve sessions in a browser');

describe.skipIf(!chromiumPresent)(title, () => {
  let other: Server;
  const browser = useChromium(SHOTS);
  afterAll(() => {
    other?.close();
  });

  it('a link from another site opens the page logged in, and the forms of tabs already open still work', async () => {
    const box = sandbox();
    await cronguard(['-n', 'linked', '--', 'true'], box.env);
    writeFileSync(box.path('token'), TOKEN, { mode: 0o600 });
    const server = await serve(['--token-file', box.path('token')], box.env);
    // The page as its users open it (localhost), and another site (127.0.0.1 is another
    // site to a browser) with a link to it, as a chat message or a ticket would have.
    const job = `${server.url.replace('127.0.0.1', 'localhost')}/jobs/linked`;
    other = createServer((_, response) => response.end(`<!doctype html><a id="go" href="${job}">the job</a>`)).listen(0, '127.0.0.1');
    await new Promise((resolve) => other.once('listening', resolve));
    const elsewhere = `http://127.0.0.1:${(other.address() as { port: number }).port}/`;

    const open = await browser().newPage();
    await open.goto(job);
    await open.fill('input[name="token"]', TOKEN);
    await Promise.all([open.waitForURL(job), open.click('button[type="submit"]')]);
    expect(await open.locator('h1.name').textContent()).toBe('linked');

    const second = await browser().newPage();
    await second.goto(elsewhere);
    await Promise.all([second.waitForURL(job), second.click('#go')]);
    expect(await second.locator('h1.name').textContent()).toBe('linked');
    await second.screenshot({ path: `${SHOTS}/followed-link.png`, fullPage: true });

    await open.fill('input[name="reason"]', 'from the first tab');
    await Promise.all([open.waitForURL(/\?paused=1$/), open.click('button[name="pause"]')]);
    expect(await open.locator('#summary .reason').textContent()).toBe('from the first tab');
    await open.screenshot({ path: `${SHOTS}/paused-from-first-tab.png`, fullPage: true });

    await Promise.all([open.waitForURL(/\/logout$/), open.click('a[href="/logout"]')]);
    await Promise.all([open.waitForURL(/\/login$/), open.click('button[type="submit"]')]);
    await open.goto(job);
    expect(open.url()).toMatch(/\/login\?next=/);
  });
});
