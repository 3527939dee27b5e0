import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { resolveMysql } from '../../src/store/mysql/url.js';
import { cronguard, runs, sandbox } from '../helpers.js';
import { mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// A MySQL URL, and the options that cannot go with it: one line, exit 64, nothing run,
// nothing recorded, no connection made (the server is never asked).
describe('MySQL configuration: bad input', () => {
  const url = 'mysql://cron:s3cr%2Ft@127.0.0.1:3306/test';
  const cases: [string, string[], RegExp][] = [
    ['-l postgres with a MySQL URL', ['--db', url, '-l', 'postgres'], /lock backend postgres needs a PostgreSQL database; with a MySQL URL use -l mysql/],
    ['-l mysql with a PostgreSQL URL', ['--db', 'postgres://u@127.0.0.1:5432/d', '-l', 'mysql'], /lock backend mysql needs a mysql:\/\/ or mariadb:\/\/ URL/],
    ['-l mysql without a database', ['-l', 'mysql'], /lock backend mysql needs a database: give --db URL/],
    ['--lock-key with the mysql lock', ['--db', url, '--lock-key', '42'], /--lock-key applies to the postgres lock backend only \(the mysql lock is named after the job/],
    ['--lease-ttl under 5s with MySQL', ['--db', url, '-l', 'lease', '--lease-ttl', '4s'], /--lease-ttl: '4s' is shorter than the minimum, 5s/],
    ['--lease-ttl over 24d with MySQL', ['--db', url, '-l', 'lease', '--lease-ttl', '25d'], /--lease-ttl: '25d' is longer than the maximum, 24d/],
    ['--lease-ttl with the mysql lock', ['--db', url, '--lease-ttl', '10s'], /--lease-ttl applies to the lease lock backend only/],
    ['-l lease with MySQL and --no-log', ['--db', url, '-l', 'lease', '--no-log'], /-l lease keeps its lease in the run log; it cannot go with --no-log/],
    ['an unknown URL parameter', ['--db', `${url}?sslmode=require`], /--db: unknown parameter 'sslmode' \(use ssl-mode, ssl, /],
    ['a parameter given twice', ['--db', `${url}?ssl=true&ssl=false`], /--db: parameter 'ssl' given twice/],
    ['an unknown ssl-mode', ['--db', `${url}?ssl-mode=sometimes`], /--db: ssl-mode 'sometimes' is not one of disabled, preferred, required/],
    ['ssl-mode and ssl together', ['--db', `${url}?ssl-mode=required&ssl=true`], /--db: give ssl-mode or ssl, not both/],
    // The whole hint, readable: no part of it masked as if it were credentials.
    [
      'a port out of range',
      ['--db', 'mysql://root@127.0.0.1:70000/test'],
      /--db: not a URL of the form mysql:\/\/USER@HOST\[:PORT\]\[\/DATABASE\], with USER:PASSWORD for a password \(percent-encode @, \/ and : in it\) \(see/,
    ],
    ['an unencoded / in the password', ['--db', 'mysql://root:pa/ss@127.0.0.1/test'], /--db: not a URL of the form mysql:\/\/USER@HOST\[:PORT\]/],
    ['a connect-timeout that is not seconds', ['--db', `${url}?connect-timeout=5s`], /--db: connect-timeout '5s' is not a number of seconds/],
    ['a relative socket', ['--db', 'mysql://root@localhost/?socket=mysqld.sock'], /--db: socket 'mysqld.sock' is not an absolute path/],
    ['a broken percent-escape in the password', ['--db', 'mysql://root:a%zz@127.0.0.1/test'], /--db: the password has a broken %-escape/],
    ['a path of two databases', ['--db', 'mariadb://root@127.0.0.1/a/b'], /--db: the path names one database/],
    ['an ssl-ca file that does not exist', ['--db', `${url}?ssl-mode=verify_ca&ssl-ca=/nonexistent/ca.pem`], /ssl-ca: cannot read \/nonexistent\/ca\.pem \(it does not exist\)/],
    ['--schema naming a system database', ['--db', url, '--schema', 'mysql'], /--schema: 'mysql' is a MySQL system database/],
    ['--schema that is not a plain name', ['--db', url, '--schema', 'a-b'], /--schema: 'a-b' is not a plain database name/],
  ];

  it.each(cases)('%s', async (_what, options, message) => {
    const box = sandbox();
    const marker = box.path('ran');
    const result = await cronguard([...options, '--', 'sh', '-c', `touch ${marker}`], box.env);
    expect(result.code).toBe(64);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    // The password is never echoed, even in a line about the URL.
    expect(result.stderr).not.toContain('s3cr');
    expect(existsSync(marker)).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('a bad MySQL URL from $CRONGUARD_DATABASE_URL and from the config file names where it came from', async () => {
    const box = sandbox();
    const fromEnv = await cronguard(['--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: 'mysql://root@127.0.0.1/test?colour=red' });
    expect(fromEnv).toMatchObject({ code: 64, stdout: '' });
    expect(fromEnv.stderr).toMatch(/^cronguard: database URL \(\$CRONGUARD_DATABASE_URL\): unknown parameter 'colour'/);
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), 'database_url = mariadb://root@127.0.0.1/test?ssl-mode=maybe\n');
    const fromFile = await cronguard(['--', 'true'], box.env);
    expect(fromFile).toMatchObject({ code: 64, stdout: '' });
    expect(fromFile.stderr).toMatch(/^cronguard: database URL \(.*config:1\): ssl-mode 'maybe' is not one of/);
  });
});

describe('MySQL URL', () => {
  const env = {};
  const parse = (value: string, schema?: string) =>
    resolveMysql({ value, from: '--db' }, schema === undefined ? undefined : { value: schema, from: '--schema' }, env);

  it('decodes percent-escapes; the URL database is only the one connected to, the tables are in --schema', () => {
    const config = parse('mysql://c%40ron:p%40ss%2Fw%3Ard@db.example:3307/app?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ca.pem&connect-timeout=3', 'ops');
    expect(config).toMatchObject({
      dialect: 'mysql',
      user: 'c@ron',
      password: 'p@ss/w:rd',
      host: 'db.example',
      port: 3307,
      database: 'app',
      schema: 'ops',
      sslMode: 'verify_identity',
      sslCa: '/etc/ca.pem',
      connectTimeoutMs: 3000,
      display: 'c@ron@db.example:3307/app',
    });
    expect(config.display).not.toContain('p@ss');
  });

  it('defaults: port 3306, no database, schema cronguard, TLS off on the loopback and preferred elsewhere', () => {
    expect(parse('mariadb://root@127.0.0.1')).toMatchObject({ port: 3306, database: undefined, schema: 'cronguard', sslMode: 'disabled', display: 'root@127.0.0.1:3306' });
    expect(parse('mysql://root@db.example/x')).toMatchObject({ sslMode: 'preferred' });
    expect(parse('mysql://root@[::1]:3310/x')).toMatchObject({ host: '::1', port: 3310, sslMode: 'disabled', display: 'root@[::1]:3310/x' });
    expect(parse('mysql://root@db.example/x?ssl=false')).toMatchObject({ sslMode: 'disabled' });
  });

  it('the password may come from $MYSQL_PWD, as MySQL clients read it', () => {
    expect(resolveMysql({ value: 'mysql://cron@db/x', from: '--db' }, undefined, { MYSQL_PWD: 'pw' }).password).toBe('pw');
    expect(resolveMysql({ value: 'mysql://cron:url@db/x', from: '--db' }, undefined, { MYSQL_PWD: 'pw' }).password).toBe('url');
  });
});

describe('MySQL configuration: a run', () => {
  it('-l mysql is the default with a MySQL URL, and -v says which database and lock', async () => {
    const box = sandbox();
    const result = await cronguard(['--db', mysqlUrl(), '--no-log', '-v', '-n', 'cfg', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`database ${mysqlUrl().replace('mysql://', '')} (from --db), schema cronguard`);
    expect(result.stderr).toMatch(/holding mysql lock cg:[0-9a-f]{40} on /);
    expect(result.stderr).toMatch(/cfg: \d+ MySQL round trips? after connecting/);
  });

  it('mariadb:// from the config file, and --schema: the lock is named after that database', async () => {
    const box = sandbox();
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), `database_url = ${mysqlUrl().replace(/^mysql:/, 'mariadb:')}\nschema = t_cfg_schema\n`);
    const result = await cronguard(['--no-log', '-v', '-n', 'cfg', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/database .* \(from .*config:1\), schema t_cfg_schema/);
    expect(result.stderr).toContain(`holding mysql lock ${mysqlLockName('t_cfg_schema', 'cfg')} on `);
  });

  it('a server nobody answers on: 69, one line naming it without the password, nothing run', async () => {
    const box = sandbox();
    const marker = box.path('ran');
    // Port 1 is nobody's; the server itself is up (this is not a test of a server down).
    expect(await mysqlQuery('SELECT 1')).toHaveLength(1);
    const result = await cronguard(['--db', 'mysql://root:secret@127.0.0.1:1/test', '--', 'touch', marker], box.env);
    expect(result).toMatchObject({ code: 69, stdout: '', stderr: 'cronguard: cannot reach MySQL at root@127.0.0.1:1/test: ECONNREFUSED\n' });
    expect(existsSync(marker)).toBe(false);
  });

  it('ssl-mode=preferred falls back to a plain connection; required refuses a server without TLS (69)', async () => {
    const box = sandbox();
    const [row] = await mysqlQuery<{ Value: string }>("SHOW VARIABLES LIKE 'have_ssl'");
    const url = (mode: string) => `${mysqlUrl()}?ssl-mode=${mode}`;
    expect((await cronguard(['--db', url('preferred'), '--no-log', '--', 'true'], box.env)).code).toBe(0);
    // Only where the test server has no TLS (the machine's MariaDB).
    if (row?.Value === 'YES') return;
    const required = await cronguard(['--db', url('required'), '--no-log', '--', 'touch', box.path('ran')], box.env);
    expect(required).toMatchObject({ code: 69, stdout: '' });
    expect(required.stderr).toMatch(/^cronguard: MySQL at .* does not offer TLS, which the URL's ssl-mode asks for: enable TLS on the server, or use ssl-mode=preferred\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('a password with @ / : % in it, percent-encoded in the URL, logs in; a wrong one is 77 and never echoed', async () => {
    const box = mysqlSandbox();
    const user = `cg_${box.database.slice(2)}`;
    const password = 'p@ss/w:rd%1';
    await mysqlQuery(`CREATE USER '${user}'@'127.0.0.1' IDENTIFIED BY '${password}'`);
    try {
      await mysqlQuery(`GRANT ALL ON \`${box.database}\`.* TO '${user}'@'127.0.0.1'`);
      const url = (pw: string) => `mysql://${user}:${encodeURIComponent(pw)}@127.0.0.1:3306/`;
      const good = await cronguard(['--db', url(password), '-n', 'pw', '--', 'true'], box.env);
      expect(good).toMatchObject({ code: 0, stderr: '' });
      expect(await mysqlQuery(`SELECT id FROM \`${box.database}\`.runs`)).toHaveLength(1);
      const bad = await cronguard(['--db', url('wrong:pw@x'), '-n', 'pw', '--', 'touch', box.path('ran')], box.env);
      expect(bad.code).toBe(77);
      expect(bad.stderr).toMatch(new RegExp(`^cronguard: MySQL at ${user}@127\\.0\\.0\\.1:3306 refused the login: Access denied`));
      expect(bad.stderr).not.toContain('wrong');
      expect(existsSync(box.path('ran'))).toBe(false);
    } finally {
      await mysqlQuery(`DROP USER '${user}'@'127.0.0.1'`);
    }
  });

  it('a refused login: 77, one line', async () => {
    const box = sandbox();
    const result = await cronguard(['--db', 'mysql://nobody_here:x@127.0.0.1:3306/', '--', 'true'], box.env);
    expect(result.code).toBe(77);
    expect(result.stderr).toMatch(/^cronguard: MySQL at nobody_here@127\.0\.0\.1:3306 refused the login: Access denied for user 'nobody_here'/);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });
});
