import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, isAlive, lines, release, runs, sandbox, start, waitFor } from '../helpers.js';

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

  it('with --timeout, a command that ended in time has all of its output delivered, however long the reader takes', async () => {
    // The reader takes 100 KB, then nothing until the command is done and the timeout has
    // passed: the rest of the output, some of it still in the command's pipe, comes after.
    // That the command ends in time is this test's premise, not its subject: on a machine
    // busy enough to make it miss 5 s, it is tried again with a longer timeout, and the
    // reader is let go once the run has ended, so that a miss ends the attempt.
    const attempt = async (seconds: number) => {
      const box = sandbox();
      const [done, out, stop] = [box.path('done'), box.path('out'), box.path('stop')];
      const reader = `dd bs=100000 count=1 iflag=fullblock status=none > ${out}; while [ ! -e ${done} ] && [ ! -e ${stop} ]; do sleep 0.05; done; [ -e ${done} ] && sleep ${seconds + 0.5}; cat >> ${out}`;
      const command = `${process.execPath} ${BINARY} -n intime -t ${seconds}s -- sh -c "head -c 200000 /dev/zero | tr '\\0' a; touch ${done}" | sh -c '${reader}'`;
      const child = spawn('bash', ['-o', 'pipefail', '-c', command], { env: box.env, stdio: 'ignore' });
      const closed = new Promise((resolve) => child.on('close', resolve));
      const timedOut = () => {
        try {
          return runs(box.stateDir)[0]?.status === 'timed_out';
        } catch {
          return false; // the run log may exist before its tables do
        }
      };
      await waitFor(() => existsSync(done) || timedOut(), 'the command to end or be timed out', 300_000);
      release(stop);
      return { box, out, code: await closed };
    };
    let tried = await attempt(5);
    if (runs(tried.box.stateDir)[0]?.status === 'timed_out') tried = await attempt(30);
    expect(tried.code).toBe(0);
    expect(readFileSync(tried.out, 'utf8')).toBe('a'.repeat(200000));
    expect(runs(tried.box.stateDir)[0]).toMatchObject({ status: 'succeeded', error: null });
  }, 600_000);

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

  it('nor for one that never falls silent (a daemon logging away): the run ends, naming it', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const writer = `(while [ -d ${box.dir} ]; do echo tick; sleep 0.02; done) & echo $! > ${pids}; exit 0`;
    const run = start(['-n', 'chatty', '--', 'sh', '-c', writer], box.env);
    let ended = false;
    void run.done.then(() => (ended = true));
    await waitFor(() => ended, 'cronguard to end although the writer goes on');
    const chatty = Number(lines(pids)[0]);
    if (isAlive(chatty)) process.kill(chatty);
    expect((await run.done).code).toBe(0);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'succeeded' });
    const error = runs(box.stateDir)[0]?.error;
    expect(error).toContain(`pid ${chatty} (sh)`);
    expect(error).toMatch(/kept its output open after the command exited; not waited for$/);
  });

  it('nor for one that left the group (setsid) and never falls silent', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const writer = `setsid sh -c 'echo $$ > ${pids}; while [ -d ${box.dir} ]; do echo tick; sleep 0.02; done' & exit 0`;
    const run = start(['-n', 'away', '--', 'sh', '-c', writer], box.env);
    let ended = false;
    void run.done.then(() => (ended = true));
    await waitFor(() => ended, 'cronguard to end although the writer goes on');
    const escaped = Number(lines(pids)[0]);
    if (isAlive(escaped)) process.kill(escaped);
    expect((await run.done).code).toBe(0);
    expect(runs(box.stateDir)[0]?.error).toBe('a process outside its group kept its output open after the command exited; not waited for');
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

  // Issue 35, item 13: the pipes of a group that --timeout or stop killed end a moment after
  // its leader's exit; a silent command's "idle" counted from its start, so the note came
  // at the first look, before the pipes were seen to end.
  it('is never said of a silent command stopped by --timeout or stop: its pipes end with its group', async () => {
    const box = sandbox();
    for (let i = 0; i < 6; i++) {
      const timedOut = await cronguard(['-n', 'silent', '-t', '1s', '--', 'sh', '-c', 'sleep 30; :'], box.env);
      expect(timedOut.code).toBe(124);
    }
    for (let i = 0; i < 3; i++) {
      const go = box.path(`go-${i}`);
      const run = start(['-n', 'stopped', '--', 'sh', '-c', `touch ${go}; sleep 30; :`], box.env);
      await waitFor(() => existsSync(go), 'the command to start');
      expect((await cronguard(['stop', 'stopped'], box.env)).code).toBe(0);
      expect((await run.done).code).toBe(143);
    }
    const errors = runs(box.stateDir).map((r) => r.error ?? '');
    expect(errors).toHaveLength(9);
    for (const error of errors) expect(error).not.toMatch(/kept its output open/);
  });

  it('with stdout and stderr on one slow pipe (as cron has them), the summary line comes after all of the output', async () => {
    const box = sandbox();
    const done = box.path('done');
    const out = box.path('out');
    // 100 KB that the command writes and exits on: more than the pipe to the reader holds,
    // so some of it is still queued inside cronguard when the command is gone.
    const script = `head -c 100000 /dev/zero | tr '\\0' a; touch ${done}; exit 1`;
    const reader = `while [ ! -e ${done} ] && [ -d ${box.dir} ]; do sleep 0.05; done; sleep 1; cat > ${out}`;
    const command = `${process.execPath} ${BINARY} -n shared -- sh -c "${script}" 2>&1 | sh -c '${reader}'`;
    const child = spawn('bash', ['-c', command], { env: box.env, stdio: 'ignore' });
    await new Promise((resolve) => child.on('close', resolve));
    expect(readFileSync(out, 'utf8')).toMatch(/^a{100000}\ncronguard: shared: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
  });

  it.each([
    ['its output', [], 'head -c 100000 /dev/zero; exit 0', 0, 'succeeded'],
    ['a -q replay', ['-q'], 'head -c 10000000 /dev/zero; exit 3', 3, 'failed'],
  ])('a signal while %s waits for a reader that does not read ends the wait: the run keeps its outcome', async (_what, flags, script, code, status) => {
    const box = sandbox();
    const gone = box.path('gone');
    const exited = box.path('exited');
    // It gives up once the sandbox is gone, should the test fail before releasing it.
    const reader = `while [ ! -e ${gone} ] && [ -d ${box.dir} ]; do sleep 0.05; done; cat > /dev/null`;
    const command = `${process.execPath} ${BINARY} -n stuck ${flags.join(' ')} -- sh -c '${script}' | sh -c '${reader}'; echo \${PIPESTATUS[0]} > ${exited}`;
    const child = spawn('bash', ['-c', command], { env: box.env, stdio: 'ignore' });
    const closed = new Promise((resolve) => child.on('close', resolve));
    // The command has exited and been reaped by cronguard (its /proc entry is gone), so all
    // that is left is output no one reads.
    // The run log may exist before its tables do.
    const first = () => {
      try {
        return runs(box.stateDir)[0];
      } catch {
        return undefined;
      }
    };
    await waitFor(() => first()?.child_pid != null, 'the command to start');
    const row = first();
    await waitFor(() => !existsSync(`/proc/${row?.child_pid}`), 'the command to exit');
    process.kill(row?.pid as number, 'SIGTERM');
    await waitFor(() => !isAlive(row?.pid as number), 'cronguard to end');
    release(gone);
    await closed;
    expect(readFileSync(exited, 'utf8')).toBe(`${code}\n`);
    expect(runs(box.stateDir)[0]).toMatchObject({
      status,
      exit_code: code,
      error: 'SIGTERM arrived while its output was still being passed on; the rest was dropped',
    });
  });

  it('starts its summary line on a line of its own after output without a final newline', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'mid', '--', 'sh', '-c', 'printf "partial error" >&2; exit 1'], box.env);
    expect(result.stderr).toMatch(/^partial error\ncronguard: mid: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
  });
});

