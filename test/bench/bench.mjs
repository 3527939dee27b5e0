// `npm run bench`: the wrapper's cost as a ratio to a bare `node -e 0` measured in the same
// run (commands alternate, so machine noise hits all of them alike), and peak memory.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import pg from 'pg';
import { bundleOptions } from '../../scripts/build.mjs';
import { mysqlMode } from './mysql-mode.mjs';
import { redisMode } from './redis-mode.mjs';
import { requestBench } from './requests.mjs';

const rounds = Number(process.env.BENCH_ROUNDS ?? 40);
const root = new URL('../..', import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'cronguard-bench-'));
const dirs = { CRONGUARD_STATE_DIR: join(work, 'state'), CRONGUARD_LOCK_DIR: join(work, 'locks') };
const env = { ...process.env, ...dirs };
// Start-up is timed twice: in the environment cron gives a job, which is where cronguard
// runs, and in the caller's. A variable like NODE_EXTRA_CA_CERTS, which Node reads and
// parses at every start (here the system's whole CA bundle, ~40 ms), weighs on the baseline
// `node -e 0` as much as on anything else, so that ratios in such an environment flatter.
const cronEnv = {
  HOME: process.env.HOME ?? '/',
  LOGNAME: process.env.LOGNAME ?? process.env.USER ?? 'root',
  PATH: `${dirname(process.execPath)}:/usr/bin:/bin`,
  SHELL: '/bin/sh',
  ...dirs,
};
const environments = [
  { label: "cron's environment (HOME, LOGNAME, PATH, SHELL)", env: cronEnv },
  { label: `the caller's environment (${Object.keys(process.env).length} variables${process.env.NODE_EXTRA_CA_CERTS ? ', NODE_EXTRA_CA_CERTS among them' : ''})`, env },
];
const launcher = join(root, 'bin/cronguard');
const bundle = join(root, 'dist/cronguard.cjs');

// The postgres mode runs against a local server: BENCH_DATABASE_URL, else the usual one.
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const pgReachable = spawnSync('node', ['-e', `require('net').connect(${new URL(databaseUrl).port || 5432}, '${new URL(databaseUrl).hostname}').on('connect', () => process.exit(0)).on('error', () => process.exit(1))`]).status === 0;
// A run log of its own, dropped at the end however the bench ends, so nothing is left in
// the server and no earlier bench's rows weigh on this one.
const schema = `cronguard_bench_${randomBytes(6).toString('hex')}`;

