import { outcomeOf, type SpooledRun } from './spool-record.js';

// "Run now" requests, as both stores keep them (table `requests`, also the --json shape).

export const REQUEST_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

export interface RequestRow {
  id: number;
  job: string;
  args: string[];
  requested_by: string | null;
  requested_at: string;
  not_before: string;
  status: RequestStatus;
  attempts: number;
  claimed_at: string | null;
  run_id: number | null;
  finished_at: string | null;
  exit_code: number | null;
  // Why it ended without running, when it did.
  error: string | null;
}

export interface NewRequest {
  readonly job: string;
  readonly args: readonly string[];
  readonly notBefore: Date;
  readonly requestedBy: string | null;
}

// A request an admission claimed for its run: its arguments go on the command line, unless
// they are not what a command line can carry (`malformed` says why, and `args` is empty).
export interface ClaimedRequest {
  readonly id: number;
  readonly args: readonly string[];
  readonly malformed?: string;
}

// A claimed request from what the store holds. Both stores refuse malformed arguments with a
// constraint, but a row written before the constraint, or around it, must not crash a run:
// such a request ends failed with the reason, and the command never sees the arguments.
export function claimedRequest(id: number, args: unknown): ClaimedRequest {
  const malformed = argsProblem(args);
  return malformed === null ? { id, args: args as string[] } : { id, args: [], malformed };
}

// Why `args` cannot go on a command line as given, or null: what the stores' constraints
// refuse, and what they cannot check (lone surrogates; SQLite: bytes that are not UTF-8).
export function argsProblem(args: unknown): string | null {
  if (!Array.isArray(args)) return 'its args are not an array of strings';
  if (!args.every((a) => typeof a === 'string')) return 'its args are not all strings (a number, null, object or nested array)';
  if (args.some((a: string) => a.includes('\0'))) return 'an argument holds a NUL byte, which no command line can carry';
  // A lone surrogate (JSON's "\ud800") would reach the command as U+FFFD.
  if (args.some((a: string) => /[\ud800-\udfff]/u.test(a))) return 'an argument is not valid Unicode (a lone surrogate)';
  return null;
}

// Claimed requests a run gives back: those that did not fit its command line wait for the
// next run (`later`); those that never can end failed, with `reason` (`refused`).
export interface Unserved {
  readonly later: readonly number[];
  readonly refused: readonly number[];
  readonly reason: string;
}

// A request of a run that ends before the run's last attempt does, with an outcome of its
// own (a batch's results by argument, see run/results.ts).
export interface SettledRequest {
  readonly id: number;
  readonly status: 'succeeded' | 'failed';
  readonly exitCode: number | null;
  readonly error: string | null;
}

// What `request --cancel` did: cancelled it, or found it missing or no longer pending.
export type Cancellation = { readonly cancelled: true } | { readonly cancelled: false; readonly status: RequestStatus | 'missing' };

// How a run's requests end when its last attempt does.
export function requestStatusOf(runStatus: string): RequestStatus {
  return runStatus === 'succeeded' ? 'succeeded' : 'failed';
}

// What delivering a record does to the requests its run claimed: a claim the wrapper never
// gave its command (it never heard of it, the reply to its admission lost with its
// connection) goes back to `pending`; on the last attempt, or when the wrapper vanished,
// the requests it served end with it. Null: the record cannot tell (an older version's).
export interface Claims {
  readonly served: readonly number[];
  readonly final: boolean;
  readonly status: RequestStatus;
  readonly finishedAt: string;
  readonly exitCode: number | null;
}

export function claimsOf(record: SpooledRun): Claims | null {
  if (!Array.isArray(record.served)) return null;
  const { status, finishedAt, exitCode } = outcomeOf(record);
  return { served: record.served, final: record.outcome === null || record.final === true, status: requestStatusOf(status), finishedAt, exitCode };
}
