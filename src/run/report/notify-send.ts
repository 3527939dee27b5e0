import { type ChildProcess, spawn } from 'node:child_process';
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { createRequire } from 'node:module';
import type { SecureContext } from 'node:tls';
import { VERSION } from '../../cli/options.js';
import { describe } from '../../errors.js';
import { formatDuration } from '../../util/duration.js';
import { withExtraCa } from '../../util/extra-ca.js';
import { printable } from '../../util/printable.js';
import { redact } from '../../util/redact.js';

// What a notifier is told: the same fields as environment variables (--notify) and as JSON
// (--notify-url), all of them redacted already.
export interface Alert {
  readonly event: 'failed' | 'recovered';
  readonly job: string;
  // null while the run's record waits in the spool, or without a log.
  readonly run_id: number | null;
  readonly exit_code: number | null;
  readonly host: string;
  readonly status: string;
  readonly output: string;
}

// How much of a failing notifier's stderr its warning line quotes.
const STDERR_CHARS = 200;

// How long stderr is read after the notifier's shell exited: what it left behind (a daemon)
// may hold the pipe open for good, and is not waited for (as a job's leftovers are not).
const LEFTOVER_GRACE_MS = 1000;

// Runs the command through /bin/sh -c in a process group of its own, the alert in its
// environment and the output tail on its stdin; its stdout is dropped (cronguard's stdout is
// the job's), its stderr quoted on failure. At `timeoutMs`, or when `stop` aborts (a signal to
// cronguard), the whole group is killed, so a notifier that hangs or ignores SIGTERM ends
// there. Resolves to what went wrong, or null; never rejects.
export function runNotifyCommand(command: string, alert: Alert, timeoutMs: number, stop: AbortSignal): Promise<string | null> {
  return new Promise((resolve) => {
    // Without the notifier settings: a notifier that runs a job under cronguard in turn must
    // not notify of that job's failures too, and so on.
    const { CRONGUARD_NOTIFY: _command, CRONGUARD_NOTIFY_URL: _url, ...inherited } = process.env;
    const env = {
      ...inherited,
      CRONGUARD_EVENT: alert.event,
      CRONGUARD_JOB: alert.job,
      CRONGUARD_RUN_ID: alert.run_id === null ? '' : String(alert.run_id),
      CRONGUARD_EXIT_CODE: alert.exit_code === null ? '' : String(alert.exit_code),
      CRONGUARD_HOST: alert.host,
      CRONGUARD_STATUS: alert.status,
    };
    const child = spawn('/bin/sh', ['-c', command], { env, detached: true, stdio: ['pipe', 'ignore', 'pipe'] });
    const guard = child.pid === undefined ? null : guardGroup(child.pid, timeoutMs);
    let stderr = '';
    // How it exited, once it did: null for success, else why it failed.
    let exited: (() => string | null) | undefined;
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    };
    const timer = setTimeout(() => {
      // It exited within its time; what it left holding its stderr is not its outcome.
      if (exited !== undefined) return finish(exited());
      killGroup();
      finish(`timed out after ${formatDuration(timeoutMs)}; its process group was killed`);
    }, timeoutMs);
    let grace: NodeJS.Timeout | undefined;
    const onStop = () => {
      killGroup();
      finish(`stopped: cronguard got ${stop.reason}; its process group was killed`);
    };
    let settled = false;
    const finish = (failure: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(grace);
      stop.removeEventListener('abort', onStop);
      guard?.stdin?.end('done\n');
      child.stdin?.destroy();
      child.stderr?.destroy();
      resolve(failure);
    };
    if (stop.aborted) return onStop();
    stop.addEventListener('abort', onStop);
    child.on('error', (error) => finish(`could not start (${describe(error)})`));
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-4 * STDERR_CHARS);
    });
    child.on('exit', (code, signal) => {
      // Its stderr's last line, read when the warning is made: output may follow the exit.
      exited = () => {
        if (code === 0) return null;
        // Masked before it is escaped and cut, which would leave a secret unrecognised.
        const said = printable(redact(stderr.trim().split('\n').at(-1) ?? '')).slice(-STDERR_CHARS);
        return `${signal ? `killed by ${signal}` : `failed with exit ${code}`}${said ? `: ${said}` : ''}`;
      };
      // Its own outcome stands, whatever it left behind holding its stderr.
      grace = setTimeout(() => finish(exited?.() ?? null), LEFTOVER_GRACE_MS);
    });
    child.on('close', () => finish(exited?.() ?? null));
    // A notifier that does not read its stdin closes the pipe early: EPIPE is not its failure.
    child.stdin?.on('error', () => {});
    child.stdin?.end(alert.output);
  });
}

