import { describe, expect, it } from 'vitest';
import { cronguard, inTerminal, sandbox } from '../helpers.js';

// Whatever the run log holds (an argument, who asked, a pause reason, a command line) reaches
// a terminal or a monitor with its control characters escaped.
const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

describe('text from the run log, shown', () => {
  it('escapes control characters in history, requests, status and check; check stays one line', async () => {
    const box = sandbox();
    const title = '\x1b]0;pwned\x07';
    expect((await cronguard(['-n', 'j', '--', 'sh', '-c', `true '${title}'`], box.env)).code).toBe(0);
    expect((await cronguard(['request', 'j', '--by', `web${title}`, '--', 'a\x1b[2Jb', 'two\nlines'], box.env)).code).toBe(0);
    expect((await cronguard(['disable', 'j', '--reason', 'db move | x=1;2;3\nsecond line'], box.env)).code).toBe(0);
    const history = await cronguard(['history'], box.env);
    expect(history.stdout).not.toMatch(RAW);
    expect(history.stdout).toContain('\\x1b]0;pwned\\x07');
    const requests = await cronguard(['requests'], box.env);
    expect(requests.stdout).not.toMatch(RAW);
    expect(requests.stdout).toContain('web\\x1b]0;pwned\\x07');
    expect(requests.stdout).toContain('a\\x1b[2Jb two\\nlines');
    for (const args of [['status'], ['status', 'j']]) expect((await cronguard(args, box.env)).stdout).not.toMatch(RAW);
    const check = await cronguard(['check', 'j', '--max-age', '1h'], box.env);
    expect(check.stdout).toMatch(/^OK - j is paused by \S+: db move \/ x=1;2;3\\nsecond line \(not checked; last succeeded [^|\n]*\) \| last_success_age=[^|\n]*\n$/);
  });
});

// What a person typing a wrong name is told.
describe('a name nothing has run under', () => {
  it('enable says there is no such job (1), or that it was not paused; request on a terminal warns, in a script it does not', async () => {
    const box = sandbox();
    expect((await cronguard(['-n', 'real', '--', 'true'], box.env)).code).toBe(0);
    expect(await cronguard(['enable', 'typo'], box.env)).toMatchObject({ code: 1, stderr: 'cronguard enable: no job typo in the run log; nothing to resume\n' });
    expect(await cronguard(['enable', 'real'], box.env)).toMatchObject({ code: 0, stderr: 'cronguard: real was not paused\n' });
    const typed = await inTerminal(['request', 'reel'], box.env);
    expect(typed.code).toBe(0);
    expect(typed.stdout).toMatch(/^\d+\ncronguard: no run of reel is in the run log yet; the request waits for one \(is the name right\?\)\n$/);
    expect(await cronguard(['request', 'reel2'], box.env)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\d+\n$/), stderr: '' });
    const right = await inTerminal(['request', 'real'], box.env);
    expect(right.stdout).toMatch(/^\d+\n$/);
  });
});
