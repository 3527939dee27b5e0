import { describe, expect, it } from 'vitest';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migration-files.js';
import { cronguard, lines } from '../helpers.js';
import { holdingClient, pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// The schema as a cronguard of migration `version` left it (0014: the first with leases).
async function schemaAt(schema: string, version: number): Promise<void> {
  const client = await holdingClient();
  try {
    await client.query(`CREATE SCHEMA "${schema}"`);
    await client.query(`CREATE TABLE "${schema}".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    for (const [i, migration] of POSTGRES_MIGRATIONS.slice(0, version).entries()) {
      await client.query(`INSERT INTO "${schema}".schema_migrations (version) VALUES ($1)`, [i + 1]);
      await client.query(migration.replaceAll('{{schema}}', `"${schema}"`));
    }
  } finally {
    await client.end();
  }
}

type Taken = { epoch: string | null; ttl_ms: string; expires_in: string; expires_in_ms: string };
// Takes job's lease for ttl; its epoch, and the lease row as it then reads.
async function take(schema: string, job: string, ttl: string): Promise<Taken> {
  const [taken] = await sql<{ epoch: string }>(`SELECT ${schema}.take_lease($1, $2::interval)::text AS epoch`, [job, ttl]);
  const [row] = await sql<Omit<Taken, 'epoch'>>(
    `SELECT ttl_ms::text, (expires_at - acquired_at)::text AS expires_in,
            (extract(epoch FROM expires_at - acquired_at) * 1000)::bigint::text AS expires_in_ms
     FROM ${schema}.leases WHERE epoch = $1`,
    [taken?.epoch],
  );
  return { epoch: taken?.epoch ?? null, ...(row as Omit<Taken, 'epoch'>) };
}

// A DBA's take_lease for longer than 24.8 days (issue 20 review): the lease row's ttl was an
// integer of milliseconds, and '30 days' failed with "integer out of range" (migration 0015).
describe('take_lease for as long as a DBA asks', () => {
  it('30 days, a month, 10 years: taken, the job skipped meanwhile; a schema of 0014 with a lease held is upgraded in place', async () => {
    const box = pgSandbox();
    const held = box.job('held');
    await schemaAt(box.schema, 14);
    const [before] = await sql<{ epoch: string }>(`SELECT ${box.schema}.take_lease($1, '1 hour')::text AS epoch`, [held]);
    expect(await cronguard(['migrate'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await sql(`SELECT max(version) AS v FROM ${box.schema}.schema_migrations`)).toEqual([{ v: POSTGRES_MIGRATIONS.length }]);
    // The lease taken before the upgrade is still held, its ttl as it was.
    expect(await sql(`SELECT job, epoch::text, ttl_ms::text FROM ${box.schema}.leases`)).toEqual([{ job: held, epoch: before?.epoch, ttl_ms: '3600000' }]);

    const month = box.job('month');
    const long = box.job('long');
    const decade = box.job('decade');
    expect(await take(box.schema, long, '30 days')).toEqual({ epoch: expect.any(String), ttl_ms: '2592000000', expires_in: '30 days', expires_in_ms: '2592000000' });
    // Calendar units as PostgreSQL adds them (a month of 28 to 31 days, an hour more or less
    // across a change of daylight saving time), and the ttl recorded is the one they came to.
    const calendar = await take(box.schema, month, '1 month');
    expect(calendar?.expires_in).toMatch(/^(27|28|29|30|31) days( \d\d:00:00)?$/);
    expect(calendar?.ttl_ms).toBe(calendar?.expires_in_ms);
    const years = await take(box.schema, decade, '10 years');
    expect(years?.expires_in).toMatch(/^365[123] days( \d\d:00:00)?$/);
    expect(years?.ttl_ms).toBe(years?.expires_in_ms);
    // Held: a second take returns NULL, and a run of the job starts nothing.
    expect(await sql(`SELECT ${box.schema}.take_lease($1, '40 days') AS epoch`, [long])).toEqual([{ epoch: null }]);
    const ran = box.path('ran');
    expect(await cronguard(['-l', 'lease', '-n', long, '--every-tick', '--', 'touch', ran], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual([]);
    const shown = JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout) as { job: string; expires_in_ms: number }[];
    expect(shown.find((l) => l.job === long)?.expires_in_ms).toBeGreaterThan(2_591_000_000);
    expect(await pgRuns(box.schema)).toEqual([]);
  });

  it.each([['0'], ['-1 day'], ['1 day -25 hours'], [null]])('ttl %s: refused by a message that names what it needs, nothing taken', async (ttl) => {
    const box = pgSandbox();
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const error = await sql(`SELECT ${box.schema}.take_lease($1, $2::interval)`, [box.job('bad'), ttl]).catch((e: Error & { code: string }) => e);
    expect(error).toMatchObject({ code: '22023', message: expect.stringMatching(/^take_lease\('bad-\w+', .+\): needs a job and a positive, finite ttl such as '1 hour' or '30 days'$/) });
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });
});