const cases = [
  { label: 'node -e 0 (baseline)', argv: ['node', '-e', '0'] },
  // Goals are ratios to the case's floor (issue 22): what cronguard adds to the least any
  // Node wrapper must do, in cron's environment.
  { label: 'cronguard -n b -- true', argv: [launcher, '-n', 'b', '--', 'true'], goal: 1.25, floor: 'spawn' },
  { label: 'node dist/cronguard.cjs -n b -- true', argv: ['node', bundle, '-n', 'b', '--', 'true'] },
  { label: 'cronguard --no-log -n b -- true', argv: [launcher, '--no-log', '-n', 'b', '--', 'true'], floor: 'spawn' },
  { label: 'flock -n FILE true', argv: ['flock', '-n', join(work, 'flock.lock'), 'true'] },
  // --scheduled loads croner (issue 24) and reads the stored schedule in the admission;
  // `* * * * *` is due once a minute, so most of these are the decision and a skip. The
  // second reads it in a zone: Node's first use of a time zone is a cost of its own.
  { label: "cronguard -n s --scheduled -- true (schedule '* * * * *')", argv: [launcher, '-n', 's', '--scheduled', '--', 'true'], floor: 'spawn' },
  { label: "cronguard -n z --scheduled -- true (schedule 'TZ=Europe/Warsaw * * * * *')", argv: [launcher, '-n', 'z', '--scheduled', '--', 'true'], floor: 'spawn' },
  // The floor for any Node wrapper: start, spawn, wait.
  { label: "node -e 'spawn true' (floor)", argv: ['node', '-e', "require('child_process').spawn('true').on('exit', () => {})"], id: 'spawn' },
];
for (const [job, spec] of [['s', '* * * * *'], ['z', 'TZ=Europe/Warsaw * * * * *']]) {
  if (spawnSync(launcher, ['schedule', job, '--cron', spec], { env: cronEnv }).status !== 0) throw new Error(`bench: cannot set the schedule of ${job}`);
}
const pgArgs = ['-n', 'b', '--db', databaseUrl, '--schema', schema, '--', 'true'];
// Its floor connects too, and waits for the server's new backend (test/bench/pg-floor.cjs).
const pgFloor = ['node', join(root, 'test/bench/pg-floor.cjs'), databaseUrl];
const pgFloorWorks = pgReachable && spawnSync(pgFloor[0], pgFloor.slice(1), { stdio: 'ignore' }).status === 0;
if (pgReachable) cases.push({ label: 'cronguard -n b --db URL -- true (postgres lock + log)', argv: [launcher, ...pgArgs], goal: 1.1, floor: pgFloorWorks ? 'pg' : undefined });
if (pgFloorWorks) cases.push({ label: 'node: connect, spawn true (postgres floor)', argv: pgFloor, id: 'pg' });
// Issue 22 stated the postgres floor as a Node program that runs `psql -c 'select 1'`, then
// spawns `true`: psql's own start weighs on it, so the goal is checked against the floor
// above, which speaks the protocol itself; this one is shown for comparison.
const psqlFloor = ['node', '-e', `require('child_process').spawn('psql', ['-Atqc', 'select 1', ${JSON.stringify(databaseUrl)}], { stdio: 'ignore' }).on('exit', (code) => code === 0 ? require('child_process').spawn('true') : process.exit(1))`];
if (pgFloorWorks && spawnSync(psqlFloor[0], psqlFloor.slice(1), { stdio: 'ignore' }).status === 0) {
  cases.push({ label: "node: psql -c 'select 1', spawn true (issue 22's postgres floor)", argv: psqlFloor });
}

const mysql = mysqlMode({ root, launcher, database: schema, env });
cases.push(...mysql.cases);
const redis = await redisMode({ root, launcher, work });
cases.push(...redis.cases);
// BENCH_ONLY=mysql: the MySQL mode's start-up (beside the baseline and the spawn floor) and
// request pickup alone, for a quick look without the rest of the bench.
const onlyMysql = process.env.BENCH_ONLY === 'mysql';
if (onlyMysql) cases.splice(0, cases.length, ...cases.filter((c) => c.mysql || c.id === 'spawn' || c.label.startsWith('node -e 0')));

// Signals are handled between samples (spawnSync holds the event loop), so the schema is
// still dropped after ^C or a TERM.
let interrupted = null;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => (interrupted ??= signal));
const tick = () => new Promise((resolve) => setImmediate(resolve));

// CPU time (user + system, ms) of the children this process has waited for, from
// /proc/self/stat: less moved by a busy machine than elapsed time, though only in clock
// ticks (10 ms), so it is reported as a mean over all rounds.
const tickMs = 1000 / Number(spawnSync('getconf', ['CLK_TCK']).stdout.toString().trim() || 100);
function childrenCpuMs() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // cutime and cstime are fields 16 and 17; the slice begins at field 3.
  return (Number(fields[13]) + Number(fields[14])) * tickMs;
}

