import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';
import { serve } from '../serve/serve-helpers.js';

// A lease as `locks`, `status` and the web page show it (issue 20): its holder (host, pid,
// run), its epoch and when it expires; a lease a DBA took by hand; none once released.
describe('-l lease: locks, status and the web page show the lease', () => {
  it('a running job: its holder, since, epoch and expiry everywhere; nothing once it ended', async () => {
    const box = pgSandbox();
    const job = box.job('shown');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const holder = start(['-l', 'lease', '--lease-ttl', '40s', '-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    try {
      await waitFor(() => lines(log).length > 0, 'the command to start');
      const [row] = await pgRuns(box.schema);
      const run = { pid: row?.pid, id: Number(row?.id) };
      const [lease] = await sql<{ epoch: string; pid: number; run_id: string }>(`SELECT epoch::text, pid, run_id::text FROM ${box.schema}.leases`);
      expect(lease).toMatchObject({ pid: run?.pid, run_id: String(run?.id) });
      const epoch = (lease as { epoch: string }).epoch;

      const held = await cronguard(['locks', '--json'], box.env);
      expect(held).toMatchObject({ code: 0, stderr: '' });
      const [shown, ...others] = (JSON.parse(held.stdout) as Record<string, unknown>[]).filter((h) => h.job === job);
      expect(others).toEqual([]);
      expect(shown).toMatchObject({ lock: 'lease', host: hostname(), pid: run?.pid, run_id: run?.id, epoch, verified: true });
      expect(Date.parse(shown?.since as string)).toBeGreaterThan(Date.now() - 120_000);
      expect(shown?.expires_in_ms).toBeGreaterThan(0);
      expect(shown?.expires_in_ms).toBeLessThanOrEqual(40_000);
      const table = await cronguard(['locks'], box.env);
      expect(table.stdout).toMatch(new RegExp(`^${job}\\s+lease\\s+${hostname()}\\s+${run?.pid}\\s.*\\s${run?.id}\\s+epoch ${epoch}, expires in \\d+s$`, 'm'));

      const detail = await cronguard(['status', job], box.env);
      expect(detail).toMatchObject({ code: 0, stderr: '' });
      expect(detail.stdout).toMatch(new RegExp(`^  lease +held by ${hostname()} pid ${run?.pid}, run ${run?.id}, epoch ${epoch}, expires in \\d+s, since `, 'm'));
      const [json] = JSON.parse((await cronguard(['status', job, '--json'], box.env)).stdout) as Record<string, unknown>[];
      expect(json?.lease).toMatchObject({ host: hostname(), pid: run?.pid, run_id: run?.id, epoch });

      const server = await serve(['-q'], box.env);
      const page = await (await server.get(`/jobs/${encodeURIComponent(job)}`)).text();
      expect(page).toMatch(new RegExp(`<dt>Lease</dt><dd id="lease">held by ${hostname()} pid ${run?.pid}, run ${run?.id}, epoch ${epoch}, expires in \\d+s, since `));
      await server.stop();
    } finally {
      release(barrier);
    }
    expect((await holder.done).code).toBe(0);
    const after = await cronguard(['locks', '--json'], box.env);
    expect((JSON.parse(after.stdout) as { job: string }[]).filter((h) => h.job === job)).toEqual([]);
    const [json] = JSON.parse((await cronguard(['status', job, '--json'], box.env)).stdout) as Record<string, unknown>[];
    expect(json?.lease).toBeNull();
    expect((await cronguard(['status', job], box.env)).stdout).not.toMatch(/^ {2}lease/m);
  });

  it('a lease a DBA took with take_lease: shown with no run row; the job is skipped until it is broken', async () => {
    const box = pgSandbox();
    const job = box.job('by-hand');
    expect(await cronguard(['-l', 'lease', '-n', job, '--every-tick', '--', 'true'], box.env)).toMatchObject({ code: 0 });
    const [taken] = await sql<{ epoch: string }>(`SELECT ${box.schema}.take_lease($1, '10 minutes')::text AS epoch`, [job]);
    const [shown] = (JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout) as Record<string, unknown>[]).filter((h) => h.job === job);
    expect(shown).toMatchObject({ lock: 'lease', host: 'sql:postgres', pid: 0, run_id: null, epoch: taken?.epoch });
    expect((await cronguard(['locks'], box.env)).stdout).toMatch(new RegExp(`^${job}\\s+lease\\s.*epoch ${taken?.epoch}, expires in \\d+s; no run row$`, 'm'));
    const ran = box.path('ran');
    expect(await cronguard(['-l', 'lease', '-n', job, '--every-tick', '--', 'touch', ran], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual([]);
    await sql(`DELETE FROM ${box.schema}.leases WHERE job = $1`, [job]);
    expect(await cronguard(['-l', 'lease', '-n', job, '--every-tick', '--', 'touch', ran], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('a schema from before leases: locks and status show none, and fail nowhere', async () => {
    const box = pgSandbox();
    const job = box.job('old');
    expect(await cronguard(['-n', job, '--', 'true'], box.env)).toMatchObject({ code: 0 });
    await sql(`DROP TABLE ${box.schema}.leases CASCADE`);
    expect(await cronguard(['locks'], box.env)).toMatchObject({ code: 0, stderr: 'cronguard: no locks held\n' });
    const [json] = JSON.parse((await cronguard(['status', job, '--json'], box.env)).stdout) as Record<string, unknown>[];
    expect(json?.lease).toBeNull();
  });
});
