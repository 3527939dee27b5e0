// Issue 8's figures for `npm run bench`: how soon a waiting loop starts a request's run
// (from the request being recorded to the command starting), on each store, and how long
// one invocation takes to claim and batch 1,000 pending requests.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import pg from 'pg';

const SAMPLES = Number(process.env.BENCH_REQUESTS ?? 30);

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

// Records a request the way a web application does, and returns when it did (ms).
function requester(store, { env, databaseUrl, schema, mysqlUrl }) {
  if (store === 'mysql') return mysqlRequester(mysqlUrl, schema);
  if (store === 'sqlite') {
    const Database = createRequire(import.meta.url)('better-sqlite3');
    const db = new Database(join(env.CRONGUARD_STATE_DIR, 'cronguard.db'));
    return {
      request: async (job) => {
        db.prepare('INSERT INTO requests (job) VALUES (?)').run(job);
        return Date.now();
      },
      close: async () => db.close(),
    };
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  const ready = client.connect();
  return {
    request: async (job) => {
      await ready;
      await client.query(`SELECT ${client.escapeIdentifier(schema)}.request($1)`, [job]);
      return Date.now();
    },
    close: () => client.end(),
  };
}

// The docs/fleet-mysql.md's plain INSERT, as a PHP application sends it (the loop polls: no NOTIFY).
function mysqlRequester(url, database) {
  const u = new URL(url);
  const ready = import('mysql2/promise').then(({ createConnection }) =>
    createConnection({ host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) || undefined }),
  );
  return {
    request: async (job) => {
      await (await ready).query(`INSERT INTO \`${database}\`.requests (job, args, requested_by) VALUES (?, JSON_ARRAY(), 'php')`, [job]);
      return Date.now();
    },
    close: async () => (await ready).end(),
  };
}

async function latency(store, options) {
  const { launcher, env, work } = options;
  const url = store === 'mysql' ? options.mysqlUrl : options.databaseUrl;
  const runEnv = store === 'sqlite' ? env : { ...env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: options.schema };
  const job = `latency-${store}`;
  const marks = join(work, `${job}.marks`);
  spawnSync(launcher, ['migrate'], { env: runEnv });
  const loop = spawn(launcher, ['-n', job, '--on-request', '--for', '10m', '--', 'sh', '-c', `date +%s%3N >> ${marks}`], { env: runEnv, stdio: 'ignore' });
  const web = requester(store, { env, databaseUrl: options.databaseUrl, schema: options.schema, mysqlUrl: options.mysqlUrl });
  const seen = () => (existsSync(marks) ? readFileSync(marks, 'utf8').trim().split('\n').filter(Boolean).map(Number) : []);
  const samples = [];
  try {
    for (let i = 0; i < SAMPLES; i++) {
      const at = await web.request(job);
      while (seen().length <= i) await new Promise((r) => setTimeout(r, 5));
      samples.push(seen()[i] - at);
    }
  } finally {
    // Its end is waited for: a loop still stopping could recreate a log dropped meanwhile.
    const exited = new Promise((resolve) => loop.on('exit', resolve));
    loop.kill('SIGTERM');
    await exited;
    await web.close();
  }
  return samples;
}

// One invocation claiming 1,000 pending requests with arguments for one --batch run.
async function batch(options) {
  const { launcher, env } = options;
  const job = 'batch-1000';
  spawnSync(launcher, ['migrate'], { env });
  const Database = createRequire(import.meta.url)('better-sqlite3');
  const db = new Database(join(env.CRONGUARD_STATE_DIR, 'cronguard.db'));
  const insert = db.prepare('INSERT INTO requests (job, args) VALUES (?, ?)');
  db.transaction(() => {
    for (let i = 0; i < 1000; i++) insert.run(job, JSON.stringify([`target-${i}`]));
  })();
  db.close();
  const started = process.hrtime.bigint();
  const result = spawnSync(launcher, ['-n', job, '--on-request', '--batch', '--', 'true'], { env });
  if (result.status !== 0) throw new Error(`the batch run exited ${result.status}: ${result.stderr}`);
  return Number(process.hrtime.bigint() - started) / 1e6;
}

export async function requestBench(options) {
  const lines = ['', '| request to command start (waiting --on-request --for loop) | median ms | p95 ms | goal |', '|---|---:|---:|---|'];
  const stores = options.only ?? ['sqlite', ...(options.pgReachable ? ['postgres'] : []), ...(options.mysqlReachable ? ['mysql'] : [])];
  for (const store of stores) {
    const samples = await latency(store, options);
    const [median, p95] = [percentile(samples, 50), percentile(samples, 95)];
    // MySQL has no NOTIFY: its loops poll (issue 21's goal is the looser one).
    const [goalMedian, goalP95] = store === 'mysql' ? [150, 400] : [100, 250];
    const verdict = median <= goalMedian && p95 <= goalP95 ? 'met' : 'MISSED';
    lines.push(`| ${store} (${samples.length} requests) | ${median} | ${p95} | <= ${goalMedian} / <= ${goalP95}: ${verdict} |`);
  }
  if (options.only) return lines;
  lines.push('', `one invocation claiming and batching 1,000 pending requests (SQLite): ${(await batch(options)).toFixed(0)} ms`);
  return lines;
}
