import type { Schedule } from './spec.js';

// cron starts a line a little before its minute as often as a little after. A fire time
// counts as come this long before it (`early`: an invocation's first admission, not a loop's
// later looks, which would run a job half a minute before its time), and a start this long
// after it still counts as its run: a tenth of the time since the fire before it, at most
// 30 s (as for --min-interval).
const MAX_SLACK_MS = 30_000;

// When a scheduled job is due: its most recent fire time is later than its last start (any
// outcome but abandoned), so a host that was down runs a missed job once when it is back,
// never once per missed fire. Null `lastStartMs`: never started, due at once.
export interface Due {
  readonly due: boolean;
  // Since when it is due (the first fire it missed), or when it next will be: what status
  // shows, and what check counts lateness from.
  readonly at: Date;
}

export function scheduleDue(schedule: Schedule, lastStartMs: number | null, nowMs: number, early = true): Due {
  if (schedule.kind === 'every') {
    if (lastStartMs === null) return { due: true, at: new Date(nowMs) };
    const at = lastStartMs + schedule.everyMs;
    const due = nowMs >= (early ? at - Math.min(schedule.everyMs / 10, MAX_SLACK_MS) : at);
    // Due a moment early (the slack): due since now, not since a time still to come.
    return { due, at: new Date(due ? Math.min(at, nowMs) : at) };
  }
  const fire = latestFire(schedule, nowMs, early);
  if (fire !== null && (lastStartMs === null || fire.at > lastStartMs + fire.slack)) {
    // Due since the first fire it missed, not only its latest: how late a stopped job is.
    const first = lastStartMs === null ? fire.at : Math.min(fire.at, nextFire(schedule, lastStartMs + MAX_SLACK_MS)?.getTime() ?? fire.at);
    return { due: true, at: new Date(Math.min(first, nowMs)) };
  }
  return { due: false, at: nextFire(schedule, Math.max(nowMs, fire === null ? nowMs : fire.at)) ?? new Date(8.64e15) };
}

// The latest fire time that has come (within its slack), with that slack.
function latestFire(schedule: Extract<Schedule, { kind: 'cron' }>, nowMs: number, early: boolean): { at: number; slack: number } | null {
  for (const at of schedule.cron.previousRuns(2, new Date(nowMs + (early ? MAX_SLACK_MS : 0) + 1))) {
    const slack = slackOf(schedule, at.getTime());
    if (at.getTime() <= nowMs + (early ? slack : 0)) return { at: at.getTime(), slack };
  }
  return null;
}

function slackOf(schedule: Extract<Schedule, { kind: 'cron' }>, atMs: number): number {
  const [before] = schedule.cron.previousRuns(1, new Date(atMs));
  return before === undefined ? MAX_SLACK_MS : Math.min((atMs - before.getTime()) / 10, MAX_SLACK_MS);
}

function nextFire(schedule: Extract<Schedule, { kind: 'cron' }>, afterMs: number): Date | null {
  return schedule.cron.nextRun(new Date(afterMs));
}
