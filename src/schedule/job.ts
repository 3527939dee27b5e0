import { describe } from '../errors.js';
import { type JobStatus, lastCountedStart } from '../store/jobs.js';
import { type Due, scheduleDue } from './due.js';
import { parseSchedule, type Schedule } from './spec.js';

// A job's stored schedule as status, check, metrics and the web page show it.
export interface JobSchedule {
  readonly text: string;
  // Why the stored one cannot be read (an UPDATE by hand); null when it can.
  readonly problem: string | null;
  // When it is next due after the job's last start, or since when it is due; null when unread.
  readonly due: Due | null;
  // A success that started before this missed two of its fires in a row (for a cron
  // expression, the fire before its latest, less cron's jitter; for `every D`, 2D ago):
  // what check calls stale. Null when unread, or when it has fired less than twice.
  readonly staleBeforeMs: number | null;
}

export function jobSchedule(j: JobStatus, now: number): JobSchedule | null {
  if (j.schedule === null) return null;
  let schedule: Schedule;
  try {
    schedule = parseSchedule(j.schedule);
  } catch (error) {
    return { text: j.schedule, problem: describe(error), due: null, staleBeforeMs: null };
  }
  const lastStart = lastCountedStart(j);
  const due = scheduleDue(schedule, lastStart === null ? null : Date.parse(lastStart), now);
  return { text: j.schedule, problem: null, due, staleBeforeMs: staleBefore(schedule, now) };
}

// Uneven gaps (weekdays only, a month's days) are the schedule's own: a Monday job's last
// success on Friday is not stale on Sunday.
function staleBefore(schedule: Schedule, now: number): number | null {
  if (schedule.kind === 'every') return now - 2 * schedule.everyMs;
  const [latest, before] = schedule.cron.previousRuns(2, new Date(now));
  if (!latest || !before) return null;
  return before.getTime() - Math.min((latest.getTime() - before.getTime()) / 10, 30_000);
}

// The job with next_due_at by its stored schedule when it has one it can read.
export function withScheduleDue(j: JobStatus, now: number): JobStatus {
  const due = jobSchedule(j, now)?.due;
  return due ? { ...j, next_due_at: due.at.toISOString() } : j;
}

// Each job with `schedule_problem`: why its stored schedule cannot be read, null when it can
// (or it has none), for `status --json` and the API, where a web form shows it.
export function withScheduleProblem<J extends JobStatus>(jobs: readonly J[], now: number): (J & { schedule_problem: string | null })[] {
  return jobs.map((j) => ({ ...j, schedule_problem: jobSchedule(j, now)?.problem ?? null }));
}
