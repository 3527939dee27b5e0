import type { RunConfig } from '../cli/config.js';
import type { Holder } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import type { Messages } from '../util/io.js';
import type { Refused } from './recorder.js';

// Why this invocation did not run, for -v, and its exit code: -E N when the lock is held,
// 0 for every other reason.
export async function skipped(config: RunConfig, refusal: Refused, lock: string, say: Messages): Promise<number> {
  const skip = (why: string, code = 0) => {
    say.verbose(`${config.name}: ${why}; skipping with exit ${code}`);
    return code;
  };
  switch (refusal.reason) {
    case 'tick':
      return skip(`already ran this minute on ${describeHolder(refusal.holder ?? null)} (--every-tick runs on every host)`);
    case 'disabled': {
      const p = refusal.paused;
      const by = p?.by ? ` by ${p.by}` : '';
      return skip(`paused since ${p?.since ?? '?'}${by}${p?.reason ? `: ${p.reason}` : ''} (cronguard enable ${config.name} resumes it)`);
    }
    case 'idle':
      return skip('no request is due (--on-request)');
    case 'interval': {
      const last = Date.parse(refusal.lastStartedAt ?? '');
      const next = new Date(last + (config.minIntervalMs ?? 0)).toISOString();
      return skip(`the last run started ${formatDuration(Date.now() - last)} ago, less than --min-interval ${formatDuration(config.minIntervalMs ?? 0)}; next due at ${next}`);
    }
    case 'locked':
      if (!config.verbose) return config.conflictExitCode;
      return skip(`${lock} is held by ${await lockHolder(config, refusal.holder ?? null)}`, config.conflictExitCode);
  }
}

async function lockHolder(config: RunConfig, holder: Holder | null): Promise<string> {
  if (holder !== null || config.lock !== 'flock') return describeHolder(holder);
  const { LocalLocks } = await import('../lock/held.js');
  const pid = new LocalLocks().holder('flock', config.lockPath);
  return pid ? `pid ${pid} (from /proc/locks)` : describeHolder(null);
}

function describeHolder(holder: Holder | null): string {
  if (!holder) return 'another instance';
  const run = holder.runId === null ? '' : `, run ${holder.runId}`;
  return `host ${holder.host ?? '?'} (pid ${holder.pid ?? '?'}${run}, since ${holder.startedAt ?? '?'})`;
}
