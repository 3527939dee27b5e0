import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { processStart } from '../../src/util/process-id.js';
import { cronguard, runs, sandbox } from '../helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// A `running` row as a SIGKILLed wrapper leaves it, with the pid it had: here a pid that is
// alive again (this test process), as when a container reuses pids.
function leftBehind(stateDir: string, fields: { pid: number; wrapper_start: string | null; lock_backend: string; lock_key: string | null }) {
  const db = new Database(join(stateDir, 'cronguard.db'));
  db.prepare(
    `INSERT INTO runs (job, status, trigger, attempt, host, pid, command, started_at, wrapper_start, lock_backend, lock_key, run_key)
     VALUES ('j', 'running', 'cron', 1, @host, @pid, 'old', '2026-01-01T00:00:00.000Z', @wrapper_start, @lock_backend, @lock_key, @key)`,
  ).run({ ...fields, host: execFileSync('hostname').toString().trim(), key: `left-${Math.random()}` });
  db.close();
}

describe('a running row whose wrapper vanished', () => {
  it('is abandoned once its lock is ours, though its pid lives again', async () => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    leftBehind(box.stateDir, { pid: process.pid, wrapper_start: processStart(process.pid), lock_backend: 'flock', lock_key: `${box.lockDir}/j.lock` });
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'abandoned', 'succeeded']);
  });

  it('under another lock, is abandoned when its pid now belongs to another process', async () => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    leftBehind(box.stateDir, { pid: process.pid, wrapper_start: 'another-boot/123', lock_backend: 'none', lock_key: null });
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'abandoned', 'succeeded']);
  });

  it('under another lock, stays running while its wrapper really lives', async () => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    leftBehind(box.stateDir, { pid: process.pid, wrapper_start: processStart(process.pid), lock_backend: 'none', lock_key: null });
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'running', 'succeeded']);
  });
});
