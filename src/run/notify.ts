import { constants, hostname } from 'node:os';
import type { NotifyConfig } from '../cli/notify.js';
import { EXIT } from '../errors.js';
import type { RunOutcome } from '../store/types.js';
import type { Messages } from '../util/io.js';
import { redact } from '../util/redact.js';
import type { LogLink } from './log-link.js';
import { type Alert, postAlert, runNotifyCommand } from './notify-send.js';
import { FORWARDED } from './supervisor.js';
import { tail } from './ping.js';

// Alerts once per incident (--notify, --notify-url). This module is imported only when a
// notifier is configured: a run without one loads none of it.

// The output tail a notifier gets, as much as a chat message or a mail can show.
const TAIL_BYTES = 10 * 1024;

export class Notifier {
  constructor(
    private readonly config: NotifyConfig,
    private readonly job: string,
    private readonly say: Messages,
  ) {}

  // An invocation's final outcome (a failed attempt that a retry makes good never comes
  // here): notifies when the job's alert state in the log moved from ok to failing or back.
  // When the log cannot answer (--no-log, or records go to the spool), a failure notifies
  // all the same, since a duplicate alert beats a missed one, and a success does not: it
  // cannot tell a recovery from one more good run. Never throws, never changes the outcome.
  async ended(log: LogLink, runId: number | null, outcome: RunOutcome): Promise<void> {
    const failing = outcome.status !== 'succeeded';
    const moved = await log.consult('record the alert state', (store) => store.markAlert(this.job, failing));
    if (moved === false || (moved === null && !failing)) return;
    const alert = this.alertOf(failing ? 'failed' : 'recovered', runId, outcome);
    this.say.verbose(`${this.job}: notifying '${alert.event}'${moved === null ? ' (the run log cannot say whether it was said before)' : ''}`);
    const delivered = await this.send(alert);
    // An alert no notifier delivered (the webhook down when the incident began) gives the
    // state back, so that the next outcome alike tries again, on whichever host: else the
    // whole incident, however long, would go unheard. A compare-and-set again: if another
    // host moved the state meanwhile, it said what there was to say.
    if (moved && !delivered) await log.consult('give the alert state back', (store) => store.markAlert(this.job, !failing));
  }

  // Both notifiers side by side; whether either delivered. A signal to cronguard meanwhile
  // ends them at once (the job has ended: nothing else waits for the signal to act on), as
  // it ends the wait for a job's output.
  private async send(alert: Alert): Promise<boolean> {
    const { command, url, timeoutMs } = this.config;
    const stop = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => stop.abort(signal);
    for (const signal of FORWARDED) process.on(signal, onSignal);
    try {
      const failures = await Promise.all([
        command === null ? undefined : runNotifyCommand(command, alert, timeoutMs, stop.signal),
        url === null ? undefined : postAlert(url, alert, timeoutMs, stop.signal),
      ]);
      if (failures[0]) this.say.warn(`${this.job}: --notify command ${failures[0]}; the run's outcome is unaffected`);
      if (failures[1]) this.say.warn(`${this.job}: --notify-url to ${new URL(url as string).origin} ${failures[1]}; the run's outcome is unaffected`);
      return failures.includes(null);
    } finally {
      for (const signal of FORWARDED) process.off(signal, onSignal);
    }
  }

  // Every text that leaves cronguard passes through redact(), the output tail included (the
  // whole output first: a secret the tail's start cut in two would no longer match).
  private alertOf(event: Alert['event'], runId: number | null, outcome: RunOutcome): Alert {
    const output = tail(redact(outcome.output ?? outcome.error ?? ''), TAIL_BYTES).toString('utf8');
    return {
      event,
      job: redact(this.job),
      run_id: runId,
      exit_code: exitCodeOf(outcome),
      host: redact(hostname()),
      status: outcome.status,
      output,
    };
  }
}

// The code cronguard exits with for this outcome (see judge): a timeout is 124, a lost
// lock 75, a signal 128+N, a rule's failure of an exit 0 is 1; null when the command never ran to give one.
function exitCodeOf(outcome: RunOutcome): number | null {
  if (outcome.status === 'timed_out') return EXIT.timeout;
  if (outcome.status === 'lock_lost') return EXIT.lockLost;
  const signo = outcome.signal === null ? undefined : (constants.signals as Record<string, number>)[outcome.signal];
  if (outcome.status === 'killed' && signo !== undefined) return 128 + signo;
  // --min-duration and --fail-on-stderr fail a command that exited 0: cronguard exits 1.
  if (outcome.status === 'failed' && outcome.exitCode === 0) return 1;
  return outcome.exitCode;
}
