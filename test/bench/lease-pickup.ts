// How soon a waiting `-l lease --on-request --for` loop behind a transaction pooler starts a
// request's run (part of the lease bench): no LISTEN through such a pooler, so the loop
// polls (once a second), and the goal is a median pickup of at most 1 s. The
// request is recorded the way a web application does, straight to the server; the command
// notes when it started.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

const SAMPLES = 20;

export interface Pickup {
  readonly median: number;
  readonly p95: number;
  readonly samples: number;
}

const marksIn = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : []);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function leasePickup(bundle: string, work: string, pooledUrl: string, serverUrl: string, schema: string, env: NodeJS.ProcessEnv): Promise<Pickup> {
  const job = 'lease-pickup';
  const marks = join(work, `${job}.marks`);
  const loop = spawn(process.execPath, [bundle, '-l', 'lease', '-n', job, '--on-request', '--for', '10m', '--', 'sh', '-c', `date +%s%3N >> ${marks}`], {
    env: { ...env, CRONGUARD_DATABASE_URL: pooledUrl, CRONGUARD_SCHEMA: schema },
    stdio: 'ignore',
  });
  const web = new pg.Client({ connectionString: serverUrl });
  await web.connect();
  const samples: number[] = [];
  try {
    // The loop is waiting once it holds its lease.
    while ((await web.query(`SELECT 1 FROM "${schema}".leases WHERE job = $1`, [job])).rows.length === 0) {
      if (loop.exitCode !== null) throw new Error(`the lease loop exited ${loop.exitCode}`);
      await sleep(50);
    }
    for (let i = 0; i < SAMPLES; i++) {
      await web.query(`SELECT "${schema}".request($1)`, [job]);
      const at = Date.now();
      while (marksIn(marks).length <= i) {
        if (loop.exitCode !== null) throw new Error(`the lease loop exited ${loop.exitCode}`);
        await sleep(5);
      }
      samples.push((marksIn(marks)[i] as number) - at);
      // Requests at random moments of the loop's polling cycle, not in step with it.
      await sleep(Math.random() * 1000);
    }
  } finally {
    if (loop.exitCode === null) {
      const exited = new Promise((r) => loop.once('exit', r));
      loop.kill('SIGTERM');
      await exited;
    }
    await web.end();
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number;
  return { median: at(0.5), p95: at(0.95), samples: samples.length };
}
