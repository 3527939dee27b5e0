import type { Refused, ScheduledRule, ScheduleVerdict } from '../store/admission.js';
import { printable } from '../util/printable.js';
import { scheduleDue } from './due.js';
import { hostZone, parseSchedule } from './spec.js';

// A job without a schedule says so at most this often: under cron each saying is a mail.
export const UNSCHEDULED_SAID_EVERY_MS = 24 * 3600_000;

// --scheduled, for the stores that decide in TypeScript (SQLite, MySQL) and for the look
// before a shared lock (run/loop/due.ts); PostgreSQL's admit() decides by the same rules in SQL
// (migration 0018) and reads a schedule without a zone in `zone`, the host's. Loaded only
// with --scheduled: it brings croner.
// `early`: an invocation's first admission allows for cron's jitter; a loop's later looks
// (inLoop) do not, or it would run a job up to half a minute before its time.
export function scheduledRule(early = true): ScheduledRule {
  return {
    zone: hostZone(),
    early,
    verdict: (spec, saidAt, lastStartMs, nowMs) => verdict(spec, saidAt, lastStartMs, nowMs, early),
    inLoop: () => scheduledRule(false),
  };
}

function verdict(spec: string | null, saidAt: string | null, lastStartMs: number | null, nowMs: number, early: boolean): ScheduleVerdict {
  if (spec === null) return unscheduled(null, saidAt, nowMs);
  let due: ReturnType<typeof scheduleDue>;
  try {
    due = scheduleDue(parseSchedule(spec, 'its stored schedule'), lastStartMs, nowMs, early);
  } catch (error) {
    // An UPDATE by hand that the store's CHECK let through (minute 61, an unknown zone).
    return unscheduled((error as Error).message, saidAt, nowMs);
  }
  if (due.due) return { due: true };
  return { due: false, refusal: { admitted: false, reason: 'schedule', schedule: printable(spec), nextAt: due.at.toISOString() } };
}

function unscheduled(problem: string | null, saidAt: string | null, nowMs: number): ScheduleVerdict {
  const warn = saidAt === null || !(Date.parse(saidAt) > nowMs - UNSCHEDULED_SAID_EVERY_MS);
  const refusal: Refused = { admitted: false, reason: 'unscheduled', problem, warn };
  return { due: false, refusal };
}

