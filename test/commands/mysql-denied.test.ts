import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// A subcommand whose account lacks a privilege it needs mid-command (a DBA's partial GRANT) is
// a user's mistake to fix: one line naming the server's refusal, 77, never a stack trace.
const created: string[] = [];
afterEach(async () => {
  for (const drop of created.splice(0)) await mysqlQuery(drop);
});

describe('subcommands as an account with too few privileges (MySQL)', () => {
  it('end in one line and 77', async () => {
    const box = mysqlSandbox();
    expect((await cronguard(['-n', box.job('x'), '--', 'true'], box.env)).code).toBe(0);
    const name = `ro_${randomBytes(4).toString('hex')}`;
    await mysqlQuery(`CREATE USER '${name}'@'%' IDENTIFIED BY 'pw'`);
    created.push(`DROP USER '${name}'@'%'`);
    await mysqlQuery(`GRANT SELECT ON \`${box.database}\`.runs TO '${name}'@'%'`);
    await mysqlQuery(`GRANT SELECT ON \`${box.database}\`.schema_migrations TO '${name}'@'%'`);
    const url = new URL(mysqlUrl());
    url.username = name;
    url.password = 'pw';
    url.pathname = '';
    const env = { ...box.env, CRONGUARD_DATABASE_URL: url.toString() };
    for (const args of [['requests'], ['status'], ['disable', box.job('x')]]) {
      const result = await cronguard(args, env);
      expect(result.code, args.join(' ')).toBe(77);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^cronguard \w+: MySQL: [^\n]*command denied[^\n]*; see Grants in man cronguard\n$/);
    }
  });
});