describe('the summary line in a log file', () => {
  it.each([[['--capture', '0']], [[]], [['-q']], [['--capture', '0', '-q']]])('starts on a line of its own after a last line without newline (%j)', async (flags) => {
    const box = sandbox();
    const log = box.path('job.log');
    const command = `${process.execPath} ${BINARY} -n mid ${flags.join(' ')} -- sh -c 'printf partial; exit 1' >> ${log} 2>&1`;
    const child = spawn('bash', ['-c', command], { env: box.env, stdio: 'ignore' });
    expect(await new Promise((resolve) => child.on('close', resolve))).toBe(1);
    expect(readFileSync(log, 'utf8')).toMatch(/^partial\ncronguard: mid: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
  });

  it('so does every line of cronguard\'s own after the output, such as a run log that failed at the end', async () => {
    const box = sandbox();
    await cronguard(['-n', 'mid', '--', 'true'], box.env);
    // The command leaves its last line unfinished, and ruins the run log under cronguard.
    const ruin = `printf partial >&2; head -c 65536 /dev/zero > ${join(box.stateDir, 'cronguard.db')}; exit 1`;
    const result = await cronguard(['-n', 'mid', '--', 'sh', '-c', ruin], box.env);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^partial\ncronguard: run log in \S+ unavailable \(record the outcome: .*\); the job runs unrecorded\ncronguard: mid: failed with exit 1 after \S+ \(run 2; cronguard logs 2\)\n$/);
  });

  it('even when it was what the log held before that ended without one', async () => {
    const box = sandbox();
    const log = box.path('job.log');
    writeFileSync(log, 'an earlier line, cut short');
    const command = `${process.execPath} ${BINARY} -n mid -- sh -c 'exit 1' 2>> ${log}`;
    const child = spawn('bash', ['-c', command], { env: box.env, stdio: 'ignore' });
    expect(await new Promise((resolve) => child.on('close', resolve))).toBe(1);
    expect(readFileSync(log, 'utf8')).toMatch(/^an earlier line, cut short\ncronguard: mid: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
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
