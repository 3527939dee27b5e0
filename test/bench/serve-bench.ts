// Part of the scale bench: `cronguard serve` over the seeded log of 1,000 jobs and 1,000,000
// runs: the median server time (its Server-Timing header) of the jobs page and of a job's
// page, and the server's resident memory, idle after start, after serving them, and after
// 10,000 page loads more.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const SAMPLES = 15;
const GOAL_MS = 200;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

const SOAK_LOADS = 10_000;
// Its memory after the first fifth of them (caches, a heap grown to its working size) and at
// the end: flat, give or take the garbage collector's timing.
const SOAK_WARM = 2000;
const SOAK_GROWTH_MIB = 32;

// 10,000 page loads, four at a time, as browsers would make them: job pages over many jobs,
// a run's page, the API, now and then the whole jobs page; the server's memory after 2,000
// and after all of them (a server that kept what it read would grow with every load).
async function soak(url: string, pid: number): Promise<[number, number]> {
  let warm = 0;
  let next = 0;
  const path = (i: number) =>
    i % 100 === 0 ? '/' : i % 4 === 1 ? '/api/jobs/job-500/runs?limit=100' : i % 4 === 2 ? `/runs/${1 + (i % 1000)}` : `/jobs/job-${i % 1000}`;
  const worker = async () => {
    for (let i = next++; i < SOAK_LOADS; i = next++) {
      if (i === SOAK_WARM) warm = rssMiB(pid);
      const response = await fetch(`${url}${path(i)}`);
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`GET ${path(i)}: ${response.status}`);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return [warm, rssMiB(pid)];
}

export async function serveBench(label: string, launcher: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const child = spawn(launcher, ['serve', '--listen', '127.0.0.1:0', '-q'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      const match = /listening on (http:\/\/[^\s;]+?)\/?[\s;]/.exec(stderr);
      if (match) resolve(match[1] as string);
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  try {
    // Idle: started, nothing asked of it yet (a moment for start-up garbage to settle).
    await new Promise((r) => setTimeout(r, 1000));
    const idle = rssMiB(child.pid as number);
    const time = async (path: string) => {
      const samples: number[] = [];
      let bytes = 0;
      for (let i = 0; i < SAMPLES; i++) {
        const response = await fetch(`${url}${path}`);
        bytes = (await response.arrayBuffer()).byteLength;
        if (response.status !== 200) throw new Error(`GET ${path}: ${response.status}`);
        samples.push(Number(/dur=([\d.]+)/.exec(response.headers.get('server-timing') ?? '')?.[1]));
      }
      return { ms: median(samples), kb: bytes / 1024 };
    };
    const rows: [string, { ms: number; kb: number }][] = [
      ['serve: jobs page (1,000 jobs)', await time('/')],
      ['serve: a job page (runs, requests)', await time('/jobs/job-500')],
      ['serve: GET /api/jobs', await time('/api/jobs')],
    ];
    const busy = rssMiB(child.pid as number);
    const [warm, soaked] = await soak(url, child.pid as number);
    return [
      ...rows.map(([what, { ms, kb }]) => `| ${label} | ${what}, ${kb.toFixed(0)} KiB | ${ms.toFixed(1)} | ${ms < GOAL_MS ? '' : `MISSED (goal < ${GOAL_MS} ms)`} |`),
      `| ${label} | serve: resident memory, idle after start / after these pages (MiB) | ${idle.toFixed(1)} / ${busy.toFixed(1)} | |`,
      `| ${label} | serve: resident memory after ${SOAK_WARM.toLocaleString('en')} / ${SOAK_LOADS.toLocaleString('en')} more page loads (MiB) | ${warm.toFixed(1)} / ${soaked.toFixed(1)} | ${soaked - warm < SOAK_GROWTH_MIB ? '' : `MISSED (goal: < ${SOAK_GROWTH_MIB} MiB more)`} |`,
    ];
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}
