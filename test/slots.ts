import { writeFileSync } from 'node:fs';
import { fixture, lines, type Started, start, waitFor } from './helpers.js';

// `count` copies of job `job` run with --max-running `n`, each holding a slot (0, 1, ...,
// in the order they started) until release(); the runs the status views show as "2 of 3".
export async function holdSlots(job: string, n: number, count: number, env: NodeJS.ProcessEnv, dir: string, extra: readonly string[] = []) {
  const copies: Started[] = [];
  const barrier = `${dir}/${job}-slots.go`;
  for (let i = 0; i < count; i++) {
    const log = `${dir}/${job}-slot-${i}`;
    copies.push(start(['-n', job, '--max-running', String(n), ...extra, '--', fixture('hold.sh'), log, barrier], env));
    // One at a time, so copy i holds slot i.
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
