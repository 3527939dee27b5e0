import { constants } from 'node:os';
import { EXIT } from '../errors.js';
import type { RunOutcome } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import type { ChildResult } from './supervisor.js';

export interface Verdict {
  readonly exitCode: number;
  readonly outcome: RunOutcome;
  // A line for stderr when cronguard itself must explain the ending; null when the
  // command's own output says enough (or it succeeded).
  readonly message: string | null;
}

// Turns the child's result into the contract's exit code, the run-log status and, where
// useful, one explanatory line.
export function judge(
  result: ChildResult,
  timeoutMs: number | null,
  finishedAt: Date,
  lockLostWhileRunning: string | null = null,
): Verdict {
  const verdict = judgeChild(result, timeoutMs, finishedAt);
  if (lockLostWhileRunning === null || result.terminatedBecause !== null) return verdict;
  const note = `lock lost while running (${lockLostWhileRunning}); the command was allowed to continue`;
  const error = verdict.outcome.error ? `${verdict.outcome.error}; ${note}` : note;
  return { ...verdict, outcome: { ...verdict.outcome, error } };
}

function judgeChild(result: ChildResult, timeoutMs: number | null, finishedAt: Date): Verdict {
  const signo = (s: NodeJS.Signals) => (constants.signals as Record<string, number>)[s] ?? 0;
  const base = {
    finishedAt,
    durationMs: result.durationMs,
    exitCode: result.exitCode,
    signal: result.signal,
    output: result.output,
    outputTruncated: result.outputTruncated,
  };
  if (result.spawnError) {
    const missing = result.spawnError.code === 'ENOENT';
    const error = `could not start the command: ${result.spawnError.code ?? result.spawnError.message}`;
    const exitCode = missing ? EXIT.notFound : EXIT.notExecutable;
    return { exitCode, outcome: { ...base, status: 'failed', exitCode, error }, message: error };
  }
  if (result.terminatedBecause !== null) {
    const error = `lock lost: ${result.terminatedBecause}; command terminated`;
    return { exitCode: EXIT.lockLost, outcome: { ...base, status: 'lock_lost', error }, message: error };
  }
  if (result.timedOut) {
    const after = result.escalated ? ', then SIGKILL' : '';
    const error = `timed out after ${formatDuration(timeoutMs ?? 0)}; process group sent the kill signal${after}`;
    return { exitCode: EXIT.timeout, outcome: { ...base, status: 'timed_out', error }, message: error };
  }
  if (result.signal !== null) {
    const forwarded = result.forwardedSignal !== null;
    const error = forwarded
      ? `killed by ${result.signal} (forwarded by cronguard)`
      : `killed by ${result.signal}`;
    return {
      exitCode: 128 + signo(result.signal),
      outcome: { ...base, status: 'killed', error },
      message: forwarded ? null : error,
    };
  }
  const exitCode = result.exitCode ?? EXIT.internal;
  const status = exitCode === 0 ? 'succeeded' : 'failed';
  return { exitCode, outcome: { ...base, status, error: null }, message: null };
}
