// The lease bench (part of `npm run bench`, bundled and run by bench.mjs): many different
// jobs running at once under -l lease through PgBouncer in transaction pooling (10 server
// connections) to a server of its own with max_connections = 30, and the same under the
// advisory lock (-l postgres, straight to the server: a transaction pooler cannot carry
// it); then 200 simultaneous invocations of one job. The many leases go twice: with the
// pooler and the server competing with the wrappers for two cores, then standing apart (see
// standApart). Each command notes its start and waits for the bench's lock on a file, so
// that all run at once without polling.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { type Pgbouncer, startPgbouncer } from '../pgbouncer.js';
import { clusterToolsMissing, makeCluster, type SmallCluster } from '../small-cluster.js';
import { leasePickup } from './lease-pickup.js';

const JOBS = Number(process.env.BENCH_LEASE_JOBS ?? 500);
const SAME = Number(process.env.BENCH_LEASE_SAME ?? 200);
const HOLD_MS = 15_000;
const [work, bundle] = process.argv.slice(2) as [string, string];

interface Figures {
  ran: number;
  startedAtOnce: number;
  peakServerConnections: number;
  statementsPerSecond: number | null;
  renewalP50: number | null;
  renewalP99: number | null;
  privateKiBPerJob: number | null;
  seconds: number;
  // How the invocations ended: exit code and how many, e.g. `0: 85, 75: 415`.
  exits: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => (xs.length === 0 ? null : ([...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(p * xs.length) - 1)] as number));
const lineCount = (file: string) => {
  try {
    return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').length;
  } catch {
    return 0;
  }
};

function privateDirtyKiB(pid: number): number | null {
  try {
    return Number(/Private_Dirty:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1]);
  } catch {
    return null;
  }
}

// A file the bench holds locked until released: the commands wait for it with flock -s.
async function gate(file: string): Promise<{ release(): void }> {
  const child = spawn('flock', ['-x', '-o', file, 'cat'], { stdio: ['pipe', 'ignore', 'ignore'] });
  for (;;) {
    const held = await new Promise<boolean>((resolve) => spawn('flock', ['-n', '-s', file, 'true']).on('exit', (code) => resolve(code !== 0)));
    if (held) return { release: () => child.stdin?.end() };
    await sleep(50);
  }
}

