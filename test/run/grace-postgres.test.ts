import { describe, expect, it } from 'vitest';
import { fixture, isAlive, lines, start, waitFor } from '../helpers.js';
import { backendOf, pgRuns, pgSandbox, sql } from '../pg-helpers.js';

describe('a lost postgres lock', () => {
  it('gives the command a short grace of its own, whatever --kill-after says: another instance may start', async () => {
    const box = pgSandbox();
    const job = box.job('fence');
    const log = box.path('record');
    // Never released: only SIGKILL ends it, and --kill-after would wait an hour.
    const run = start(['-n', job, '--kill-after', '1h', '--', fixture('stubborn.sh'), log, box.path('never')], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const pid = Number(lines(log)[0]?.split(' ')[1]);
    await sql('SELECT pg_terminate_backend($1)', [await backendOf(job)]);
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(lines(log)).toContain('term');
    expect(isAlive(pid)).toBe(false);
    expect((await pgRuns(box.schema))[0]).toMatchObject({ status: 'lock_lost', signal: 'SIGKILL' });
  });
});
