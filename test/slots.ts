import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { fixture, lines, type Started, start, waitFor } from './helpers.js';

// `count` copies of job `job` run with --max-running `n`, each holding the first slot free
// when it started (one after the other) until release(); what the views show as "2 of 3".
export async function holdSlots(job: string, n: number, count: number, env: NodeJS.ProcessEnv, dir: string, extra: readonly string[] = []) {
  const copies: Started[] = [];
  // Files of their own: more copies of the job may be started later.
  const tag = `${dir}/${job}-${randomBytes(3).toString('hex')}`;
  const barrier = `${tag}.go`;
  for (let i = 0; i < count; i++) {
    const log = `${tag}-${i}`;
    copies.push(start(['-n', job, '--max-running', String(n), ...extra, '--', fixture('hold.sh'), log, barrier], env));
    // One at a time: each takes the first slot free when it starts.
    await waitFor(() => lines(log).length > 0, `copy ${i} of ${job} to start`);
  }
  return {
    copies,
    release: async () => {
      writeFileSync(barrier, '');
      return Promise.all(copies.map((c) => c.done));
    },
  };
}
