import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, isAlive, lines, runs, sandbox, start, waitFor } from '../helpers.js';

describe('output after the command exits', () => {
  it('behind a slow reader, every byte reaches stdout and the run log', async () => {
    const box = sandbox();
    const done = box.path('done');
    const out = box.path('out');
    // 90 KB: the command can write it all into the pipes and exit. Its reader (think of
    // cron's mailer) starts reading only well after that.
    const script = `i=0; while [ $i -lt 1000 ]; do echo "line $i ................................................................................"; i=$((i+1)); done; echo last; touch ${done}`;
    const reader = `while [ ! -e ${done} ]; do sleep 0.05; done; sleep 0.5; cat > ${out}`;
    const command = `${process.execPath} ${BINARY} -n slow -- sh -c '${script}' | sh -c '${reader}'`;
    const child = spawn('bash', ['-o', 'pipefail', '-c', command], { env: box.env, stdio: 'ignore' });
    expect(await new Promise((resolve) => child.on('close', resolve))).toBe(0);
    const text = readFileSync(out, 'utf8');
    expect(text.split('\n')).toHaveLength(1002);
    expect(text.endsWith('last\n')).toBe(true);
    const [row] = runs(box.stateDir);
    expect(row?.output?.endsWith('last\n')).toBe(true);
    expect(row?.error).toBeNull();
  });

  it('does not wait for a background process of its group that keeps the output open, and says so', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const result = await cronguard(['-n', 'bg', '--', 'sh', '-c', `echo hi; sleep 60 & echo $! > ${pids}; exit 0`], box.env);
    const sleeper = Number(lines(pids)[0]);
    expect(isAlive(sleeper)).toBe(true);
    process.kill(sleeper);
    expect(result).toMatchObject({ code: 0, stdout: 'hi\n', stderr: '' });
    expect(runs(box.stateDir)[0]).toMatchObject({
      status: 'succeeded',
      error: `pid ${sleeper} (sleep) kept its output open after the command exited; not waited for`,
    });
  });

  it('nor for one that left the group (setsid) with the output', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const result = await cronguard(['-n', 'away', '--', 'sh', '-c', `setsid sh -c 'echo $$ > ${pids}; exec sleep 60' & exit 0`], box.env);
    await waitFor(() => lines(pids).length === 1, 'the escaped process to note its pid');
    const escaped = Number(lines(pids)[0]);
    expect(isAlive(escaped)).toBe(true);
    process.kill(escaped);
    expect(result.code).toBe(0);
    expect(runs(box.stateDir)[0]?.error).toBe('a process outside its group kept its output open after the command exited; not waited for');
  });

  it('starts its summary line on a line of its own after output without a final newline', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'mid', '--', 'sh', '-c', 'printf "partial error" >&2; exit 1'], box.env);
    expect(result.stderr).toMatch(/^partial error\ncronguard: mid: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
  });
});

describe('a signal before the command runs', () => {
  it('ends a wait for the lock: one line, 128+N, nothing run, nothing recorded for it', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('go');
    const holder = start(['-n', 'w', '--', 'sh', '-c', `echo start >> ${log}; while [ ! -e ${barrier} ]; do sleep 0.02; done`], box.env);
    await waitFor(() => lines(log).length === 1, 'the holder to start');
    const waiter = start(['-v', '-n', 'w', '-w', '10m', '--', 'touch', box.path('ran')], box.env);
    let said = '';
    waiter.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => /holding|run log in/.test(said), 'the waiter to start waiting');
    waiter.child.kill('SIGTERM');
    const result = await waiter.done;
    expect(result.code).toBe(143);
    expect(result.stderr).toMatch(/cronguard: w: stopped by SIGTERM before the command started; nothing ran\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
    await import('node:fs').then((fs) => fs.writeFileSync(barrier, ''));
    await holder.done;
    expect(runs(box.stateDir)).toHaveLength(1);
  });
});