// One phase: `count` invocations (names from `name(i)`), all started at once, held until all
// that will run do (or the rest gave up), measured meanwhile, then released.
async function phase(label: string, count: number, name: (i: number) => string, lockArgs: string[], url: string, server: pg.Client, schema: string): Promise<Figures> {
  const started = join(work, `${label}.started`);
  writeFileSync(started, '');
  const barrier = join(work, `${label}.barrier`);
  const door = await gate(barrier);
  const env = { ...process.env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: schema, CRONGUARD_STATE_DIR: join(work, 'state'), CRONGUARD_LOCK_DIR: join(work, 'locks') };
  const command = ['sh', '-c', `echo started >> ${started}; flock -s ${barrier} true`];
  const began = Date.now();
  let exited = 0;
  const children: ChildProcess[] = [];
  // One line each exit code other than 0 came with, for the reader of the table.
  const why = new Map<string, string>();
  const done = Array.from({ length: count }, (_, i) => {
    const child = spawn(process.execPath, [bundle, ...lockArgs, '-n', name(i), '--every-tick', '--', ...command], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(child);
    let said = '';
    child.stderr?.on('data', (chunk: Buffer) => (said += chunk.toString()));
    return new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
      .then((code) => {
        if (code !== 0 && !why.has(String(code))) why.set(String(code), said.trim().split('\n')[0] ?? '');
        return code;
      })
      .finally(() => exited++);
  });
  let peak = 0;
  const sampling = setInterval(async () => {
    const [row] = (await server.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = 'test' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)).rows;
    peak = Math.max(peak, Number(row?.n));
  }, 250);
  // All that will run are running: each started or exited (refused, skipped), or 5 minutes.
  while (lineCount(started) + exited < count && Date.now() - began < 300_000) await sleep(200);
  const atOnce = lineCount(started);
  const memory = children.flatMap((c) => (c.exitCode === null && c.pid ? [privateDirtyKiB(c.pid)] : [])).filter((k): k is number => k !== null);
  const xacts = async () => Number((await server.query(`SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = 'test'`)).rows[0]?.n);
  const before = await xacts();
  const t0 = Date.now();
  const latencies = lockArgs.includes('lease') ? await probeRenewals(url, schema, HOLD_MS) : await sleep(HOLD_MS).then((): number[] => []);
  const statementsPerSecond = ((await xacts()) - before) / ((Date.now() - t0) / 1000);
  door.release();
  const codes = await Promise.all(done);
  for (const [code, line] of why) console.log(`${label}: exit ${code}, e.g. ${line}`);
  const tally = new Map<string, number>();
  for (const code of codes) tally.set(String(code), (tally.get(String(code)) ?? 0) + 1);
  const exits = [...tally].sort(([a], [b]) => Number(a) - Number(b)).map(([code, n]) => `${code}: ${n}`).join(', ');
  clearInterval(sampling);
  const [ran] = (await server.query(`SELECT count(*) AS n FROM "${schema}".runs WHERE status = 'succeeded' AND job LIKE $1`, [`${label}%`])).rows;
  return {
    ran: Number(ran?.n), startedAtOnce: atOnce, peakServerConnections: peak, statementsPerSecond,
    renewalP50: pct(latencies, 0.5), renewalP99: pct(latencies, 0.99),
    privateKiBPerJob: memory.length === 0 ? null : memory.reduce((a, b) => a + b, 0) / memory.length, seconds: (Date.now() - began) / 1000, exits,
  };
}

// Renewal latency under that load, through the same pooler: a lease of the bench's own,
// renewed by the statement the wrappers use, by 4 clients, each every 100 ms.
async function probeRenewals(url: string, schema: string, forMs: number): Promise<number[]> {
  const latencies: number[] = [];
  const until = Date.now() + forMs;
  await Promise.all(Array.from({ length: 4 }, async (_, i) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const [taken] = (await client.query(`SELECT "${schema}".take_lease($1, '1 hour')::text AS epoch, "${schema}".lease_key($1)::text AS key`, [`probe-${i}`])).rows;
      while (Date.now() < until) {
        const t = performance.now();
        await client.query(`UPDATE "${schema}".leases SET renewed_at = now(), expires_at = now() + make_interval(secs => $1::numeric / 1000)
                            WHERE lock_key = $2::bigint AND epoch = $3::bigint AND expires_at > now() RETURNING epoch`, [60_000, taken.key, taken.epoch]);
        latencies.push(performance.now() - t);
        await sleep(100);
      }
      await client.query(`DELETE FROM "${schema}".leases WHERE job = $1`, [`probe-${i}`]);
    } finally {
      await client.end();
    }
  }));
  return latencies;
}

// The server and the pooler of a fleet have machines of their own; here they share two
// cores with the 500 wrappers, each of which the scheduler serves as much as either. At
// nice -10 they stand in for their own machines (the postmaster's new backends inherit it).
function standApart(clusterName: string): void {
  const pids = (args: string[]) => {
    try {
      return execFileSync('pgrep', args, { encoding: 'utf8' }).split('\n').filter((p) => p !== '');
    } catch {
      return [];
    }
  };
  execFileSync('renice', ['-n', '-10', '-p', ...pids(['-f', clusterName]), ...pids(['-x', 'pgbouncer'])], { stdio: 'ignore' });
}

