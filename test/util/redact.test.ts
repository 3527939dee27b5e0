import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { addSecretsOf, redact } from '../../src/util/redact.js';
import { cronguard, sandbox } from '../helpers.js';

// Passwords with every character that breaks a URL, in every way a URL can be malformed.
const PASSWORDS = ['S3cret/PW', 'S3cret?PW', 'p@ss:w0rd', 'Hash#Tag99', 'per%cent%zz', 'wi7h spac3'];
const urls = (pw: string) => [
  `postgres://cron:${pw}@127.0.0.1:9/ops`,
  `postgres:/cron:${pw}@127.0.0.1:9/ops`,
  `postgresql://cron:${pw}@[bad/ops`,
  `postgres://127.0.0.1:9/ops?password=${pw}`,
  `postgres://[::1/ops?password=${pw}&port=x`,
  `mysql://cron:${pw}@db/ops`,
];
// Any piece of the password that could identify it.
const pieces = (pw: string) => pw.split(/[/?#:@% ]/).filter((p) => p.length >= 4);

describe('redaction', () => {
  it('hides the registered password and URL-shaped credentials', () => {
    addSecretsOf('postgres://u:hunter2hunter@h/d');
    expect(redact('login failed for hunter2hunter at postgres://x:other@h')).toBe('login failed for *** at postgres://x:***@h');
  });

  it.each(PASSWORDS)('never prints the password %j, however the URL is malformed (--db, variable, file)', async (pw) => {
    const box = sandbox();
    const file = box.path('conf');
    for (const url of urls(pw)) {
      writeFileSync(file, `database_url = ${url}\n`, { mode: 0o600 });
      const results = await Promise.all([
        cronguard(['--db', url, '-n', 'x', '--', 'true'], box.env),
        cronguard(['-n', 'x', '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: url }),
        cronguard(['-v', '-n', 'x', '--', 'true'], { ...box.env, CRONGUARD_CONFIG: file }),
        cronguard(['history', '--db', url], box.env),
      ]);
      for (const result of results) {
        expect.soft(result.code, url).not.toBe(0);
        for (const piece of pieces(pw)) expect.soft(result.stderr + result.stdout, url).not.toContain(piece);
      }
    }
  });

  it('does not echo a malformed configuration line that holds a password', async () => {
    const box = sandbox();
    const file = box.path('conf');
    writeFileSync(file, 'database_url: postgres://u:Sup3rSecret@h/db\n', { mode: 0o600 });
    const result = await cronguard(['-n', 'x', '--', 'true'], { ...box.env, CRONGUARD_CONFIG: file });
    expect(result.code).toBe(64);
    expect(result.stderr).not.toContain('Sup3rSecret');
  });
});
