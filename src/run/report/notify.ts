import { randomBytes } from 'node:crypto';
import { constants, hostname } from 'node:os';
import type { NotifyConfig } from '../../cli/notify.js';
import { EXIT } from '../../errors.js';
import type { AlertClaim, RunOutcome, RunRow } from '../../store/types.js';
import type { Messages } from '../../util/io.js';
import { redact } from '../../util/redact.js';
import type { LogLink } from '../log-link.js';
import { FORWARDED } from '../supervisor/supervisor.js';
import { type Alert, postAlert, runNotifyCommand } from './notify-send.js';
import { tail } from './ping.js';

// Alerts once per incident (--notify, --notify-url). This module is imported only when a
// notifier is configured: a run without one loads none of it.

// The output tail a notifier gets, as much as a chat message or a mail can show.
const TAIL_BYTES = 10 * 1024;
// A claim to deliver outlives the notifiers' bound by this much: past it, an invocation that
// died delivering (SIGKILL) no longer holds the next outcome's alert back.
const CLAIM_MARGIN_MS = 10_000;
// Changes one invocation delivers for others that ended while it was delivering, at most:
// the next outcome of a job that flaps that fast says the rest.
const FOLLOW_UPS = 3;

export class Notifier {
  constructor(
    private readonly config: NotifyConfig,
    private readonly job: string,
    private readonly say: Messages,
  ) {}

  // An invocation's final outcome (a failed attempt that a retry makes good never comes
  // here): notifies when the job's latest outcome differs from what was last delivered (ok,
  // or failing), one invocation of a fleet delivering at a time: the log holds the state
  // wanted, the state delivered, and who is delivering (see RunStore.wantAlert). An outcome
  // that comes while another invocation delivers is said by that one once it is done, so
  // the last alert delivered is the job's latest state, and a recovery goes out only after
  // its failure did. An alert no notifier delivered leaves the state as it was delivered:
  // the next outcome tries again, on whichever host. When the log cannot answer (--no-log,
  // or records go to the spool), a failure notifies all the same, since a duplicate alert
  // beats a missed one, and a success does not: it cannot tell a recovery from one more good
  // run. Never throws, never changes the outcome.
  async ended(log: LogLink, runId: number | null, outcome: RunOutcome): Promise<void> {
    const failing = outcome.status !== 'succeeded';
    const token = randomBytes(8).toString('hex');
    const forMs = this.config.timeoutMs + CLAIM_MARGIN_MS;
    const asked = await log.consult('record the alert state', async (store) => ({ claim: await store.wantAlert(this.job, failing, runId, token, forMs) }));
    if (asked === null) {
      if (!failing) return;
      this.say.verbose(`${this.job}: notifying 'failed' (the run log cannot say whether it was said before)`);
      await this.send(this.alertOf(runId, outcome));
      return;
    }
    let claim = asked.claim;
    for (let said = 0; claim !== null; said++) {
      const wanted: AlertClaim = claim;
      if (said > FOLLOW_UPS) {
        await log.consult('free the alert state', (store) => store.alertSent(this.job, token, null, forMs));
        return;
      }
      const alert = wanted.runId === runId && wanted.failing === failing ? this.alertOf(runId, outcome) : await this.alertOfRun(log, wanted);
      this.say.verbose(`${this.job}: notifying '${alert.event}'${alert.run_id === runId ? '' : ` (run ${alert.run_id}, which ended while an alert was being delivered)`}`);
      const delivered = await this.send(alert);
      claim = (await log.consult('record the alert delivered', (store) => store.alertSent(this.job, token, delivered ? wanted.failing : null, forMs))) ?? null;
    }
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

  // This invocation's own outcome. Every text that leaves cronguard passes through redact(),
  // the output tail included (the whole output first: a secret the tail's start cut in two
  // would no longer match).
  private alertOf(runId: number | null, outcome: RunOutcome): Alert {
    return this.alert(outcome.status, runId, exitCodeOf(outcome), hostname(), outcome.output ?? outcome.error);
  }

  // Another invocation's outcome (of this host or another), as the log recorded it.
  private async alertOfRun(log: LogLink, claim: AlertClaim): Promise<Alert> {
    const row = claim.runId === null ? null : await log.consult('read the run to notify of', (store) => store.getRun(claim.runId as number));
    if (!row) return this.alert(claim.failing ? 'failed' : 'succeeded', claim.runId, null, '', null);
    return this.alert(row.status, row.id, exitCodeOf(outcomeOf(row)), row.host, row.output ?? row.error);
  }

  private alert(status: string, runId: number | null, exitCode: number | null, host: string, output: string | null): Alert {
    return {
      event: status === 'succeeded' ? 'recovered' : 'failed',
      job: redact(this.job),
      run_id: runId,
      exit_code: exitCode,
      host: redact(host),
      status,
      output: tail(redact(output ?? ''), TAIL_BYTES).toString('utf8'),
    };
  }
}

function outcomeOf(row: RunRow): Pick<RunOutcome, 'status' | 'exitCode' | 'signal'> {
  return { status: row.status as RunOutcome['status'], exitCode: row.exit_code, signal: row.signal };
}

// The code cronguard exits with for this outcome (see judge): a timeout is 124, a lost
// lock 75, a signal 128+N, a rule's failure of an exit 0 is 1; null when the command never ran to give one.
function exitCodeOf(outcome: Pick<RunOutcome, 'status' | 'exitCode' | 'signal'>): number | null {
  if (outcome.status === 'timed_out') return EXIT.timeout;
  if (outcome.status === 'lock_lost') return EXIT.lockLost;
  const signo = outcome.signal === null ? undefined : (constants.signals as Record<string, number>)[outcome.signal];
  if (outcome.status === 'killed' && signo !== undefined) return 128 + signo;
  // --min-duration and --fail-on-stderr fail a command that exited 0: cronguard exits 1.
  if (outcome.status === 'failed' && outcome.exitCode === 0) return 1;
  return outcome.exitCode;
}
