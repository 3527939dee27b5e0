import { describe, expect, it } from 'vitest';
import { type Context, resolveRunConfig } from '../../src/cli/config.js';
import { FLEET } from '../../src/cli/fleet.js';
import { parseRunArgs } from '../../src/cli/options.js';
import { Settings } from '../../src/cli/settings.js';
import { UsageError } from '../../src/errors.js';

const contextOf = (env: Record<string, string>, root: boolean): Context => ({ env, root, settings: Settings.load(env), fleet: FLEET });
const ctx = contextOf({ HOME: '/home/u' }, false);
const resolve = (args: string[], context = ctx) => resolveRunConfig(parseRunArgs(args), context);

describe('parseRunArgs', () => {
  it('stops at the first word that is not an option', () => {
    const parsed = parseRunArgs(['-n', 'x', 'ls', '-n', '--help']);
    expect(parsed.options).toEqual({ name: 'x' });
    expect(parsed.command).toEqual(['ls', '-n', '--help']);
  });

  it('takes everything after -- as the command', () => {
    expect(parseRunArgs(['-q', '--', '-weird', 'a']).command).toEqual(['-weird', 'a']);
  });

  it('accepts --opt=value, -oVALUE and clustered flags', () => {
    const parsed = parseRunArgs(['--name=a', '-t5m', '-qv', '-E3', 'true']);
    expect(parsed.options).toEqual({ name: 'a', timeout: '5m', quiet: true, verbose: true, conflictExitCode: '3' });
  });

  it.each([
    [['--nope', 'true'], /unknown option '--nope'/],
    [['-Z', 'true'], /unknown option '-Z'/],
    [['-n'], /option -n needs a value/],
    [['--quiet=yes', 'true'], /--quiet takes no value/],
    [['--every-minute', 'true'], /unknown option '--every-minute'/],
  ])('rejects %j', (args, message) => {
    expect(() => parseRunArgs(args)).toThrow(message);
  });
});

