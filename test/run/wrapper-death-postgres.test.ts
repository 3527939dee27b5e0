import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, release, start, waitFor } from '../helpers.js';
import { pgRuns, pgSandbox } from '../pg-helpers.js';

// Without setpriv on the machine (Alpine, minimal images): a mount namespace where the
// binary is an empty file.
const withoutSetpriv = process.geteuid?.() === 0 ? ['unshare', '-m', 'sh', '-c', 'mount --bind /dev/null /usr/bin/setpriv && exec "$@"', 'x'] : [];

// The watchdog of the cronguard process `parent`: its child /bin/sh that leads a session of
// its own (the timer beside it, in heartbeat mode, does not).
function watchdogOf(parent: number): number | null {
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [, ppid, , session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (Number(ppid) === parent && Number(session) === Number(name) && cmdline.includes('cronguard-watchdog')) return Number(name);
    } catch {
      // Gone while we looked.
    }
  }
  return null;
}

describe('a wrapper SIGKILLed under a lock that dies with it', () => {
  it.each([
    ['the postgres lock', [], []],
    ['the postgres lock, no setpriv on the machine', [], withoutSetpriv],
  ])('%s: the whole process group dies, foreground children included, before another instance runs', async (_what, args, prefix) => {
    const box = pgSandbox();
    const job = box.job('death');
    const pids = box.path('pids');
    const barrier = box.path('never');
    const first = start([...args, '-n', job, '--', fixture('foreground.sh'), pids, barrier], box.env, prefix);
    await waitFor(() => lines(pids).length === 1, 'the work to start');
    const worker = Number(lines(pids)[0]);
    first.child.kill('SIGKILL');
    await first.done;
    await waitFor(() => !isAlive(worker), 'the orphaned work to be killed');
    expect(existsSync(`${pids}.after`)).toBe(false);
    const second = await cronguard(['-n', job, '--', 'true'], box.env);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    release(barrier);
  });
});

// The command's mark, by which its watchdog finds it when cronguard died before it could
// name the command's group (see WATCHDOG_SCRIPT).
describe('the command', () => {
  it.each(['postgres', 'lease'])('under the %s lock gets CRONGUARD_PID, the pid of the cronguard that started it', async (lock) => {
    const box = pgSandbox();
    const seen = box.path('seen');
    const run = start(['-l', lock, '-n', box.job('pid'), '--', 'sh', '-c', `echo "$CRONGUARD_PID $PPID" > ${seen}`], box.env);
    expect(await run.done).toMatchObject({ code: 0, stderr: '' });
    expect(lines(seen)).toEqual([`${run.child.pid} ${run.child.pid}`]);
  });
});

// A watchdog killed or stopped by someone must not leave the command to outlive cronguard:
// cronguard replaces it, and the replacement does its work.
describe('the watchdog', () => {
  it.each([
    ['postgres', 'SIGKILL'],
    ['postgres', 'SIGSTOP'],
    ['lockfile', 'SIGKILL'],
    ['lockfile', 'SIGSTOP'],
  ] as const)('under the %s lock, one that gets %s is replaced: the command still dies with cronguard', async (lock, signal) => {
    const box = pgSandbox();
    const pids = box.path('pids');
    const run = start(['-l', lock, '-n', box.job('dog'), '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3 && watchdogOf(run.child.pid as number) !== null, 'the command and its watchdog');
    const first = watchdogOf(run.child.pid as number) as number;
    process.kill(first, signal);
    await waitFor(() => ![null, first].includes(watchdogOf(run.child.pid as number)), 'a new watchdog');
    run.child.kill('SIGKILL');
    await run.done;
    for (const pid of lines(pids).map(Number)) await waitFor(() => !isAlive(pid), `pid ${pid} to die with cronguard`);
    expect(isAlive(first)).toBe(false);
  });
});

// Watchdogs started for runs in this schema: /bin/sh session leaders whose environment names it.
function watchdogsOf(schema: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .filter((name) => {
      try {
        return readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('cronguard-watchdog') && readFileSync(`/proc/${name}/environ`, 'utf8').includes(`CRONGUARD_SCHEMA=${schema}\0`);
      } catch {
        return false;
      }
    })
    .map(Number);
}

// Under the postgres lock the watchdog starts while the server decides on the run (start-up
// time): one that finds the job locked, so starts no command, leaves none behind.
describe('the watchdog started while the server admits the run', () => {
  it('ends when the run is skipped, and the holder keeps its own', async () => {
    const box = pgSandbox();
    const job = box.job('spare');
    const barrier = box.path('barrier');
    const started = box.path('started');
    const holder = start(['-n', job, '--', 'sh', '-c', `touch ${started}; while [ ! -e ${barrier} ]; do sleep 0.05; done`], box.env);
    await waitFor(() => existsSync(started) && watchdogsOf(box.schema).length === 1, 'the holder and its watchdog');
    const [own] = watchdogsOf(box.schema);
    for (let i = 0; i < 3; i++) expect(await cronguard(['-n', job, '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    await waitFor(() => watchdogsOf(box.schema).length === 1, 'the skipped runs\' watchdogs to end');
    expect(watchdogsOf(box.schema)).toEqual([own]);
    release(barrier);
    expect(await holder.done).toMatchObject({ code: 0 });
    await waitFor(() => watchdogsOf(box.schema).length === 0, 'the holder\'s watchdog to end');
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.overlaps])).toEqual([['succeeded', 3]]);
  });
});
