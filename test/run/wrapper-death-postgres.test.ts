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