describe('resolveRunConfig', () => {
  it('resolves the defaults of the contract', () => {
    const config = resolve(['-n', 'backup', '--', 'backup.sh']);
    expect(config).toMatchObject({
      name: 'backup',
      lock: { kind: 'flock', path: '/home/u/.cache/cronguard/locks/backup.lock', dir: { isDefault: true } },
      stateDir: '/home/u/.local/state/cronguard',
      waitMs: 0,
      conflictExitCode: 0,
      timeoutMs: null,
      killSignal: 'SIGTERM',
      killAfterMs: 10_000,
      quiet: false,
      captureBytes: 65536,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('puts flags over environment over defaults', () => {
    const env = { HOME: '/h', XDG_RUNTIME_DIR: '/run/user/1', CRONGUARD_STATE_DIR: '/env/state' };
    expect(resolve(['true'], contextOf(env, false))).toMatchObject({
      lock: { dir: { path: '/run/user/1/cronguard' } },
      stateDir: '/env/state',
    });
    expect(resolve(['--state-dir', '/flag', '--lock-dir', '/l', 'true'], contextOf(env, false))).toMatchObject({
      lock: { dir: { path: '/l', isDefault: false } },
      stateDir: '/flag',
    });
    expect(resolve(['true'], contextOf({ CRONGUARD_LOCK_DIR: '/e' }, true))).toMatchObject({ lock: { dir: { path: '/e' } } });
  });

  it('uses system locations for root', () => {
    expect(resolve(['-n', 'j', 'true'], contextOf({}, true))).toMatchObject({
      lock: { path: '/run/lock/cronguard/j.lock', dir: { isDefault: true }, byHand: false },
      stateDir: '/var/lib/cronguard',
    });
    // A lock named by hand may be shared with other jobs (see src/run/loop/due.ts).
    expect(resolve(['-n', 'j', '--lock-file', '/l/db.lock', 'true'], contextOf({}, true))).toMatchObject({ lock: { byHand: true } });
  });

  it('runs -c through /bin/sh and derives the name from that argv', () => {
    const config = resolve(['-c', 'echo "hi" | wc -c']);
    expect(config.argv).toEqual(['/bin/sh', '-c', 'echo "hi" | wc -c']);
    expect(config.display).toBe(`/bin/sh -c 'echo "hi" | wc -c'`);
    expect(config.name).toMatch(/^sh-[0-9a-f]{8}$/);
  });

  it('parses signals, sizes and --no-log', () => {
    expect(resolve(['--kill-signal', 'int', '--capture', '1k', '--no-log', 'true'])).toMatchObject({
      killSignal: 'SIGINT',
      captureBytes: 1024,
      log: { kind: 'none' },
    });
    expect(resolve(['--kill-signal', '9', 'true']).killSignal).toBe('SIGKILL');
    expect(resolve(['-t', '0', 'true']).timeoutMs).toBeNull();
  });

  it('resolves --ping-url: no pings by default; the URL normalised, its query kept, its fragment dropped', () => {
    expect(resolve(['true']).ping).toBeNull();
    expect(resolve(['--ping-url', 'HTTPS://hc-ping.com/abc?x=1#frag', 'true']).ping).toEqual({
      url: 'https://hc-ping.com/abc?x=1',
      exitCode: false,
      bodyBytes: 10240,
    });
    expect(resolve(['--ping-url=http://h', '--ping-exit-code', '--ping-body-bytes', '64k', 'true']).ping).toEqual({
      url: 'http://h/',
      exitCode: true,
      bodyBytes: 65536,
    });
  });

  it.each([
    [['-n', 'x'], /no command given/],
    [[], /no command given/],
    [['-c', 'echo', 'extra'], /one shell string/],
    [['-c', ''], /non-empty shell string/],
    [['-t', '5x', 'true'], /--timeout: invalid duration '5x'/],
    [['-t', '-1', 'true'], /--timeout: invalid duration '-1'/],
    [['-w', 'soon', 'true'], /--wait: invalid duration/],
    [['--kill-after', '1y', 'true'], /--kill-after: invalid duration/],
    [['-E', '300', 'true'], /not an exit code \(0-255\)/],
    [['-E', '-1', 'true'], /not an exit code/],
    [['-l', 'valkey', 'true'], /unknown lock backend 'valkey'/],
    [['-l', 'redis', 'true'], /^-l redis needs a lock URL: give --lock-url/],
    [['-l', 'postgres', 'true'], /needs a database/],
    [['-l', 'none', '--lock-file', '/tmp/x', 'true'], /--lock-file names a file for flock to lock; it cannot go with -l none/],
    [['--lock-file', '', 'true'], /--lock-file needs a path/],
    [['--lock-key', '1', 'true'], /--lock-key applies to the postgres lock backend only/],
    [['--kill-signal', 'NOPE', 'true'], /unknown signal 'NOPE'/],
    [['--capture', 'lots', 'true'], /--capture: 'lots'/],
    [['--capture', '65M', 'true'], /--capture: '65M'/],
    [['-n', '../../etc/x', 'true'], /invalid job name/],
    [['-n', 'x'.repeat(10_240), 'true'], /the limit is 100/],
    [['--ping-url', 'ftp://h/x', 'true'], /--ping-url: 'ftp:\/\/h\/x' is not an http:\/\/ or https:\/\/ URL/],
    [['--ping-url', 'http:h', 'true'], /is not an http:\/\/ or https:\/\/ URL with a host/],
    [['--ping-url', 'http://h/x\ny', 'true'], /--ping-url: 'http:\/\/h\/x\?y' contains spaces or control characters/],
    [['--ping-url', 'http://h:99999/', 'true'], /is not a valid URL/],
    [['--ping-url', 'http://h/x?a=1&rid=2', 'true'], /has a rid parameter of its own/],
    [['--ping-url', 'http://h', '--ping-body-bytes', '2M', 'true'], /--ping-body-bytes: '2M' is not a byte count from 0 to 1M/],
    [['--ping-exit-code', 'true'], /--ping-exit-code applies with --ping-url/],
  ])('rejects %j', (args, message) => {
    expect(() => resolve(args)).toThrow(UsageError);
    expect(() => resolve(args)).toThrow(message);
  });
});

describe('-l redis (issue 39)', () => {
  it('a redis:// lock URL implies -l redis: key cronguard:DB:NAME, ttl 30s, the tick kept by the lock beside an embedded log', () => {
    const config = resolve(['--lock-url', 'redis://cron:pw@cache.internal:6380/2', '-n', 'invoices', 'true']);
    expect(config.lock).toMatchObject({ kind: 'redis', key: 'cronguard:2:invoices', ttlMs: 30_000, ticks: true });
    expect(config.lock.kind === 'redis' && config.lock.target).toMatchObject({ host: 'cache.internal', port: 6380, db: 2, user: 'cron', password: 'pw', tls: null, display: 'redis://cron@cache.internal:6380/2' });
    expect(config.log).toEqual({ kind: 'sqlite' });
  });

  it('from the environment, with ?prefix= and TLS; beside a shared log the log keeps the tick; --lease-ttl applies', () => {
    const env = { HOME: '/home/u', CRONGUARD_LOCK_URL: 'rediss://cache?ca=/etc/ca.pem&prefix=shop', CRONGUARD_DATABASE_URL: 'postgres://db/ops' };
    const config = resolve(['--lease-ttl', '1m', '-n', 'j', 'true'], contextOf(env, false));
    expect(config.lock).toMatchObject({ kind: 'redis', key: 'cronguard:shop:j', ttlMs: 60_000, ticks: false });
    expect(config.lock.kind === 'redis' && config.lock.target.tls).toEqual({ ca: '/etc/ca.pem' });
    expect(config.log.kind).toBe('shared');
  });

  it('-l flock (or --lock-file) keeps its own lock whatever lock URL the environment gives', () => {
    const env = contextOf({ HOME: '/home/u', CRONGUARD_LOCK_URL: 'redis://cache' }, false);
    expect(resolve(['-l', 'flock', '-n', 'j', 'true'], env).lock.kind).toBe('flock');
    expect(resolve(['--lock-file', '/tmp/j.lock', '-n', 'j', 'true'], env).lock.kind).toBe('flock');
  });
});
