import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RUN_OPTIONS } from '../../src/cli/options.js';
import { cronguard, sandbox } from '../helpers.js';

// Values a hostile or careless caller might pass to any option or argument.
const HOSTILE = [
  '', ' ', '-', '--', '0', '-1', '1.5', '1e400', '0x10', 'NaN', 'Infinity', '9223372036854775807',
  '99999999999999999999999999', '0.4ms', '1h-1s', '１', 'ß', '\u202e', '../../../etc/passwd', '/dev/null', '/proc/self',
  '/proc/self/fd/0', 'x'.repeat(5000), '%', '%zz', '$(touch /tmp/cronguard-fuzz-pwned)', "'", '"', '\n', '\t', '*',
  'postgres://', 'postgres://u:p@127.0.0.1:9/d?port=abc', 'postgres:///d?host=/nonexistent', 'postgres://[::1',
  'postgres://127.0.0.1:9/d?sslmode=verify-full&sslrootcert=/nonexistent', 'postgres://127.0.0.1:9/d?sslcert=/proc',
  'pg_temp', 'information_schema', 'SELECT 1; DROP TABLE x', 'KILL', 'SIGSEGV', '0', '255', '256',
];

// The one thing no input may do: reach the internal-error path (70) or print a stack.
function expectHandled(result: { code: number | null; stderr: string }, args: string[]) {
  expect.soft(result.code, JSON.stringify(args)).not.toBe(70);
  expect.soft(result.code, JSON.stringify(args)).not.toBeNull();
  expect.soft(result.stderr, JSON.stringify(args)).not.toMatch(/\n\s+at \S+ \(|internal error/);
}

// Any connection the fuzz makes is refused at once: nothing here may reach a real server.
const offline = (env: NodeJS.ProcessEnv) => ({ ...env, PGHOST: '127.0.0.1', PGPORT: '9', PGUSER: 'nobody' });

describe('no input reaches the internal-error path', () => {
  it.each(RUN_OPTIONS.filter((o) => o.value).map((o) => [o.long]))('--%s with hostile values', async (long) => {
    const box = sandbox();
    const env = offline(box.env);
    await Promise.all(
      HOSTILE.map(async (value) => {
        const args = [`--${long}`, value, '-n', 'fuzz', '-w', '0', '--', 'true'];
        expectHandled(await cronguard(args, env), args);
      }),
    );
    expect(existsSync('/tmp/cronguard-fuzz-pwned')).toBe(false);
  });

  it.each([
    ['history', (v: string) => [[v], ['--limit', v], ['--status', v], ['--db', v], ['--schema', v], ['--state-dir', v]]],
    ['logs', (v: string) => [[v], ['--db', v, '1'], ['--state-dir', v, 'x']]],
    ['locks', (v: string) => [['--lock-dir', v], ['--db', v], ['--schema', v]]],
    ['migrate', (v: string) => [['--db', v], ['--schema', v], ['--state-dir', v]]],
    ['help', (v: string) => [[v]]],
  ] as const)('%s with hostile arguments', async (subcommand, variants) => {
    const box = sandbox();
    await cronguard(['-n', 'seed', '--', 'true'], box.env);
    const env = offline(box.env);
    for (const value of HOSTILE) {
      await Promise.all(
        variants(value).map(async (rest) => {
          const args = [subcommand, ...rest];
          expectHandled(await cronguard(args, env), args);
        }),
      );
    }
  });
});
