import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, ROOT, spooled, start, waitFor } from '../helpers.js';
import { databaseUrl, pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// docs/fleet-postgres.md's least-privilege SQL, run as written, with this test's names: roles are
// global to the server, so each test gets its own.
function pageGrants(schema: string, suffix: string): string {
  const page = readFileSync(join(ROOT, 'docs/fleet-postgres.md'), 'utf8');
  const section = page.slice(page.indexOf('### Least-privilege roles'));
  const block = /```sql\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('docs/fleet-postgres.md has no least-privilege SQL block');
  return block
    .replace(/\bcronguard_owner\b/g, `owner_${suffix}`)
    .replace(/\bcronguard\b/g, `"${schema}"`)
    .replace(/\bcron\b/g, `cron_${suffix}`)
    .replace(/\bdashboard\b/g, `dash_${suffix}`)
    .replace(/LOGIN;/g, "LOGIN PASSWORD 'pw';");
}

const created: string[] = [];
afterEach(async () => {
  for (const role of created.splice(0)) {
    await sql(`DROP OWNED BY ${role} CASCADE`).catch(() => {});
    await sql(`DROP ROLE IF EXISTS ${role}`);
  }
});

async function roles() {
  const box = pgSandbox();
  const suffix = randomBytes(4).toString('hex');
  const names = { owner: `owner_${suffix}`, cron: `cron_${suffix}`, dash: `dash_${suffix}`, none: `none_${suffix}` };
  created.push(...Object.values(names));
  await sql(pageGrants(box.schema, suffix));
  await sql(`CREATE ROLE ${names.none} LOGIN PASSWORD 'pw'`);
  const as = (role: string) => {
    const url = new URL(databaseUrl());
    url.username = role;
    url.password = 'pw';
    return { ...box.env, CRONGUARD_DATABASE_URL: url.toString() };
  };
  expect(await cronguard(['migrate'], as(names.owner))).toMatchObject({ code: 0, stderr: '' });
  return { box, names, as };
}


describe('least-privilege roles, as docs/fleet-postgres.md sets them up', () => {
  it('the cron role records runs under either lock, and may run migrate on a current schema', async () => {
    const { box, names, as } = await roles();
    const job = box.job('cron');
    expect(await cronguard(['-n', job, '--', 'true'], as(names.cron))).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard(['-l', 'flock', '-n', job, '--', 'true'], as(names.cron))).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard(['migrate'], as(names.cron))).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    expect(spooled(box.stateDir)).toEqual([]);
  });

  it('the dashboard role reads history and logs', async () => {
    const { box, names, as } = await roles();
    const job = box.job('dash');
    await cronguard(['-n', job, '--', 'echo', 'hello'], as(names.cron));
    const history = await cronguard(['history', '--json'], as(names.dash));
    expect(history.code).toBe(0);
    expect(JSON.parse(history.stdout)).toEqual([expect.objectContaining({ job, output: 'hello\n' })]);
    expect(await cronguard(['logs', job], as(names.dash))).toMatchObject({ code: 0, stdout: 'hello\n' });
  });

  it.each(['dash', 'none'] as const)('a job run as a role that may not write (%s) still runs, warns once, and spools', async (who) => {
    const { box, names, as } = await roles();
    const job = box.job('denied');
    const result = await cronguard(['-n', job, '--', 'sh', '-c', 'echo ran; exit 3'], as(names[who]));
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('ran\n');
    const [warning, summary, ...rest] = result.stderr.trim().split('\n');
    expect(warning).toMatch(/^cronguard: run log \S+ \(schema \w+\) unavailable \(record the start: permission denied: permission denied for (table|schema) \w+\); records go to \S+ until it can be written$/);
    expect(summary).toMatch(new RegExp(`^cronguard: ${job}: failed with exit 3 after \\S+$`));
    expect(rest).toEqual([]);
    expect(await pgRuns(box.schema)).toEqual([]);
    expect(spooled(box.stateDir)).toHaveLength(1);
    // The spooled record arrives with the next run that may write.
    expect(await cronguard(['-n', job, '--', 'true'], as(names.cron))).toMatchObject({ code: 0, stderr: '' });
    // Delivered after the run that delivered it, so by start time, not by id.
    const rows = (await pgRuns(box.schema)).sort((a, b) => +a.started_at - +b.started_at);
    expect(rows.map((r) => [r.status, r.exit_code])).toEqual([['failed', 3], ['succeeded', 0]]);
    expect(spooled(box.stateDir)).toEqual([]);
  });

  it('the postgres lock still excludes a second copy when the log is denied', async () => {
    const { box, names, as } = await roles();
    const job = box.job('excl');
    const log = box.path('record');
    const barrier = box.path('go');
    const first = start(['-n', job, '--', fixture('hold.sh'), log, barrier], as(names.none));
    await waitFor(() => lines(log).length > 0, 'the first copy to start');
    const second = await cronguard(['-n', job, '-E', '9', '--', fixture('hold.sh'), log, barrier], as(names.none));
    writeFileSync(barrier, '');
    expect((await first.done).code).toBe(0);
    expect(second.code).toBe(9);
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);
  });

  it('the dashboard role lists locks held by the cron role, whose session details it may not see', async () => {
    const { box, names, as } = await roles();
    const job = box.job('seen');
    const log = box.path('record');
    const barrier = box.path('go');
    const held = start(['-n', job, '--', fixture('hold.sh'), log, barrier], as(names.cron));
    await waitFor(() => lines(log).length > 0, 'the job to start');
    const result = await cronguard(['locks', '--json'], as(names.dash));
    writeFileSync(barrier, '');
    await held.done;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual([expect.objectContaining({ job, lock: 'postgres', verified: true })]);
  });

  it.each([
    [['history']],
    [['logs', 'x']],
    [['locks']],
    [['migrate']],
  ])('a role without privileges gets 77 and one line from %j', async (args) => {
    const { names, as } = await roles();
    const result = await cronguard(args, as(names.none));
    expect(result.code).toBe(77);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^cronguard [a-z]+: PostgreSQL: permission denied for (schema|table) \w+\n$/);
  });
});
