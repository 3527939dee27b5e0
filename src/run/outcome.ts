import { constants } from 'node:os';
import { EXIT } from '../errors.js';
import type { RunOutcome } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import type { ChildResult } from './supervisor/supervisor.js';

export interface Judgement {
  readonly exitCode: number;
  readonly outcome: RunOutcome;
  // How the run ended, for the one summary line a run that did not succeed ends with
  // ("failed with exit 1 after 3.2s"); null on success.
  readonly summary: string | null;
}

export interface Ending {
  readonly timeoutMs: number | null;
  readonly killSignal: NodeJS.Signals;
  readonly killAfterMs: number;
  // Why the lock was lost while the command was allowed to go on (--on-lock-loss continue).
  readonly lockLostWhileRunning: string | null;
  // Opt-in rules that fail a run its exit code calls a success: --min-duration, and
  // --fail-on-stderr (whose finding the supervisor puts in the result's stderrLine).
  readonly minDurationMs: number | null;
  readonly failOnStderr: { readonly ps4: string } | null;
}

// What cronguard exits with when a rule fails a run whose command exited 0.
const RULE_FAILED_EXIT = 1;

// Turns the child's result into the contract's exit code, the run-log status and summary.
// Everything that reads an outcome (retries, -q, pings, the run log, so `check` and the
// notifiers) takes it from here, so a rule's failure is a failure to all of them.
export function judge(result: ChildResult, ending: Ending, finishedAt: Date): Judgement {
  const judgement = byRules(judgeChild(result, ending, finishedAt), result, ending);
  const lost = ending.lockLostWhileRunning;
  const notes = [
    lost !== null && result.terminatedBecause === null ? `lock lost while running (${lost}); the command was allowed to continue` : null,
    result.outputNote,
    result.replayNote,
  ].filter((n): n is string => n !== null);
  if (notes.length === 0) return judgement;
  const error = [judgement.outcome.error, ...notes].filter(Boolean).join('; ');
  return { ...judgement, outcome: { ...judgement.outcome, error } };
}

// Only a run that succeeded can fail a rule; one that failed already keeps its own status.
// The row keeps the command's exit code (0), the truth of what it did; the reason is in
// `error`, and cronguard exits 1.
function byRules(judgement: Judgement, result: ChildResult, ending: Ending): Judgement {
  if (judgement.outcome.status !== 'succeeded') return judgement;
  const short = ending.minDurationMs !== null && result.durationMs < ending.minDurationMs;
  const reasons = [
    short ? `ran ${formatDuration(result.durationMs)}, shorter than --min-duration ${formatDuration(ending.minDurationMs ?? 0)}` : null,
    ending.failOnStderr !== null && result.stderrLine !== null ? `wrote to stderr: ${result.stderrLine}` : null,
  ].filter((r): r is string => r !== null);
  if (reasons.length === 0) return judgement;
  const error = reasons.join('; ');
  // The summary says how long it ran, as every summary does; the first reason may say it.
  const after = short ? '' : ` after ${formatDuration(result.durationMs)}`;
  return {
    exitCode: RULE_FAILED_EXIT,
    outcome: { ...judgement.outcome, status: 'failed', error },
    summary: `failed: ${error} (the command exited 0${after})`,
  };
}

function judgeChild(result: ChildResult, ending: Ending, finishedAt: Date): Judgement {
  const signo = (s: NodeJS.Signals) => (constants.signals as Record<string, number>)[s] ?? 0;
  const base = {
    finishedAt,
    durationMs: result.durationMs,
    exitCode: result.exitCode,
    signal: result.signal,
    output: result.output,
    outputTruncated: result.outputTruncated,
  };
  const after = `after ${formatDuration(result.durationMs)}`;
  if (result.spawnError) {
    const missing = result.spawnError.code === 'ENOENT';
    const error = `could not start the command: ${result.spawnError.code ?? result.spawnError.message}`;
    const exitCode = missing ? EXIT.commandNotFound : EXIT.notExecutable;
    return { exitCode, outcome: { ...base, status: 'failed', exitCode, error }, summary: error };
  }
  if (result.terminatedBecause !== null) {
    const error = `lock lost: ${result.terminatedBecause}; command terminated`;
    return { exitCode: EXIT.lockLost, outcome: { ...base, status: 'lock_lost', error }, summary: `${error} ${after}` };
  }
  if (result.stoppedBy !== null) {
    const kill = result.escalated ? `, then SIGKILL after ${formatDuration(ending.killAfterMs)}` : '';
    const end = result.signal !== null ? `killed by ${result.signal}` : `exited ${result.exitCode ?? '?'}`;
    const error = `stopped by ${result.stoppedBy}${kill}: ${end}`;
    const exitCode = result.signal !== null ? 128 + signo(result.signal) : (result.exitCode ?? EXIT.internal);
    return { exitCode, outcome: { ...base, status: 'killed', error }, summary: `${error} ${after}` };
  }
  if (result.timedOut) {
    const kill = result.escalated ? `, then SIGKILL after ${formatDuration(ending.killAfterMs)}` : '';
    const error = `timed out after ${formatDuration(ending.timeoutMs ?? 0)}: sent ${ending.killSignal} to its process group${kill}`;
    return { exitCode: EXIT.timeout, outcome: { ...base, status: 'timed_out', error }, summary: error };
  }
  if (result.signal !== null) {
    const error = result.forwardedSignal !== null ? `killed by ${result.signal} (forwarded by cronguard)` : `killed by ${result.signal}`;
    return { exitCode: 128 + signo(result.signal), outcome: { ...base, status: 'killed', error }, summary: `${error} ${after}` };
  }
  const exitCode = result.exitCode ?? EXIT.internal;
  if (exitCode === 0) return { exitCode, outcome: { ...base, status: 'succeeded', error: null }, summary: null };
  return { exitCode, outcome: { ...base, status: 'failed', error: null }, summary: `failed with exit ${exitCode} ${after}` };
}
