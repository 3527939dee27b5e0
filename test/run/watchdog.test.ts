import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Heartbeat } from '../../src/lock/backend.js';
import { Watchdog } from '../../src/run/supervisor/watchdog.js';
import { WATCHDOG_SCRIPT } from '../../src/run/supervisor/watchdog-script.js';
import { isAlive, lines, type Sandbox, sandbox, waitFor } from '../helpers.js';

// A process group of its own, as the supervisor gives a command.
function group(): number {
  const child = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  child.unref();
  return child.pid as number;
}

const alive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
};

// A lease that beats no more (cronguard stopped), renewed `sinceMs` before the watchdog starts.
const silent = (limitMs: number, sinceMs: number): Heartbeat => ({ limitMs, sinceMs: () => sinceMs, onBeat: () => () => {} });

describe('the watchdog of a lease', () => {
  it('counts its first window from the lease\'s last renewal, not from its own start', async () => {
    // Renewed 5.5 s before, with 6 s to act in (limit + 1 s): its window ends within a second.
    const late = group();
    const lateDog = Watchdog.start(silent(5000, 5500));
    lateDog.watch(late);
    // Renewed just now, 4 s: ends seconds later, unless the first counted from its own start.
    const fresh = group();
    const freshDog = Watchdog.start(silent(3000, 0));
    freshDog.watch(fresh);
    try {
      while (alive(late) && alive(fresh)) await new Promise((r) => setTimeout(r, 50));
      expect({ late: alive(late), fresh: alive(fresh) }).toEqual({ late: false, fresh: true });
      while (alive(fresh)) await new Promise((r) => setTimeout(r, 50));
    } finally {
      for (const pgid of [late, fresh]) if (alive(pgid)) process.kill(-pgid, 'SIGKILL');
      lateDog.release();
      freshDog.release();
    }
  });
});

// A watchdog of cronguard `cg` (its pid), started as Watchdog starts one, told no group.
function watchdogOf(cg: number, limit: number, env: NodeJS.ProcessEnv): ChildProcess {
  const argv = ['-c', WATCHDOG_SCRIPT, 'cronguard-watchdog', String(limit), '0', String(cg)];
  return spawn('/bin/sh', argv, { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env });
}

// A command in a group of its own, as cronguard starts one, its environment marked with
// CRONGUARD_PID=`mark` (or not marked), with a child in its group that lost the mark: the
// pids of both, once both run, the group's leader first (its pid is the group's): it notes
// itself before it starts the child, which would otherwise race it to the file.
async function command(box: Sandbox, name: string, mark: string | null): Promise<number[]> {
  const pids = box.path(name);
  const script = `echo $$ >> ${pids}; env -u CRONGUARD_PID sh -c 'echo $$ >> ${pids}; exec sleep 600' & exec sleep 600`;
  const env = mark === null ? box.env : { ...box.env, CRONGUARD_PID: mark };
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore', env }).unref();
  await waitFor(() => lines(pids).length === 2, `${name} to start`);
  return lines(pids).map(Number);
}

// cronguard writes the command's group right after its spawn, and may die or be stopped
// before it can: the watchdog finds the command by its mark then.
describe('a watchdog never told the command\'s group', () => {
  const cg = process.pid;

  it('kills the group of each process marked with cronguard\'s pid when cronguard dies, and no other', async () => {
    const box = sandbox();
    const marked = await command(box, 'marked', String(cg));
    const other = await command(box, 'other', `${cg}0`);
    const unmarked = await command(box, 'unmarked', null);
    const dog = watchdogOf(cg, 0, box.env);
    dog.stdin?.end();
    await once(dog, 'exit');
    for (const pid of marked) await waitFor(() => !isAlive(pid), `marked ${pid} to die`);
    expect([...other, ...unmarked].filter(isAlive)).toEqual([...other, ...unmarked]);
  });

  it('kills the marked processes\' groups when no beat comes for the lease\'s limit', async () => {
    const box = sandbox();
    const marked = await command(box, 'marked', String(cg));
    const dog = watchdogOf(cg, 100, box.env);
    try {
      for (const pid of marked) await waitFor(() => !isAlive(pid), `marked ${pid} to die`);
    } finally {
      dog.stdin?.end('done\n');
    }
    expect(await once(dog, 'exit')).toEqual([0, null]);
  });

  it('once told the group, kills that group when no beat comes for the limit, marked or not', async () => {
    const box = sandbox();
    const unmarked = await command(box, 'unmarked', null);
    const dog = watchdogOf(cg, 100, box.env);
    dog.stdin?.write(`${unmarked[0]}\n`);
    try {
      for (const pid of unmarked) await waitFor(() => !isAlive(pid), `${pid} to die`);
    } finally {
      dog.stdin?.end('done\n');
    }
    expect(await once(dog, 'exit')).toEqual([0, null]);
  });
});
