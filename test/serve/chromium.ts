import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';

// Debian's chromium (from apt, as .ci/run installs it) driven by playwright-core, which
// downloads no browser. Where it is absent the browser tests skip and their title says why.
export const CHROMIUM = '/usr/bin/chromium';
export const chromiumPresent = existsSync(CHROMIUM);

export function browserTitle(what: string): string {
  return chromiumPresent ? what : `${what} (skipped: ${CHROMIUM} is absent; apt-get install -y chromium)`;
}

type Options = Omit<NonNullable<Parameters<typeof chromium.launchPersistentContext>[1]>, 'executablePath' | 'headless' | 'args'>;

// One headless browser with a fresh profile for the tests of the enclosing describe block,
// closed and removed after them. Screenshots go to `shots`, for a person to look at.
export function useChromium(shots: string, options: Options = {}): () => BrowserContext {
  let browser: BrowserContext | undefined;
  let profile: string | undefined;
  beforeAll(async () => {
    profile = mkdtempSync(join(tmpdir(), 'cronguard-chromium-'));
    mkdirSync(shots, { recursive: true });
    browser = await chromium.launchPersistentContext(profile, {
      ...options,
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });
  return () => {
    if (!browser) throw new Error('chromium did not start');
    return browser;
  };
}
