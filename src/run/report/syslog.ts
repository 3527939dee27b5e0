import { spawn } from 'node:child_process';
import type { SyslogConfig } from '../../cli/syslog.js';
import type { RunOutcome } from '../../store/types.js';
import { redact } from '../../util/redact.js';

// --syslog: a line at the start and one at the end of each run (each attempt: it has its
// own run id) to the local syslog socket, for fleets that read journald or rsyslog and
// have no MTA for cron mail. Imported only with --syslog.
//
// The lines go through util-linux logger(1) (`--socket`), not Node: /dev/log is a unix
// datagram socket under both journald and rsyslog, and Node has no unix datagrams (dgram is
// UDP only; net is streams only, and connecting a stream to /dev/log fails). A native addon
// would add a build to every install for two packets a run; logger is on every system with
// util-linux, speaks the local framing (RFC 3164 with a local header: `<PRI>TIME TAG[PID]:
// MSG`) that journald and rsyslog parse, tries datagrams then streams, and costs about 4 ms
// of a process per line, paid only by runs with --syslog. The message goes on its stdin,
// so nothing of it shows in `ps`.

// Facility cron (9), where cron daemons log; with severity err (3) or info (6).
const FACILITY = 'cron';
// How long one line may take: a syslog daemon that stops reading fills the socket, and
// logger then blocks; the run must not.
const SEND_BOUND_MS = 5000;
// Bounds the error field (a first line of stderr, say): a syslog line is short.
const MAX_VALUE_CHARS = 200;

// What a line says of the run (one attempt of it).
export interface SyslogRun {
  readonly job: string;
  readonly runId: number | null;
  readonly attempt: number;
  readonly trigger: string;
  readonly host: string;
}

// The lines of one invocation, however many runs it makes. A socket that is missing, dead
// or slow never changes a run's outcome: it is worth one warning line per invocation.
export class Syslog {
  private starts: Promise<string | null>[] = [];
  private warned = false;
  // A daemon that took no line within the bound is not waited on again by this invocation:
  // one stall costs a run 5 s at most, not 5 s a line.
  private stalled = false;

  constructor(
    private readonly config: SyslogConfig,
    private readonly tag: string,
  ) {}

  // Sent without waiting; the end waits for it, so the two arrive in order.
  start(run: SyslogRun): void {
    this.starts.push(this.send('info', message('start', [...identity(run), ['status', 'running']])));
  }

  // Sends the end line once the start has gone. Returns the warning line to print if this
  // is the invocation's first failed line, else null.
  async end(run: SyslogRun, outcome: RunOutcome): Promise<string | null> {
    const fields: Field[] = [
      ...identity(run),
      ['status', outcome.status],
      ['exit_code', outcome.exitCode],
      ['signal', outcome.signal],
      ['duration_ms', outcome.durationMs],
      ['error', outcome.error],
    ];
    const starts = await Promise.all(this.starts.splice(0));
    const end = await this.send(outcome.status === 'succeeded' ? 'info' : 'err', message('end', fields));
    const failed = [...starts, end].filter((f) => f !== null);
    if (failed.length === 0 || this.warned) return null;
    this.warned = true;
    return `${this.tag}: syslog to ${this.config.socket} failed (${failed[0]}); the run's outcome is unaffected`;
  }

  // Resolves to why the line did not go out, or null; never rejects.
  private send(severity: 'info' | 'err', line: string): Promise<string | null> {
    if (this.stalled) return Promise.resolve('an earlier line was not taken; not tried again');
    return new Promise((resolve) => {
      const args = [`--socket=${this.config.socket}`, '--socket-errors=on', `--tag=${syslogTag(this.tag)}`, `--id=${process.pid}`, `--priority=${FACILITY}.${severity}`];
      const child = spawn('logger', args, { stdio: ['pipe', 'ignore', 'pipe'] });
      let said = '';
      let settled = false;
      const settle = (why: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(why);
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        this.stalled = true;
        settle(`logger did not finish within ${SEND_BOUND_MS / 1000}s`);
      }, SEND_BOUND_MS);
      child.stderr.on('data', (chunk: Buffer) => {
        if (said.length < 1000) said += chunk.toString();
      });
      child.once('error', (error: NodeJS.ErrnoException) =>
        settle(error.code === 'ENOENT' ? 'logger (util-linux) is not installed' : `logger: ${error.message}`),
      );
      child.once('close', (code) => {
        const first = said.split('\n').find((l) => l.trim() !== '');
        // logger names the socket, which the warning names already.
        const why = first?.replace(/^logger: /, '').replace(`socket ${this.config.socket}: `, '');
        settle(code === 0 ? null : (why ?? `logger exited with ${code}`));
      });
      // A logger that died at once (a missing socket) closes its stdin: that is its exit's news.
      child.stdin.on('error', () => {});
      child.stdin.end(`${redact(line)}\n`);
    });
  }
}

// The job's name, a ':' in it as '_': rsyslog ends a tag at its first ':' (a job named
// db:backup was program 'db', its message 'backup[PID]: event=...'); `job=` keeps the name.
function syslogTag(job: string): string {
  return redact(job).replaceAll(':', '_');
}

type Field = readonly [string, string | number | null];

function identity(run: SyslogRun): Field[] {
  return [
    ['job', run.job],
    ['run_id', run.runId],
    ['attempt', run.attempt],
    ['trigger', run.trigger],
    ['host', run.host],
  ];
}

// `event=end job=backup run_id=42 status=failed ...`: key=value pairs, a value quoted (as
// JSON strings are) when it has blanks, quotes or control characters; fields without a
// value are left out. One line, whatever the values hold.
function message(event: string, fields: readonly Field[]): string {
  const pairs = [['event', event] as Field, ...fields].filter(([, v]) => v !== null);
  return pairs.map(([key, value]) => `${key}=${formatValue(String(value))}`).join(' ');
}

// Masked before it is cut and quoted: quoting escapes a '"' or '\\' in a secret, and the
// escaped form no longer matches the mask the whole line gets after.
function formatValue(raw: string): string {
  const value = redact(raw);
  const short = value.length > MAX_VALUE_CHARS ? `${value.slice(0, MAX_VALUE_CHARS)}...` : value;
  if (/^[^\s"=\\\x00-\x1f\x7f-\x9f]+$/.test(short)) return short;
  return JSON.stringify(short).replace(/[\x7f-\x9f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
