import { spawn } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cronguard, lines, start, waitFor } from '../helpers.js';
import { pgSandbox } from '../pg-helpers.js';
import { hasPgbouncer, PGBOUNCER, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';
import { clusterToolsMissing, makeCluster, type SmallCluster } from '../small-cluster.js';

// Many jobs under -l lease (issue 20): 150 different jobs running at once through a real
// PgBouncer in transaction pooling with 5 server connections, to a server of its own with
// max_connections = 20 (an advisory lock would need 150). All run and are recorded.
const JOBS = 150;
let cluster: SmallCluster | null = null;
let pooler: Pgbouncer | null = null;

async function onCluster<R extends pg.QueryResultRow>(text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: (cluster as SmallCluster).url });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

// Whether someone holds `file` locked (flock -n fails).
function spawnHolds(file: string): Promise<boolean> {
  return new Promise((resolve) => spawn('flock', ['-n', '-s', file, 'true']).on('exit', (code) => resolve(code !== 0)));
}

const missing = !hasPgbouncer ? `${PGBOUNCER} is missing` : clusterToolsMissing();
const title = missing === null ? `-l lease: ${JOBS} jobs at once through PgBouncer, 5 server connections, max_connections = 20` : `-l lease, ${JOBS} jobs: skipped, ${missing}`;
describe.skipIf(missing !== null)(title, () => {
  beforeAll(async () => {
    cluster = await makeCluster('cg_i20_small', 20);
    pooler = await startPgbouncer({ poolMode: 'transaction', poolSize: 5, target: cluster.url, maxClientConn: 200 });
  }, 300_000);
  afterAll(async () => {
    await pooler?.stop();
    cluster?.drop();
  });

  it(`all ${JOBS} run at once, each under its lease, and are recorded`, async () => {
    const box = pgSandbox();
    const direct = { ...box.env, CRONGUARD_DATABASE_URL: (cluster as SmallCluster).url };
    const pooled = { ...box.env, CRONGUARD_DATABASE_URL: (pooler as Pgbouncer).url };
    expect(await cronguard(['migrate'], direct)).toMatchObject({ code: 0 });
    const log = box.path('started');
    // Each notes its start, then waits for the test's lock on a file (no polling, which
    // would cost 150 processes' worth of CPU): all are running at once.
    const barrier = box.path('barrier');
    const gate = spawn('flock', ['-x', '-o', barrier, 'cat'], { stdio: ['pipe', 'ignore', 'ignore'] });
    await waitFor(() => spawnHolds(barrier), 'the test to hold the barrier');
    const command = ['sh', '-c', `echo "$CRONGUARD_JOB $CRONGUARD_FENCING_TOKEN" >> ${log}; flock -s ${barrier} true`];
    const runs = Array.from({ length: JOBS }, (_, i) => start(['-l', 'lease', '-n', box.job(`many-${i}`), '--', ...command], pooled));
    let exited = 0;
    let held: { n: string } | undefined;
    let clients: { n: string } | undefined;
    for (const r of runs) void r.done.finally(() => exited++);
    try {
      // Each has started its command or ended (which the checks below report, with why).
      await waitFor(() => lines(log).length + exited >= JOBS, `all ${JOBS} commands to start`, 600_000);
      [held] = await onCluster<{ n: string }>(`SELECT count(*) AS n FROM "${box.schema}".leases WHERE expires_at > now()`);
      [clients] = await onCluster<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = 'test' AND backend_type = 'client backend'`);
    } finally {
      gate.stdin.end();
    }
    const results = await Promise.all(runs.map((r) => r.done));
    expect(results.filter((r) => r.code !== 0 || r.stderr !== '')).toEqual([]);
    expect(Number(held?.n)).toBe(JOBS);
    // The pooler's 5 server connections, and that query's own: never more.
    expect(Number(clients?.n)).toBeLessThanOrEqual(6);
    const started = lines(log).map((l) => l.split(' '));
    expect(new Set(started.map((s) => s[0])).size).toBe(JOBS);
    expect(new Set(started.map((s) => s[1])).size).toBe(JOBS);
    const rows = await onCluster<{ status: string; lock_backend: string; n: string }>(
      `SELECT status, lock_backend, count(*) AS n FROM "${box.schema}".runs GROUP BY 1, 2`,
    );
    expect(rows.map((r) => [r.status, r.lock_backend, Number(r.n)])).toEqual([['succeeded', 'lease', JOBS]]);
    expect(await onCluster(`SELECT 1 FROM "${box.schema}".leases`)).toEqual([]);
  }, 900_000);
});
