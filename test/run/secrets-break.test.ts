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
