import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { Settings } from '../../src/cli/settings.js';
import { UsageError } from '../../src/errors.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import { cronguard, runs, sandbox } from '../helpers.js';

// A user file and a system file in a sandbox, loaded as an invocation would load them.
function files(user: string | null, system: string | null, env: Record<string, string> = {}) {
  const box = sandbox();
  const userFile = box.path('user.conf');
  const systemFile = box.path('system.conf');
  if (user !== null) writeFileSync(userFile, user, { mode: 0o600 });
  if (system !== null) writeFileSync(systemFile, system, { mode: 0o600 });
  return { box, userFile, systemFile, settings: Settings.load({ CRONGUARD_CONFIG: userFile, ...env }, systemFile) };
}

describe('configuration files', () => {
  it('takes a flag over the environment over the user file over the system file', () => {
    const { settings, userFile, systemFile } = files('state_dir = /user\n', 'state_dir = /system\nlock_dir = /system-locks\n', {
      CRONGUARD_SCHEMA: 'from_env',
    });
    expect(settings.get('state_dir')).toEqual({ value: '/user', from: `${userFile}:1` });
    expect(settings.get('lock_dir')).toEqual({ value: '/system-locks', from: `${systemFile}:2` });
    expect(settings.get('schema')).toEqual({ value: 'from_env', from: '$CRONGUARD_SCHEMA' });
    expect(settings.get('schema', { value: 'flagged', name: '--schema' })).toEqual({ value: 'flagged', from: '--schema' });
    expect(settings.get('database_url')).toBeUndefined();
  });

  it('reads comments, blank lines, quotes, and keys spelled like the variables', () => {
    const { settings } = files(`# fleet\n\nCRONGUARD_DATABASE_URL = "postgres://db/ops"\n  Schema='quoted'  \n`, null);
    expect(settings.get('database_url')?.value).toBe('postgres://db/ops');
    expect(settings.get('schema')?.value).toBe('quoted');
  });

  it('lets an empty value in the user file unset what the system file sets', () => {
    const { settings } = files('database_url =\n', 'database_url = postgres://fleet/ops\n');
    expect(settings.get('database_url')).toBeUndefined();
  });

  it('warns when a file others can read holds a password', () => {
    const box = sandbox();
    const file = box.path('open.conf');
    writeFileSync(file, 'database_url = postgres://cron:s3cret@db/ops\n');
    chmodSync(file, 0o644);
    const settings = Settings.load({ CRONGUARD_CONFIG: file }, box.path('none'));
    expect(settings.warnings).toEqual([`${file} holds a database password and is readable by other users; chmod 600 it, or use ~/.pgpass`]);
    chmodSync(file, 0o600);
    expect(Settings.load({ CRONGUARD_CONFIG: file }, box.path('none')).warnings).toEqual([]);
  });

  it.each([
    ['an unknown key', 'colour = red\n', /user\.conf:1: unknown setting 'colour' \(known: database_url, lock_url, schema, lock_dir, state_dir, retention, metrics_dir, notify, notify_url, env_file, redact, syslog, syslog_socket\)/],
    ['a line without =', 'state_dir /x\n', /user\.conf:1: expected 'key = value'$/],
    // A name every object inherits is no setting either.
    ['an inherited name', 'constructor = 1\n', /user\.conf:1: unknown setting 'constructor' \(known: /],
  ])('refuses %s with a usage error naming the file and line', (_what, text, message) => {
    expect(() => files(text, null)).toThrow(UsageError);
    expect(() => files(text, null)).toThrow(message);
  });

  it('refuses a $CRONGUARD_CONFIG that does not exist', () => {
    expect(() => Settings.load({ CRONGUARD_CONFIG: '/nonexistent/cronguard.conf' })).toThrow(
      /^configuration file: cannot read \/nonexistent\/cronguard\.conf \(it does not exist\)$/,
    );
  });
});

describe('configuration files that are not plain files', () => {
  it.each([
    ['a FIFO', async (path: string) => new Promise((resolve) => spawn('mkfifo', [path]).on('exit', resolve))],
    ['a directory', async (path: string) => mkdirSync(path)],
  ])('%s named by $CRONGUARD_CONFIG: 64 at once, for a run and a subcommand', async (_what, make) => {
    const box = sandbox();
    const path = box.path('conf');
    await make(path);
    for (const args of [['-n', 'x', '--', 'touch', box.path('ran')], ['history']]) {
      const result = await cronguard(args, { ...box.env, CRONGUARD_CONFIG: path });
      expect(result.code).toBe(64);
      expect(result.stderr).toMatch(new RegExp(`configuration file: ${path} is not a regular file`));
    }
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('refuses /dev/zero instead of reading it forever', () => {
    expect(() => Settings.load({ CRONGUARD_CONFIG: '/dev/zero' })).toThrow(/is not a regular file/);
  });

  it('refuses a FIFO, a link or a file over 1 MiB at the user path in one line (64), without blocking', () => {
    const box = sandbox();
    mkdirSync(box.path('xdg/cronguard'), { recursive: true });
    const config = box.path('xdg/cronguard/config');
    const load = () => Settings.load({ XDG_CONFIG_HOME: box.path('xdg') }, box.path('none'));
    spawnSync('mkfifo', [config]);
    expect(load).toThrow(new RegExp(`^configuration file: ${config} is not a regular file$`));
    rmSync(config);
    writeFileSync(box.path('real'), 'schema = x\n');
    symlinkSync(box.path('real'), config);
    expect(load).toThrow(new RegExp(`^configuration file: ${config} is a symbolic link; give the file itself$`));
    rmSync(config);
    writeFileSync(config, `# ${'x'.repeat(1024 * 1024)}\n`);
    expect(load).toThrow(/is larger than 1048576 bytes$/);
  });

  it('refuses a configuration file another user could have written: world-writable, or another user\'s (77)', async () => {
    const box = sandbox();
    const conf = box.path('conf');
    writeFileSync(conf, 'schema = elsewhere\n');
    chmodSync(conf, 0o666);
    const open = await cronguard(['-n', 'x', '--', 'touch', box.path('ran')], { ...box.env, CRONGUARD_CONFIG: conf });
    expect(open).toMatchObject({ code: 77, stderr: `cronguard: configuration file ${conf} is writable by any user (mode 666); chmod o-w it\n` });
    if (process.geteuid?.() === 0) {
      chmodSync(conf, 0o644);
      chownSync(conf, 65534, 65534);
      const foreign = await cronguard(['history'], { ...box.env, CRONGUARD_CONFIG: conf });
      expect(foreign.code).toBe(77);
      expect(foreign.stderr).toMatch(/configuration file .*conf belongs to another user \(uid 65534\); cronguard takes settings only from your own files or root's\n$/);
    }
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('strips trailing comments, as in docs/configuration.md\'s example', () => {
    const { settings } = files('database_url = postgres://cron@db.internal/ops   # /etc/cronguard.conf\nschema = "a#b" # quoted\n', null);
    expect(settings.get('database_url')?.value).toBe('postgres://cron@db.internal/ops');
    expect(settings.get('schema')?.value).toBe('a#b');
  });

  it('lets an empty variable unset what a file sets', () => {
    const { settings } = files('database_url = postgres://fleet/ops\n', null, { CRONGUARD_DATABASE_URL: '' });
    expect(settings.get('database_url')).toBeUndefined();
  });
});

describe('the database is explicit', () => {
  const url = (value: string) => ({ value, from: '$CRONGUARD_DATABASE_URL' });

  it('is off without a URL, whatever PG* variables say', () => {
    expect(resolveDb(undefined, undefined, { PGHOST: 'db', PGDATABASE: 'ops' })).toBeNull();
  });

  it('fills in what the URL leaves out from PG*, then from libpq defaults', () => {
    const env = { PGHOST: 'db.internal', PGPORT: '6432', PGUSER: 'cron', PGDATABASE: 'ops', PGPASSWORD: 'pw' };
    expect(resolveDb(url('postgres://'), undefined, env)?.connection).toMatchObject({
      host: 'db.internal', port: 6432, user: 'cron', database: 'ops', password: 'pw', sslmode: 'prefer',
    });
    const bare = resolveDb(url('postgresql://h2:7000'), undefined, {})?.connection;
    // libpq: the operating-system user (not $USER, which cron does not set), and a database
    // named after it.
    expect(bare).toMatchObject({ host: 'h2', port: 7000, user: userInfo().username, database: userInfo().username, password: undefined });
  });

  it('lets the URL win over PG*, including its query parameters', () => {
    const env = { PGHOST: 'ignored', PGUSER: 'ignored', PGSSLMODE: 'require' };
    expect(resolveDb(url('postgres://u:p%40ss@h/d?sslmode=disable&port=5433'), undefined, env)?.connection).toMatchObject({
      host: 'h', port: 5433, user: 'u', password: 'p@ss', database: 'd', sslmode: 'disable',
    });
  });

  it.each([
    ['a port that is not a number', 'postgres://h:abc/d', /the port in database URL \(\$CRONGUARD_DATABASE_URL\) is not a number from 1 to 65535/],
    ['a port out of range', 'postgres://h/d?port=70000', /the port in .* is not a number/],
    ['an unknown sslmode', 'postgres://h/d?sslmode=sometimes', /sslmode 'sometimes' \(or \$PGSSLMODE\) is not one of disable, allow/],
    ['an unsupported parameter', 'postgres://h/d?service=ops', /unsupported connection parameter 'service'/],
    ['a password with a raw ?', 'postgres://u:S3cret?PW@h/d', /unsupported connection parameter in the URL \(a password with \? \/ # or @ must be %-encoded\)/],
    ['a connect_timeout too long for a timer', 'postgres://h/d?connect_timeout=3000000', /connect_timeout '3000000' .* up to 3600/],
    ['a malformed escape', 'postgres://u:%zz@h/d', /the password has a malformed %-escape/],
    ['another scheme', 'mysql://h/d', /expected a URL starting with postgres:\/\//],
  ])('refuses %s as a usage error', (_what, text, message) => {
    expect(() => resolveDb(url(text), undefined, {})).toThrow(UsageError);
    expect(() => resolveDb(url(text), undefined, {})).toThrow(message);
  });

  it.each(['pg_temp', 'pg_catalog', 'information_schema', 'PG_toast'])('refuses the system schema %s', (schema) => {
    expect(() => resolveDb(url('postgres://h/d'), { value: schema, from: '--schema' }, {})).toThrow(/is a PostgreSQL system schema/);
  });

  it('runs on flock and SQLite when only PG* variables are set (they are there for pg_dump)', async () => {
    const box = sandbox();
    const env = { ...box.env, PGHOST: '127.0.0.1', PGPORT: '9', PGDATABASE: 'nowhere' };
    const result = await cronguard(['-n', 'local', '--', 'echo', 'ran'], env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n', stderr: '' });
    expect(runs(box.stateDir)).toEqual([expect.objectContaining({ job: 'local', lock_backend: 'flock' })]);
  });

  it('takes the database from the configuration file, and -v says so', async () => {
    const box = sandbox();
    const file = box.path('cronguard.conf');
    writeFileSync(file, 'database_url = postgres://cron@127.0.0.1:9/ops\n', { mode: 0o600 });
    const result = await cronguard(['-v', '-n', 'conf', '--', 'true'], { ...box.env, CRONGUARD_CONFIG: file });
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(new RegExp(`^cronguard: database cron@127\\.0\\.0\\.1:9/ops \\(from ${file}:1\\), schema cronguard\\n`));
    expect(result.stderr).toMatch(/cannot reach PostgreSQL at cron@127\.0\.0\.1:9\/ops: ECONNREFUSED\n$/);
  });

  it('exits 64 on a bad configuration file, for runs and subcommands alike', async () => {
    const box = sandbox();
    const file = box.path('cronguard.conf');
    writeFileSync(file, 'databse_url = postgres://x/y\n');
    for (const args of [['-n', 'x', '--', 'touch', box.path('ran')], ['history']]) {
      const result = await cronguard(args, { ...box.env, CRONGUARD_CONFIG: file });
      expect(result.code).toBe(64);
      expect(result.stderr).toMatch(new RegExp(`^cronguard[a-z ]*: ${file}:1: unknown setting 'databse_url'`));
    }
  });
});
