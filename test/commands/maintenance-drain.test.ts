import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// `disable --all --drain D` against a run whose wrapper was SIGKILLed (found by a breaker):
// its row stays `running` until the job's next run marks it abandoned, and a paused job has
// no next run. A drain that took the row for an active run waited out all of D and then
// exited 124 naming a run that no longer existed. On this host, a run whose wrapper is gone
// and whose command left nothing running is not active; one whose command lives on is.
describe.each(STORES)('maintenance: --drain and a SIGKILLed wrapper (%s)', (kind) => {
  // The second: the wrapper died between starting its command and recording the command's
  // pid (CI's busy machine found the window); the command is known by its mark alone.
  it.each([true, false])('counts a run whose wrapper died and whose command is gone as ended, and one whose command lives on as active (its pid recorded: %s)', async (recorded) => {
    const box = storeBox(kind);
    const job = box.job('killed-wrapper');
    const [marks, barrier] = [box.path('marks'), box.path('barrier')];
    // Under a local lock its command outlives the wrapper (a database lock's watchdog ends it).
    const held = start(['-n', job, '-l', 'flock', '--', 'sh', fixture('hold.sh'), marks, barrier], box.env);
    // Its start line, not the file: the shell creates the file before it writes the line, and
    // a busy machine can be caught between the two (the pid then read as NaN).
    const started = () => (existsSync(marks) ? /^start (\d+)$/m.exec(readFileSync(marks, 'utf8'))?.[1] : undefined);
    await waitFor(() => started() !== undefined, 'the run to start');
    const command = Number(started());
    // The pid is recorded once the command started: waited for, then forgotten or kept.
    await waitFor(async () => Number((await box.runs()).find((r) => r.job === job)?.child_pid) === command, 'the child pid to be recorded');
    held.child.kill('SIGKILL');
    await held.done;
    const rows = (await box.runs()).filter((r) => r.job === job);
    expect(rows.map((r) => r.status)).toEqual(['running']);
    if (!recorded) await box.forgetChildPid(rows[0]?.id as number);

    // Its command still runs, without its wrapper: the run is still active.
    const busy = await cronguard(['disable', '--all', '--drain', '1s'], box.env);
    expect(busy.code).toBe(124);
    expect(busy.stderr).toContain(`still running after --drain 1s: ${job} on `);

    // Its command's process group is gone too: nothing of the run is left.
    process.kill(-command, 'SIGKILL');
    await waitFor(() => !alive(command), 'the command to end');
    const drained = await cronguard(['disable', '--all', '--drain', '10m'], box.env);
    expect(drained.stderr).toMatch(/ended without recording it: its wrapper \(pid \d+\) is gone and left nothing running\n/);
    expect(drained.stderr).toContain('cronguard: drained: no run of any job is active\n');
    expect(drained.code).toBe(0);
  });
});

// Alive and not a zombie (an orphan's reaper may be slow to reap it).
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    return false;
  }
}
