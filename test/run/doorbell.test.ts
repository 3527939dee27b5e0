import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { processStart } from '../../src/util/process-id.js';
import { cronguard, isAlive, runs, sandbox, start, waitFor } from '../helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// The doorbell (`cronguard stop` and --replace on this host ring the wrapper: "read your
// stop request") must never be what ends a wrapper: rung before it listens, as it exits, or
// with no request behind it, cron must still see the command's own exit code (issue 35,
// item 12: SIGUSR2, the old doorbell, killed wrappers rung as they exited: exit 140).

// Rings `pid` with `signal` every few milliseconds until the process is gone (without a
// pause, the signals alone would keep a busy machine's wrapper from getting on).
function ringUntilGone(pid: number, signal: string): Promise<void> {
  return new Promise((resolve) => {
    spawn('sh', ['-c', `while kill -${signal} ${pid} 2>/dev/null; do sleep 0.005; done`], { stdio: 'ignore' }).on('exit', () => resolve());
  });
}

describe('the stop doorbell', () => {
  it('ends no process that does not listen for it, as a wrapper starting up or exiting does not', async () => {
    const box = sandbox();
    expect((await cronguard(['-n', 'seed', '--', 'true'], box.env)).code).toBe(0);
    // A running row whose wrapper is a process that answers no doorbell: a stand-in for a
    // wrapper between Node's start and its handler, or after Node let go of it at exit.
    const deaf = spawn('sleep', ['60'], { stdio: 'ignore' });
    const pid = deaf.pid as number;
    const db = new Database(join(box.stateDir, 'cronguard.db'));
    try {
      db.prepare("INSERT INTO runs (job, status, trigger, host, pid, command, started_at, run_key, wrapper_start) VALUES ('bell', 'running', 'cron', ?, ?, 'sleep 60', ?, 'bell-1', ?)")
        .run(hostname(), pid, new Date().toISOString(), processStart(pid));
    } finally {
      db.close();
    }
    const stopped = await cronguard(['stop', 'bell', '--wait', '0'], box.env);
    expect(stopped.code).toBe(0);
    expect(isAlive(pid)).toBe(true);
    deaf.kill('SIGKILL');
  });

  it('rung again and again from before the wrapper listens to after it exits, never ends it: exit 3, recorded failed', async () => {
    const box = sandbox();
    for (let i = 0; i < 5; i++) {
      const run = start(['-n', 'rung', '--', 'sh', '-c', 'sleep 0.2; exit 3'], box.env);
      const ringing = ringUntilGone(run.child.pid as number, 'URG');
      const ended = await run.done;
      await ringing;
      expect(ended.code).toBe(3);
    }
    expect(runs(box.stateDir).map((r) => [r.status, r.exit_code])).toEqual(Array(5).fill(['failed', 3]));
  });

  it('a stop racing the run\'s natural end leaves the wrapper exiting as the run was recorded, never by the doorbell', async () => {
    const box = sandbox();
    for (let i = 0; i < 8; i++) {
      const ended = box.path(`ended-${i}`);
      // The command exits the moment it has said it is ending: the stop comes as it ends.
      const run = start(['-n', 'race', '--', 'sh', '-c', `touch ${ended}; exit 3`], box.env);
      await waitFor(() => existsSync(ended), 'the command to reach its end');
      const stopped = await cronguard(['stop', 'race', '--wait', '30s'], box.env);
      const finished = await run.done;
      const row = runs(box.stateDir).at(-1);
      // Either the stop came first (killed, 143) or the end did (failed, 3). In the second
      // case stop either found the run over (2, nothing to stop) or asked it while it still ran
      // and saw it end (0: it ended within --wait); CI on Node 24 met the second.
      if (row?.status === 'killed') expect(finished.code).toBe(143);
      else {
        expect([row?.status, finished.code]).toEqual(['failed', 3]);
        expect([0, 2]).toContain(stopped.code);
      }
    }
  });

  it('SIGUSR2, the doorbell of earlier versions, is answered while the run lives: the run goes on to its own end', async () => {
    const box = sandbox();
    const go = box.path('go');
    const run = start(['-n', 'old', '--', 'sh', '-c', `touch ${go}; sleep 0.5; exit 4`], box.env);
    await waitFor(() => existsSync(go), 'the command to start');
    for (let i = 0; i < 20; i++) process.kill(run.child.pid as number, 'SIGUSR2');
    expect((await run.done).code).toBe(4);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['failed']);
  });
});