function timeOnce(argv, cpu, environment = env) {
  if (interrupted) throw new Error(`interrupted by ${interrupted}`);
  const cpuBefore = childrenCpuMs();
  const start = process.hrtime.bigint();
  const result = spawnSync(argv[0], argv.slice(1), { env: environment, stdio: 'inherit' });
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`${argv.join(' ')} exited ${result.status}`);
  if (cpu) cpu.total += childrenCpuMs() - cpuBefore;
  return elapsed;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function peakRss(argv, stdio = 'inherit') {
  const child = spawn(argv[0], argv.slice(1), { env, stdio });
  let peak = 0;
  const poll = setInterval(() => {
    try {
      const kb = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (kb) peak = Math.max(peak, Number(kb[1]));
    } catch {
      // The process has just exited; the last reading stands.
    }
  }, 20);
  await new Promise((resolve) => child.on('exit', resolve));
  clearInterval(poll);
  return peak / 1024;
}

// The cases in one environment, alternating round by round; a table with each goal.
async function timeCases(environment) {
  for (const c of cases) for (let i = 0; i < 3; i++) timeOnce(c.argv, undefined, environment.env);
  const samples = cases.map(() => []);
  const cpu = cases.map(() => ({ total: 0 }));
  for (let r = 0; r < rounds; r++) {
    cases.forEach((c, i) => {
      samples[i].push(timeOnce(c.argv, cpu[i], environment.env));
    });
    await tick();
  }
  const base = median(samples[0]);
  const cpuBase = cpu[0].total / rounds;
  const lines = [
    `\nIn ${environment.label}:\n`,
    '| command | median ms | ratio to node -e 0 | ratio to its floor | goal | | ms over its floor | CPU ms (mean) | CPU ratio |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|',
  ];
  const medianOf = (id) => median(samples[cases.findIndex((c) => c.id === id)]);
  cases.forEach((c, i) => {
    const ratio = median(samples[i]) / base;
    const floorRatio = c.floor === undefined ? null : median(samples[i]) / medianOf(c.floor);
    const verdict = c.goal === undefined || floorRatio === null ? '' : floorRatio <= c.goal ? 'ok' : 'MISSED';
    const over = c.floor === undefined ? '' : (median(samples[i]) - medianOf(c.floor)).toFixed(1);
    const cpuMs = cpu[i].total / rounds;
    lines.push(
      `| ${c.label} | ${median(samples[i]).toFixed(1)} | ${ratio.toFixed(2)} | ${floorRatio === null ? '' : floorRatio.toFixed(2)} | ${c.goal === undefined ? '' : `<= ${c.goal.toFixed(2)}`} | ${verdict} | ${over} | ${cpuMs.toFixed(1)} | ${(cpuMs / cpuBase).toFixed(2)} |`,
    );
  });
  return lines;
}

async function bench() {
  if (onlyMysql) return mysqlOnly();
  const tables = [];
  for (const environment of environments) tables.push(...(await timeCases(environment)));
  const rss = await peakRss([launcher, '-n', 'rss', '--', 'sleep', '1']);
  // The least any Node wrapper of `sleep 1` holds, for scale (no goal of its own).
  const floorRss = await peakRss(['node', '-e', "require('child_process').spawn('sleep', ['1']).on('exit', () => {})"]);
  // -q holds a failing job's output and replays it: 1 GB must not need 1 GB of memory.
  const quietGb = await peakRss([launcher, '-q', '-n', 'big', '--', 'sh', '-c', 'head -c 1073741824 /dev/zero; exit 1'], 'ignore');

  const trips = pgReachable ? /(\d+) PostgreSQL round trips?/.exec(spawnSync(launcher, ['-v', ...pgArgs], { env }).stderr.toString())?.[1] ?? '?' : null;
  console.log(`\ncronguard bench: ${rounds} alternating rounds, node ${process.version}`);
  for (const line of tables) console.log(line);
  console.log('\n| memory | peak RSS MiB | goal | |');
  console.log('|---|---:|---:|---|');
  console.log(`| cronguard -n rss -- sleep 1 | ${rss.toFixed(1)} | <= 44 | ${rss <= 44 ? 'ok' : 'MISSED'} |`);
  console.log(`| node -e 'spawn sleep 1' (floor) | ${floorRss.toFixed(1)} | | |`);
  console.log(`| cronguard -q replaying 1 GB of a failed job's output | ${quietGb.toFixed(1)} | < 100 | ${quietGb < 100 ? 'ok' : 'MISSED'} |`);
  console.log(pgReachable ? `\npostgres mode: ${trips} round trips after connecting (${databaseUrl.replace(/:[^:@/]*@/, ':***@')})` : `\npostgres mode skipped: nothing answers at ${databaseUrl}`);
  console.log(mysql.trips());
  if (redis.note) console.log(redis.note);
  for (const line of await requestBench({ launcher, env, work, databaseUrl, schema, pgReachable, mysqlUrl: mysql.url, mysqlReachable: mysql.reachable })) console.log(line);
  if (process.env.BENCH_SCALE !== '0') await scaleBench();
  // BENCH_LEASE=0 leaves it out (it takes minutes); BENCH_LEASE_JOBS, BENCH_LEASE_SAME size it.
  if (process.env.BENCH_LEASE !== '0') await leaseBench();
}

