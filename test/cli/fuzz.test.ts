import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveRunConfig } from '../../src/cli/config.js';
import { FLEET } from '../../src/cli/fleet.js';
import { parseRunArgs, RUN_OPTIONS } from '../../src/cli/options.js';
import { Settings } from '../../src/cli/settings.js';
import { CronguardError } from '../../src/errors.js';
import { cronguard, sandbox } from '../helpers.js';

// Values a hostile or careless caller might pass, by the kind of argument they attack.
const GENERIC = ['', ' ', '-', '--', '\n', '\t', "'", '"', '*', '%', '%zz', 'x'.repeat(5000), '\u202e', '１', '$(touch /tmp/cronguard-fuzz-pwned)'];
const NUMBERS = ['0', '-1', '1.5', '1e400', '0x10', 'NaN', 'Infinity', '9223372036854775807', '99999999999999999999999999', '0.4ms', '1h-1s', '255', '256'];
const PATHS = ['../../../etc/passwd', '/dev/null', '/proc/self', '/proc/self/fd/0', '/', '.', 'relative/dir'];
const URLS = [
  'postgres://', 'postgres://u:p@127.0.0.1:9/d?port=abc', 'postgres:///d?host=/nonexistent', 'postgres://[::1',
  'postgres://127.0.0.1:9/d?sslmode=verify-full&sslrootcert=/nonexistent', 'postgres://127.0.0.1:9/d?sslcert=/proc',
];
const WORDS = ['pg_temp', 'information_schema', 'SELECT 1; DROP TABLE x', 'KILL', 'SIGSEGV', 'ß'];
const ALL = [...GENERIC, ...NUMBERS, ...PATHS, ...URLS, ...WORDS];

// The one thing no input may do: reach the internal-error path (70) or print a stack.
function expectHandled(result: { code: number | null; stderr: string }, args: string[]) {
  expect.soft(result.code, JSON.stringify(args)).not.toBe(70);
  expect.soft(result.code, JSON.stringify(args)).not.toBeNull();
  expect.soft(result.stderr, JSON.stringify(args)).not.toMatch(/\n\s+at \S+ \(|internal error/);
}

// Accepted values whose real effect a test must not have: a random wait of minutes, a
// metrics file written into a system directory.
function sideEffect(long: string, value: string): boolean {
  if (long === 'jitter') return !/^(0|1|1\.5|0\.4ms)$/.test(value);
  return long === 'metrics-dir' && value.startsWith('/');
}

// Any connection the fuzz makes is refused at once: nothing here may reach a real server.
const offline = (env: NodeJS.ProcessEnv) => ({ ...env, PGHOST: '127.0.0.1', PGPORT: '9', PGUSER: 'nobody' });

// Resolves a run's options as main does; null when they are accepted, else the error.
function resolveError(args: string[]): unknown {
  try {
    const env = { HOME: '/nonexistent', CRONGUARD_CONFIG: '' };
    resolveRunConfig(parseRunArgs(args), { env, root: false, settings: Settings.load(env, '/nonexistent'), fleet: FLEET });
    return null;
  } catch (error) {
    return error;
  }
}

describe('no input reaches the internal-error path', () => {
  it('run options: every hostile value is resolved or refused with a typed error', () => {
    for (const option of RUN_OPTIONS.filter((o) => o.value)) {
      for (const value of ALL) {
        const error = resolveError([`--${option.long}`, value, '-n', 'fuzz', '--', 'true']);
        expect.soft(error === null || error instanceof CronguardError, `--${option.long} ${JSON.stringify(value)}: ${error}`).toBe(true);
      }
    }
  });

  it.each(RUN_OPTIONS.filter((o) => o.value).map((o) => [o.long]))('--%s: the values that reach the run, and a refused sample, end to end', async (long) => {
    const box = sandbox();
    const env = offline(box.env);
    const accepted = ALL.filter((value) => resolveError([`--${long}`, value, '-n', 'fuzz', '--', 'true']) === null).filter((value) => !sideEffect(long, value));
    const refused = ALL.filter((value) => !accepted.includes(value)).slice(0, 2);
    await Promise.all(
      [...accepted, ...refused].map(async (value) => {
        const args = [`--${long}`, value, '-n', 'fuzz', '-w', '0', '--', 'true'];
        expectHandled(await cronguard(args, env), args);
      }),
    );
    expect(existsSync('/tmp/cronguard-fuzz-pwned')).toBe(false);
  });

  it.each([
    ['history', (v: string) => [[v], ['--status', v]], [...GENERIC, ...WORDS]],
    ['history', (v: string) => [['--limit', v]], NUMBERS],
    ['logs', (v: string) => [[v]], [...GENERIC, ...NUMBERS, ...WORDS]],
    ['history', (v: string) => [['--db', v], ['--schema', v]], [...URLS, ...WORDS, ...GENERIC.slice(0, 6)]],
    ['migrate', (v: string) => [['--db', v], ['--schema', v]], [...URLS, ...WORDS]],
    ['history', (v: string) => [['--state-dir', v]], [...PATHS, ...GENERIC.slice(0, 6)]],
    ['locks', (v: string) => [['--lock-dir', v], ['--state-dir', v]], [...PATHS, ...GENERIC.slice(0, 6)]],
    ['help', (v: string) => [[v]], [...GENERIC, ...WORDS]],
    ['history', (v: string) => [['--since', v], ['--host', v], ['seed', v]], [...GENERIC, ...NUMBERS, ...WORDS]],
    ['status', (v: string) => [[v]], [...GENERIC, ...NUMBERS, ...WORDS]],
    ['check', (v: string) => [[v, '--max-age', '1d'], ['seed', '--max-age', v], ['seed', '--max-age', '1d', '--warn-age', v]], [...GENERIC, ...NUMBERS, ...WORDS]],
    ['prune', (v: string) => [['--older-than', v], ['--older-than', '3650d', '--keep', v]], [...GENERIC, ...NUMBERS]],
    ['metrics', (v: string) => [[v], ['--state-dir', v]], [...GENERIC.slice(0, 6), ...PATHS]],
  ] as const)('%s with hostile arguments', async (subcommand, variants, values) => {
    const box = sandbox();
    await cronguard(['-n', 'seed', '--', 'true'], box.env);
    const env = offline(box.env);
    await Promise.all(
      values.flatMap((value) =>
        variants(value).map(async (rest) => {
          const args = [subcommand, ...rest];
          expectHandled(await cronguard(args, env), args);
        }),
      ),
    );
  });
});
