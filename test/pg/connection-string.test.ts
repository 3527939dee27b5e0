import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { type DbConfig, resolveDb } from '../../src/store/postgres/config.js';

// libpq's connection strings as cronguard reads them: multi-host URIs, target_session_attrs
// and keyword/value pairs, never echoing a password.
const url = (value: string) => ({ value, from: '--db' });
const resolve = (text: string, env: Record<string, string> = {}) => resolveDb(url(text), undefined, env) as DbConfig;
const servers = (db: DbConfig) => db.servers.map((s) => `${s.connection.host}:${s.connection.port}`);

describe('multi-host URIs', () => {
  it('tries each host:port of the authority in order', () => {
    const db = resolve('postgresql://u:pw@h1:5432,h2:5433/ops');
    expect(servers(db)).toEqual(['h1:5432', 'h2:5433']);
    expect(db.display).toBe('u@h1:5432,h2:5433/ops');
    expect(db.servers.map((s) => s.display)).toEqual(['u@h1:5432/ops', 'u@h2:5433/ops']);
    expect(db.servers.every((s) => s.connection.password === 'pw' && s.connection.database === 'ops')).toBe(true);
  });

  it('gives a host without a port the default, and brackets IPv6 addresses', () => {
    expect(servers(resolve('postgresql://h1,h2:6000/d'))).toEqual(['h1:5432', 'h2:6000']);
    expect(servers(resolve('postgresql://h1,h2/d', { PGPORT: '6432' }))).toEqual(['h1:6432', 'h2:6432']);
    const v6 = resolve('postgresql://[::1]:5433,[fe80::2]/d');
    expect(v6.servers.map((s) => s.connection.host)).toEqual(['::1', 'fe80::2']);
    expect(v6.display).toBe(`${v6.connection.user}@[::1]:5433,[fe80::2]:5432/d`);
  });

  it('takes host and port lists from the query: one port for all, or one per host', () => {
    expect(servers(resolve('postgresql:///d?host=a,b&port=6000'))).toEqual(['a:6000', 'b:6000']);
    expect(servers(resolve('postgresql:///d?host=a,b&port=6000,6001'))).toEqual(['a:6000', 'b:6001']);
    expect(() => resolve('postgresql:///d?host=a,b&port=1,2,3')).toThrow(/--db: 3 ports for 2 hosts/);
  });

  it('reads $PGHOST and $PGPORT lists as libpq does', () => {
    expect(servers(resolve('postgresql:///d', { PGHOST: 'p1,p2', PGPORT: '7001,7002' }))).toEqual(['p1:7001', 'p2:7002']);
    expect(() => resolve('postgresql:///d', { PGHOST: 'p1,p2,p3', PGPORT: '1,2' })).toThrow(/\$PGPORT: 2 ports for 3 hosts/);
  });

  it('keeps each host its own sslmode default (none on loopback)', () => {
    expect(resolve('postgresql://127.0.0.1,db.example/d').servers.map((s) => s.connection.sslmode)).toEqual(['disable', 'prefer']);
  });

  it('still refuses a port that is not one, without echoing it', () => {
    expect(() => resolve('postgresql://u:se/cret@h1:5432,h2:x/d')).toThrow(/the port in --db is not a number from 1 to 65535$/);
  });
});

describe('target_session_attrs', () => {
  it('is any unless the string or $PGTARGETSESSIONATTRS says otherwise; the string wins', () => {
    expect(resolve('postgresql://h/d').targetSessionAttrs).toBe('any');
    expect(resolve('postgresql://h/d?target_session_attrs=read-write').targetSessionAttrs).toBe('read-write');
    expect(resolve('postgresql://h/d', { PGTARGETSESSIONATTRS: 'prefer-standby' }).targetSessionAttrs).toBe('prefer-standby');
    expect(resolve('postgresql://h/d?target_session_attrs=primary', { PGTARGETSESSIONATTRS: 'standby' }).targetSessionAttrs).toBe('primary');
  });

  it('refuses a value libpq does not know', () => {
    expect(() => resolve('postgresql://h/d?target_session_attrs=master')).toThrow(UsageError);
    expect(() => resolve('postgresql://h/d?target_session_attrs=master')).toThrow(/'master' .* is not one of any, read-write, primary, read-only, standby, prefer-standby/);
  });
});

describe('keyword/value strings', () => {
  it('reads libpq keyword=value pairs, quoted values and backslash escapes', () => {
    const db = resolve(`host=h1,h2 port=5433 dbname=ops user=cron password='a b\\'c\\\\' sslmode=require connect_timeout = 3`);
    expect(servers(db)).toEqual(['h1:5433', 'h2:5433']);
    expect(db.connection).toMatchObject({ user: 'cron', database: 'ops', password: "a b'c\\", sslmode: 'require', connectTimeoutMs: 3000 });
    expect(resolve('host=h password=x\\ y').connection.password).toBe('x y');
    expect(resolve("host=h password=''").connection.password).toBe('');
    expect(resolve('host=h target_session_attrs=read-write application_name=ignored').targetSessionAttrs).toBe('read-write');
  });

  it('fills in from PG* what the pairs leave out', () => {
    expect(resolve('dbname=ops', { PGHOST: 'db', PGPORT: '6432', PGUSER: 'u' }).display).toBe('u@db:6432/ops');
  });

  it.each([
    ['a value with a space, unquoted', 'host=h password=S3cr Et9', /expected keyword=value pairs/],
    ['an unknown keyword after an unquoted space', 'host=h password=S3cr Et9=x', /unsupported connection parameter \(an unknown keyword/],
    ['a quote left open', "host=h password='S3cr Et9", /a quoted value is not closed/],
    ['a keyword with no value', 'host=h S3cr', /expected keyword=value pairs/],
  ])('refuses %s as a usage error that does not echo the password', (_what, text, message) => {
    expect(() => resolve(text)).toThrow(UsageError);
    expect(() => resolve(text)).toThrow(message);
    try {
      resolve(text);
    } catch (error) {
      expect((error as Error).message).not.toMatch(/S3cr|Et9/);
    }
  });

  it('names a libpq keyword cronguard does not support', () => {
    expect(() => resolve('service=ops')).toThrow(/unsupported connection parameter 'service'/);
  });

  it('is told from a plain word, which is neither form', () => {
    expect(() => resolve('db.example.com')).toThrow(/expected a URL starting with postgres:\/\/, postgresql:\/\/, mysql:\/\/ or mariadb:\/\/, or libpq keyword=value pairs/);
  });
});
