import type { RunConfig } from '../cli/config.js';
import { flockPath } from '../lock/lock-spec.js';
import type { Holder, Refused } from '../store/admission.js';
import { describePause, dueAfterMs, resumeHint } from '../store/jobs.js';
import { formatDuration } from '../util/duration.js';
import type { Messages } from '../util/io.js';

// A disagreement about --max-running is a mistake in how the job is run, as a bad option is.
const USAGE = 64;

// Why this invocation did not run, for -v (and, when the lock is held, for a person at a
// terminal: `manual`), and its exit code: -E N when the lock is held, 0 for every other reason.
export async function skipped(config: RunConfig, refusal: Refused, lock: string, say: Messages, manual: boolean): Promise<number> {
  const skip = (why: string, code = 0) => {
    say.verbose(`${config.name}: ${why}; skipping with exit ${code}`);
    return code;
  };
  switch (refusal.reason) {
    case 'tick':
      return skip(`already ran this minute on ${describeHolder(refusal.holder ?? null)} (--every-tick runs on every host)`);
    case 'disabled':
      return skip(`${describePause(refusal.paused ?? null)} (${resumeHint(config.name, refusal.paused ?? null)})`);
    case 'idle':
      return skip('no request is due (--on-request)');
    case 'interval': {
      const last = Date.parse(refusal.lastStartedAt ?? '');
      const next = new Date(last + dueAfterMs(config.minIntervalMs ?? 0)).toISOString();
      return skip(`the last run started ${formatDuration(Date.now() - last)} ago, less than --min-interval ${formatDuration(config.minIntervalMs ?? 0)}; next due at ${next}`);
    }
    case 'schedule':
      return skip(`not due: its schedule '${refusal.schedule}' next fires at ${refusal.nextAt}`);
    case 'unscheduled': {
      const why = refusal.problem ?? 'it has no stored schedule';
      const fix = `set one with: cronguard schedule ${config.name} --every D (or --cron EXPR)`;
      // Once a day (the log keeps when it was said): under cron, a mail a day until it is set.
      if (refusal.warn && !config.verbose) say.warn(`${config.name} did not run: --scheduled, but ${why}; ${fix} (said once a day)`);
      return skip(`--scheduled, but ${why}; ${fix}`);
    }
    case 'slots': {
      // Said under cron too: every crontab line of the job must be given the same N.
      const other = `--max-running ${refusal.maxRunning ?? 1}`;
      say.warn(`${config.name} did not run: it runs with --max-running ${config.maxRunning} here, but ${describeHolder(refusal.holder ?? null)} runs it with ${other}; give every line that runs it the same --max-running`);
      return USAGE;
    }
    case 'locked': {
      // Someone at a terminal is told (a colleague must not think the job ran); under cron
      // a skip stays silent. A stranger holding it was already said.
      const tell = manual && !(refusal as { reported?: boolean }).reported;
      if (!config.verbose && !tell) return config.conflictExitCode;
      const held = `${lock} is held by ${await lockHolder(config, refusal.holder ?? null)}`;
      if (config.verbose) return skip(held, config.conflictExitCode);
      say.warn(`${config.name} did not run: ${held}`);
      return config.conflictExitCode;
    }
  }
}

async function lockHolder(config: RunConfig, holder: Holder | null): Promise<string> {
  const path = flockPath(config.lock);
  if (holder !== null || path === null) return describeHolder(holder);
  const { LocalLocks } = await import('../lock/held.js');
  const pid = new LocalLocks().holder('flock', path);
  return pid ? `pid ${pid} (from /proc/locks)` : describeHolder(null);
}

function describeHolder(holder: Holder | null): string {
  if (!holder) return 'another instance';
  const run = holder.runId === null ? '' : `, run ${holder.runId}`;
  return `host ${holder.host ?? '?'} (pid ${holder.pid ?? '?'}${run}, since ${holder.startedAt ?? '?'})`;
}