const ms = (x: number | null) => (x === null ? '-' : x.toFixed(1));
function table(rows: [string, Figures][]): string[] {
  return [
    '| case | ran | running at once | peak server connections | statements/s at the server | renewal p50 ms | renewal p99 ms | wrapper private MiB/job | seconds | exit codes |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...rows.map(([label, f]) => `| ${label} | ${f.ran} | ${f.startedAtOnce} | ${f.peakServerConnections} | ${f.statementsPerSecond?.toFixed(0) ?? '-'} | ${ms(f.renewalP50)} | ${ms(f.renewalP99)} | ${f.privateKiBPerJob === null ? '-' : (f.privateKiBPerJob / 1024).toFixed(1)} | ${f.seconds.toFixed(0)} | ${f.exits} |`),
  ];
}

async function main(): Promise<void> {
  const missing = clusterToolsMissing();
  if (missing) return console.log(`\nlease bench skipped: ${missing}`);
  const cluster: SmallCluster = await makeCluster('cg_i20_bench', 30);
  let pooler: Pgbouncer | null = null;
  const server = new pg.Client({ connectionString: cluster.url });
  try {
    pooler = await startPgbouncer({ poolMode: 'transaction', poolSize: 10, target: cluster.url, maxClientConn: Math.max(JOBS, SAME) + 50 });
    await server.connect();
    const schema = 'cronguard';
    const migrate = spawn(process.execPath, [bundle, 'migrate'], { env: { ...process.env, CRONGUARD_DATABASE_URL: cluster.url, CRONGUARD_SCHEMA: schema }, stdio: 'inherit' });
    await new Promise((resolve) => migrate.on('exit', resolve));
    const lease = ['-l', 'lease', '--lease-ttl', '30s'];
    const rows: [string, Figures][] = [];
    rows.push([`${JOBS} jobs, -l lease via PgBouncer (10 server connections), pooler and server on the wrappers' two cores`, await phase('lease-shared', JOBS, (i) => `lease-shared-${i}`, lease, pooler.url, server, schema)]);
    standApart(cluster.name);
    rows.push([`${JOBS} jobs, -l lease via PgBouncer (10 server connections)`, await phase('lease-many', JOBS, (i) => `lease-many-${i}`, lease, pooler.url, server, schema)]);
    rows.push([`${JOBS} jobs, -l postgres (direct, max_connections 30)`, await phase('advisory-many', JOBS, (i) => `advisory-many-${i}`, ['-l', 'postgres'], cluster.url, server, schema)]);
    rows.push([`${SAME} invocations of one job, -l lease via PgBouncer`, await phase('lease-one', SAME, () => 'lease-one', lease, pooler.url, server, schema)]);
    rows.push([`${SAME} invocations of one job, -l postgres (direct)`, await phase('advisory-one', SAME, () => 'advisory-one', ['-l', 'postgres'], cluster.url, server, schema)]);
    console.log(`\nlease bench: a server with max_connections = 30; PgBouncer in transaction pooling, default_pool_size = 10; each command waits until all that will run are running, then ${HOLD_MS / 1000} s more; after the first row, the server and the pooler run at nice -10, standing in for machines of their own`);
    for (const line of table(rows)) console.log(line);
    const pickup = await leasePickup(bundle, work, pooler.url, cluster.url, schema, { ...process.env, CRONGUARD_STATE_DIR: join(work, 'state'), CRONGUARD_LOCK_DIR: join(work, 'locks') });
    const met = pickup.median <= 1000 ? 'met' : 'MISSED';
    console.log(`\nrequest to command start, a -l lease --on-request --for loop via PgBouncer (polling, no LISTEN; ${pickup.samples} requests): median ${pickup.median} ms, p95 ${pickup.p95} ms (goal: median <= 1000: ${met})`);
  } finally {
    await server.end().catch(() => {});
    await pooler?.stop();
    cluster.drop();
  }
}

main().catch((error) => {
  console.error(`lease bench: ${(error as Error).message}`);
  process.exitCode = 1;
});
