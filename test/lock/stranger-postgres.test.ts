import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { asNobody, cronguard, lines, waitFor } from '../helpers.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// A local lock with the fleet's run log (-l flock --db): a stranger holding the lock file is
// reported and noted in the shared log, where `check` on any host sees it.
const root = process.geteuid?.() === 0;

describe.skipIf(!root)('a stranger holding a local lock, with a PostgreSQL run log', () => {
  it('is reported in one line, noted in the jobs table, and checked as WARNING until a run starts', async () => {
    const box = pgSandbox();
    const job = box.job('nightly');
    chmodSync(box.dir, 0o755);
    mkdirSync(box.lockDir, { mode: 0o755 });
    const lock = join(box.lockDir, `${job}.lock`);
    writeFileSync(lock, '', { mode: 0o644 });
    mkdirSync(box.path('marks'), { mode: 0o777 });
    chmodSync(box.path('marks'), 0o777);
    const ready = box.path('marks/held');
    const holder = spawn(asNobody[0] as string, [...asNobody.slice(1), 'flock', '-n', '-s', lock, 'sh', '-c', `touch ${ready}; exec sleep 1000`], {
      stdio: 'ignore',
      detached: true,
    });
    try {
      await waitFor(() => existsSync(ready) || holder.exitCode !== null, 'nobody to take the lock');
      const skipped = await cronguard(['-l', 'flock', '-n', job, '--', 'sh', '-c', `echo ran >> ${box.path('runs')}`], box.env);
      expect(skipped.code).toBe(0);
      // A lock directory the user named: its loose lock file is reported, not changed.
      expect(skipped.stderr).toBe(
        `cronguard: lock file ${lock} belongs to user root (uid 0) and any user can open it (mode 644), so anyone could hold this job's lock and make it skip; its owner should chmod o-rw it\n` +
          `cronguard: ${job} did not run: its lock (flock ${lock}) is held by user nobody (uid 65534), pid ${holder.pid}, who does not share this job; stop that process\n`,
      );
      expect(lines(box.path('runs'))).toEqual([]);
      expect(await pgRuns(box.schema)).toEqual([]);
      const [row] = await sql<{ blocked_by: string; blocked_at: Date }>(`SELECT blocked_by, blocked_at FROM "${box.schema}".jobs WHERE name = $1`, [job]);
      expect(row?.blocked_by).toBe(`user nobody (uid 65534), pid ${holder.pid}`);
      const check = await cronguard(['check', job, '--max-age', '1h'], box.env);
      expect(check.code).toBe(1);
      expect(check.stdout).toMatch(new RegExp(`^WARNING - ${job} did not run .* ago: its lock was held by user nobody \\(uid 65534\\), pid \\d+, who does not share the job; has never succeeded\\n$`));
    } finally {
      process.kill(-(holder.pid as number), 'SIGKILL');
    }
    await waitFor(async () => (await cronguard(['-l', 'flock', '-n', job, '--', 'sh', '-c', `echo ran >> ${box.path('runs')}`], box.env)).code === 0 && lines(box.path('runs')).length > 0, 'a run once the stranger let go');
    expect((await cronguard(['check', job, '--max-age', '1h'], box.env)).stdout).toMatch(/^OK - /);
  });
});
