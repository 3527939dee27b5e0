// Part of the scale bench: `cronguard serve` over the seeded log of 1,000 jobs and 1,000,000
// runs: the median server time (its Server-Timing header) of the jobs page and of a job's
// page, and the server's resident memory, idle after start and after serving them.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const SAMPLES = 15;
const GOAL_MS = 200;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
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
    return [
      ...rows.map(([what, { ms, kb }]) => `| ${label} | ${what}, ${kb.toFixed(0)} KiB | ${ms.toFixed(1)} | ${ms < GOAL_MS ? '' : `MISSED (goal < ${GOAL_MS} ms)`} |`),
      `| ${label} | serve: resident memory, idle after start / after these pages (MiB) | ${idle.toFixed(1)} / ${busy.toFixed(1)} | |`,
    ];
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}
