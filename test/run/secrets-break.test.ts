import { statSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox } from '../helpers.js';

// Found by a breaker: ways a secret or a --redact pattern got past the masking.

describe('an env file', () => {
  it('never has its text quoted in a refusal, a malformed key included: it may be a piece of a secret', async () => {
    const box = sandbox();
    const ran = box.path('ran');
    const file = box.path('job.env');
    // The last line of a PEM key pasted without quotes: base64 with its '=' padding reads as
    // KEY=VALUE, and its key ('MIIEv+Q/...') is no variable name.
    const piece = 'MIIEvQIBADAN+BgkqhkiG9w0/BAQEFAASC';
    writeFileSync(file, `KEY=-----BEGIN PRIVATE KEY-----\n${piece}==\n`, { mode: 0o600 });
    const result = await cronguard(['--env-file', file, '-n', 't', '--', 'touch', ran], box.env);
    expect(result.stderr).toMatch(/^cronguard: .*job\.env:2: the key is not a variable name \(letters, digits and _, not starting with a digit\) \(see cronguard --help\)\n$/);
    expect(result.stderr).not.toContain('MIIEv');
    expect(result.code).toBe(64);
    expect(statSync(ran, { throwIfNoEntry: false })).toBeUndefined();
    expect(runs(box.stateDir)).toEqual([]);
  });
});

describe('the recorded command', () => {
  it("masks an env file's value that holds a ', which the command line's quoting writes as '\\''", async () => {
    const box = sandbox();
    const file = box.path('job.env');
    writeFileSync(file, `TOKEN="it'ssecret1"\n`, { mode: 0o600 });
    await cronguard(['--env-file', file, '-n', 'a', '--', 'echo', "it'ssecret1"], box.env);
    await cronguard(['--env-file', file, '-n', 'b', '-c', `echo "it'ssecret1"`], box.env);
    expect(runs(box.stateDir).map((r) => r.command)).toEqual(["echo '***'", `/bin/sh -c 'echo "***"'`]);
    const history = await cronguard(['history'], box.env);
    expect(history.stdout).not.toContain('ssecret1');
  });
});

describe('a line longer than the masker\'s 64 KiB piece', () => {
  it('is never cut inside an env file\'s value, nor a --redact match after a blank: both were passed on whole', async () => {
    const box = sandbox();
    const file = box.path('job.env');
    writeFileSync(file, 'TOKEN=tok-9f8e7d6c5b4a\n', { mode: 0o600 });
    // One line of 340 KB: the value again and again, then the match again and again, so
    // that wherever the reads and the 64 KiB mark cut it, a cut falls inside one.
    const command = `yes "$TOKEN" | head -n 20000 | tr '\\n' Z; yes pw=hunter22 | head -n 20000 | tr '\\n' ' '; echo`;
    const result = await cronguard(['--env-file', file, '--redact', 'pw=\\w+', '-n', 'long', '-c', command], box.env);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${'***Z'.repeat(20000)}${'*** '.repeat(20000)}\n`);
    for (const row of runs(box.stateDir)) expect(row.output).not.toMatch(/9f8e7d6c|hunter22/);
  });
});

describe('--redact on output a pattern backtracks on', () => {
  // 64 KiB pieces of one long line: a pattern that backtracks took seconds (quadratic: .*=)
  // or for ever (exponential: (a+)+c) on each, in the event loop: no --timeout could fire.
  it('masks in linear time: a nested quantifier or a leading .* cannot hang the wrapper', async () => {
    const box = sandbox();
    // 1 MiB of 'a' without a newline (16 pieces), then a line to mask.
    const command = "head -c 1048576 /dev/zero | tr '\\0' a; printf '\\nb=secret1\\n'";
    const result = await cronguard(['--redact', '(a+)+c', '--redact', '.*=\\w+', '-n', 'r', '-c', command], box.env);
    expect(result.code).toBe(0);
    expect(result.stdout.endsWith('\n***\n')).toBe(true);
    expect(result.stdout.length).toBe(1048576 + 5);
    expect(runs(box.stateDir)[0]?.status).toBe('succeeded');
  });

  it('refuses a pattern of the shapes that backtrack exponentially that the linear engine cannot run', async () => {
    const box = sandbox();
    const ran = box.path('ran');
    for (const pattern of ['(a+)+\\1', '(?<=x)(\\w+)*y', '(?:a|ab){2,}(?=c)']) {
      const result = await cronguard(['--redact', pattern, '--', 'touch', ran], box.env);
      expect(result.stderr).toMatch(/^cronguard: --redact: '.*' could take exponential time on a long line \(a back-reference, or a repeated group holding a quantifier or '\|', with a lookaround or a repeat count over 16\); rewrite it without that \(see cronguard --help\)\n$/);
      expect(result.code).toBe(64);
    }
    expect(statSync(ran, { throwIfNoEntry: false })).toBeUndefined();
    // The engine's flag is set only by --redact (a V8 flag makes V8 reject code caches made
    // without it): a run without it keeps the whole cache, one with it still runs.
    const cached = await cronguard(['-v', '-n', 'c', '--', 'true'], box.env);
    expect(cached.stderr).toMatch(/code cache: \d+ files compiled from it, 0 rejected by V8/);
    expect((await cronguard(['-v', '--redact', 'pw=\\w+', '-n', 'c', '-c', 'echo pw=x1'], box.env)).stdout).toBe('***\n');
    // Lookarounds and long counted repeats alone are fine: they cannot blow up.
    const fine = await cronguard(['--redact', '(?<=token=)\\S+', '--redact', 'ghp_[A-Za-z0-9]{36}', '-n', 'f', '-c', `echo token=abc ghp_${'x'.repeat(36)}`], box.env);
    expect(fine).toMatchObject({ code: 0, stdout: 'token=*** ***\n' });
  });
});

describe('--fail-on-stderr with --env-file', () => {
  it('takes PS4 from the env file, as the command gets it: its trace lines are not stderr', async () => {
    const box = sandbox();
    const file = box.path('job.env');
    writeFileSync(file, "PS4='>> '\n", { mode: 0o600 });
    const traced = await cronguard(['--env-file', file, '--fail-on-stderr', '-n', 'x', '--', 'dash', '-xc', 'echo hi'], box.env);
    expect(traced).toMatchObject({ code: 0, stdout: 'hi\n', stderr: '>> echo hi\n' });
    // cronguard's own PS4 is the command's no longer: a line of it is stderr like any other.
    const other = await cronguard(['--env-file', file, '--fail-on-stderr', '-n', 'y', '--', 'sh', '-c', 'echo "+ not a trace" >&2'], { ...box.env, PS4: '+ ' });
    expect(other.code).toBe(1);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'failed']);
  });
});