// The notifier's bound when cronguard is killed outright (SIGKILL, the OOM killer) and its
// timer dies with it: a /bin/sh in a session of its own reads a pipe from cronguard; end of
// input without `done` means cronguard died, and the notifier then gets up to its timeout
// more (counted by rounds of sleep: late on a busy machine, which costs nothing here) to
// deliver, before its group is killed. It stops looking once the group is gone, so that a
// group id used again later is not killed.
const GUARD_SCRIPT = `read -r word; [ "$word" = done ] && exit 0
t=$2; while kill -s 0 -- "-$1" 2>/dev/null; do [ "$t" -le 0 ] && exec kill -s KILL -- "-$1"; sleep 1; t=$((t - 1)); done`;

function guardGroup(group: number, timeoutMs: number): ChildProcess | null {
  const seconds = String(Math.ceil(timeoutMs / 1000));
  const guard = spawn('/bin/sh', ['-c', GUARD_SCRIPT, 'cronguard-notify-guard', String(group), seconds], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  guard.on('error', () => {});
  guard.stdin?.on('error', () => {});
  // It never holds cronguard's exit up: `done` ends it, and its pipe closes with cronguard.
  guard.unref();
  return guard.pid === undefined ? null : guard;
}

type Transport = { request(url: URL, options: RequestOptions & { secureContext?: SecureContext }, callback: (res: IncomingMessage) => void): ClientRequest };

// POSTs the alert as JSON; any 2xx is delivered. One try, bounded by `timeoutMs` in all: an
// alert is not worth holding up the job's end for longer. Resolves to what went wrong, or
// null; never rejects. A signal to cronguard (`stop`) drops it at once.
export function postAlert(url: string, alert: Alert, timeoutMs: number, stop: AbortSignal): Promise<string | null> {
  return new Promise((resolve) => {
    const target = new URL(url);
    const body = Buffer.from(JSON.stringify(alert));
    let req: ClientRequest | undefined;
    let settled = false;
    const onStop = () => finish(`not sent: cronguard got ${stop.reason}`);
    const finish = (failure: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
      req?.destroy();
      resolve(failure);
    };
    const timer = setTimeout(() => finish(`failed: no answer within ${formatDuration(timeoutMs)}`), timeoutMs);
    if (stop.aborted) return onStop();
    stop.addEventListener('abort', onStop);
    try {
      // By require, not import(), as ping.ts does: from the CommonJS bundle, import() would
      // start the ESM loader too.
      const https = target.protocol === 'https:';
      const transport = createRequire(import.meta.url)(https ? 'node:https' : 'node:http') as Transport;
      const headers = { 'user-agent': `cronguard/${VERSION}`, 'content-type': 'application/json', 'content-length': String(body.length) };
      req = transport.request(target, { method: 'POST', agent: false, headers, ...(https ? withExtraCa({}) : {}) }, (res) => {
        const status = res.statusCode ?? 0;
        res.on('error', () => {});
        res.resume();
        finish(status >= 200 && status < 300 ? null : `failed: HTTP ${status}`);
      });
    } catch (error) {
      finish(`failed: ${describe(error)}`);
      return;
    }
    req.on('error', (error) => finish(`failed: ${describe(error)}`));
    req.end(body);
  });
}
