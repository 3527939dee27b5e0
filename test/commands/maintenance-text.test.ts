import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { storeBox } from '../stores.js';

// A pause's reason and `--by` are anyone's text (a web form, a script's variable), and the
// lines a run writes about the pause go to a terminal or cron's mail (found by a breaker):
// an escape sequence in them recoloured or cleared the operator's terminal, and a newline
// split the one line in two. They are shown escaped, as status, check and the page do.
describe('maintenance: a reason with control characters', () => {
  const reason = 'db \x1b[31mupgrade\x1b]0;owned\x07\nsecond line';
  const shown = 'db \\x1b[31mupgrade\\x1b]0;owned\\x07\\nsecond line';

  it.each([
    ['its own pause', (job: string) => ['disable', job, '--reason', reason, '--by', 'ops\x1b[2J']],
    ['the fleet\'s pause', () => ['disable', '--all', '--reason', reason, '--by', 'ops\x1b[2J']],
  ])('a paused run says it on one line, escaped (%s)', async (_, pause) => {
    const box = storeBox('sqlite');
    const job = box.job('text');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect((await cronguard(pause(job), box.env)).code).toBe(0);
    const skipped = await cronguard(['-v', '-n', job, '--', 'true'], box.env);
    expect(skipped.code).toBe(0);
    const line = skipped.stderr.split('\n').find((l) => l.includes(' paused '));
    expect(line).toContain(`by ops\\x1b[2J: ${shown} (cronguard enable `);
    expect(skipped.stderr).not.toContain('\x1b');
  });
});
