import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronguard, ROOT } from '../helpers.js';
import { mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';
import { databaseUrl, pgSandbox } from '../pg-helpers.js';

// docs/schedules.md's two recipes for schedules as data, run as written (in this test's schema or
// database), end to end: the application's own table, the SQL, the run lines.
function pageBlocks(heading: string, language: string): string[] {
  const page = readFileSync(join(ROOT, 'docs/schedules.md'), 'utf8');
  const from = page.indexOf(heading);
  const section = page.slice(from, page.indexOf('\n### ', from));
  return [...section.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1] as string);
}

describe('schedules as data: the recipes of docs/schedules.md', () => {
  it('job kinds at intervals the application changes (PostgreSQL trigger), with a run-now button', async () => {
    const box = pgSandbox();
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const [trigger, uses] = pageBlocks('### Recipe: job kinds at intervals', 'sql').map((b) => b.replaceAll('cronguard.', `"${box.schema}".`));
    const { Client } = (await import('pg')).default;
    const client = new Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      await client.query(`SET search_path TO "${box.schema}"`);
      await client.query('CREATE TABLE scheduler_type (sht_name text PRIMARY KEY, sht_repeat_interval integer NOT NULL)');
      await client.query(trigger as string);
      await client.query("INSERT INTO scheduler_type VALUES ('import', 3600), ('mail', 60)");
      expect(await cronguard(['schedule', 'kind-import'], box.env)).toMatchObject({ stdout: 'every 3600s\n' });
      expect(await cronguard(['schedule', 'kind-mail'], box.env)).toMatchObject({ stdout: 'every 60s\n' });
      const run = () => cronguard(['-n', 'kind-import', '--scheduled', '--', 'true'], box.env);
      expect(await run()).toMatchObject({ code: 0, stderr: '' });
      expect(await run()).toMatchObject({ code: 0, stderr: '' });
      // The application's UPDATE, its button, and its page's read.
      const [, , recent] = (await client.query(uses as string)) as unknown as { rows: { status: string }[] }[];
      expect(await run()).toMatchObject({ code: 0, stderr: '' });
      expect(recent?.rows.map((r) => r.status)).toEqual(['succeeded']);
      expect(await cronguard(['schedule', 'kind-import'], box.env)).toMatchObject({ stdout: 'every 900s\n' });
      const runs = await client.query('SELECT trigger FROM runs ORDER BY id');
      expect(runs.rows.map((r) => r.trigger)).toEqual(['cron', 'request']);
      await expect(client.query("UPDATE scheduler_type SET sht_repeat_interval = 0 WHERE sht_name = 'mail'")).rejects.toMatchObject({ code: '22023' });
    } finally {
      await client.end();
    }
  });

  it('crontab-like rows that PHP fills in (MySQL)', async () => {
    const box = mysqlSandbox();
    const D = `\`${box.database}\``;
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const [fill] = pageBlocks('### Recipe: crontab-like schedules', 'sql').map((b) => b.replaceAll('cronguard.', `${D}.`).replaceAll(/\bCmdSchedule\b/g, `${D}.CmdSchedule`));
    await mysqlQuery(`CREATE TABLE ${D}.CmdSchedule (JobName VARCHAR(100) PRIMARY KEY, Minute VARCHAR(20), Hour VARCHAR(20), MonthDay VARCHAR(20), WeekDay VARCHAR(20))`);
    await mysqlQuery(`INSERT INTO ${D}.CmdSchedule VALUES ('backup', '30', '2', NULL, '1-5'), ('invoice', '*/5', NULL, NULL, NULL), ('broken', '61', NULL, NULL, NULL)`);
    for (const statement of (fill as string).split(/;\s*$/m).filter((t) => t.trim() !== '')) await mysqlQuery(statement);
    expect(await cronguard(['schedule', 'backup'], box.env)).toMatchObject({ stdout: '30 2 * * 1-5\n' });
    expect(await cronguard(['schedule', 'invoice'], box.env)).toMatchObject({ stdout: '*/5 * * * *\n' });
    // Never ran: due at once, then not before its next fire.
    expect(await cronguard(['-n', 'invoice', '--scheduled', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard(['-n', 'backup', '--scheduled', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    const broken = await cronguard(['-n', 'broken', '--scheduled', '--', 'true'], box.env);
    expect(broken).toMatchObject({ code: 0 });
    expect(broken.stderr).toMatch(/^cronguard: broken did not run: --scheduled, but its stored schedule: '61 \* \* \* \*' is not valid: minute 61 is outside 0-59 /);
    expect((await mysqlQuery<{ job: string }>(`SELECT job FROM ${D}.runs ORDER BY id`)).map((r) => r.job)).toEqual(['invoice', 'backup']);
  });
});
