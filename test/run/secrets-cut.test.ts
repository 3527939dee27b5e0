import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// A value is masked before cronguard cuts, escapes or quotes the text that holds it: an
// escaped '"', '\' or tab, or a secret cut in two at the 120th character, no longer matches
// the mask and went out in part or whole (issue 35, items 1 and 3).

// The env file's secrets: one with a quote and a backslash (Qp7"Hidden\Value99), one with
// tabs, and one that the 120-character cut of the stderr line falls inside.
const STRADDLING = 'Zq9SuperSecretStraddle';
const ENV = `QUOTED="Qp7\\"Hidden\\\\Value99"\nTABBED="Tab\\tSecret\\tValue77"\nSTRADDLING=${STRADDLING}\n`;
// What no text may hold: each secret, and each of its parts longer than three characters as
// escaping would write them.
const LEAKS = [/Qp7/, /Hidden/, /Value99/, /Secret\\t|Tab\\tSecret|Value77/, /Zq9/, /SuperSecret/, /Straddle/];

describe.each(STORES)('--fail-on-stderr masks the line it records before cutting or escaping it (%s)', (kind) => {
  it.each([
    ['a quote and a backslash', `echo "connect failed: $QUOTED" >&2`],
    ['a tab', `printf 'token %s rejected\\n' "$TABBED" >&2`],
    ['the 120-character cut', `printf '%s%s tail\\n' "$(printf 'x%.0s' $(seq 1 110))" "$STRADDLING" >&2`],
  ])('a secret holding %s reaches neither the run log nor cron mail', async (_what, script) => {
    const box = storeBox(kind);
    const job = box.job('stderr');
    const file = box.path('job.env');
    writeFileSync(file, ENV, { mode: 0o600 });
    const result = await cronguard(['--env-file', file, '-n', job, '--fail-on-stderr', '-c', script], box.env);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/wrote to stderr: .*\*\*\*/);
    const [row] = await box.runs();
    expect(row?.error).toMatch(/^wrote to stderr: .*\*\*\*/);
    const history = await cronguard(['history', job, '--json'], box.env);
    expect(history.code).toBe(0);
    for (const leak of LEAKS) {
      expect(result.stderr).not.toMatch(leak);
      expect(row?.error ?? '').not.toMatch(leak);
      expect(history.stdout).not.toMatch(leak);
    }
  });
});