async function mysqlOnly() {
  if (!mysql.reachable) throw new Error(`BENCH_ONLY=mysql: nothing answers at ${mysql.url}`);
  const tables = [];
  for (const environment of environments) tables.push(...(await timeCases(environment)));
  console.log(`\ncronguard bench (MySQL mode only): ${rounds} alternating rounds, node ${process.version}`);
  for (const line of tables) console.log(line);
  console.log(mysql.trips());
  for (const line of await requestBench({ launcher, env, work, schema, mysqlUrl: mysql.url, mysqlReachable: true, only: ['mysql'] })) console.log(line);
}

// The lease bench makes a server and a pooler of its own (test/bench/lease-bench.ts): without
// Debian's PgBouncer (which .ci/run installs), it is left out and says so.
async function leaseBench() {
  if (!existsSync('/usr/sbin/pgbouncer')) {
    console.log('lease bench: left out, no /usr/sbin/pgbouncer (apt-get install pgbouncer)');
    return;
  }
  const script = join(root, 'node_modules/.cache/cronguard-bench/lease.cjs');
  // vitest only behind a dynamic import the bench never takes (test/pgbouncer.ts).
  await build({ ...bundleOptions, entryPoints: [join(root, 'test/bench/lease-bench.ts')], outfile: script, external: [...bundleOptions.external, 'vitest'] });
  const result = spawnSync('node', [script, work, bundle], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) throw new Error(`lease bench exited ${result.status}`);
}

// The scale bench runs the stores' own code, bundled as the CLI is, in a process of its own.
async function scaleBench() {
  // Inside the tree, so that its requires find node_modules.
  const script = join(root, 'node_modules/.cache/cronguard-bench/scale.cjs');
  await build({ ...bundleOptions, entryPoints: [join(root, 'test/bench/scale.ts')], outfile: script });
  const scaleSchema = `${schema}_scale`;
  const args = [script, work, launcher, ...(pgReachable ? [databaseUrl, scaleSchema] : [])];
  try {
    const result = spawnSync('node', args, { env, stdio: ['ignore', 'inherit', 'inherit'] });
    if (result.status !== 0) throw new Error(`scale bench exited ${result.status}`);
  } finally {
    if (pgReachable) await dropSchema(scaleSchema);
  }
}

async function dropSchema(name = schema) {
  const client = new pg.Client({ connectionString: databaseUrl });
  try {
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${client.escapeIdentifier(name)} CASCADE`);
  } catch (error) {
    console.error(`bench: could not drop schema ${name}: ${error.message}`);
    process.exitCode = 1;
  } finally {
    await client.end().catch(() => {});
  }
}

try {
  await bench();
} catch (error) {
  console.error(`bench: ${error.message}`);
  process.exitCode = 1;
} finally {
  await redis.stop();
  rmSync(work, { recursive: true, force: true });
  if (pgReachable && !onlyMysql) await dropSchema();
  await mysql.drop();
  if (interrupted) process.exitCode = 128 + constants.signals[interrupted];
}
