import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { serve } from '../serve/serve-helpers.js';
import { STORES, storeBox } from '../stores.js';

const SECRET = 'tok-1a2b3c4d5e6f';

// The shared logs record what the embedded one does: masked output and command, or no
// command at all (see secrets.test.ts for every place a secret could show).
describe.each(STORES)('secrets in the run log (%s)', (kind) => {
  it('an env-file secret and a --redact match are masked in the rows and every reader; --record-command off records none', async () => {
    const box = storeBox(kind);
    const job = box.job('secret');
    const file = box.path('job.env');
    writeFileSync(file, `TOKEN=${SECRET}\n`, { mode: 0o600 });
    const ran = await cronguard(['--env-file', file, '--redact', 'pin=\\d+', '-n', job, '-c', 'echo "token=$TOKEN pin=918273645"; exit 2 # pin=918273645'], box.env);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('token=*** ***\n');
    const hidden = box.job('hidden');
    expect((await cronguard(['--record-command', 'off', '-n', hidden, '--', 'true', 'argv-marker-31337'], box.env)).code).toBe(0);
    const rows = await box.runs();
    expect(rows.find((r) => r.job === job)).toMatchObject({ output: 'token=*** ***\n', command: `/bin/sh -c 'echo "token=$TOKEN ***"; exit 2 # ***'` });
    expect(rows.find((r) => r.job === hidden)).toMatchObject({ command: '(command not recorded)' });
    const server = await serve(['-q'], box.env);
    const texts = [
      JSON.stringify(rows.map((r) => ({ ...r, output: null }))),
      (await cronguard(['history', '--json'], box.env)).stdout,
      (await cronguard(['status', '--json'], box.env)).stdout,
      (await cronguard(['logs', job], box.env)).stdout,
      await (await server.get('/api/jobs')).text(),
      await (await server.get(`/jobs/${job}`)).text(),
      await (await server.get(`/jobs/${hidden}`)).text(),
    ];
    for (const text of texts) {
      expect(text).not.toContain(SECRET);
      // Digits long enough that no pid, port or id holds them by chance (4321 did, once).
      expect(text).not.toContain('918273645');
      expect(text).not.toContain('argv-marker-31337');
    }
    expect(texts[2]).toContain('(command not recorded)');
  });
});
