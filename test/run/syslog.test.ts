import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, lines, runs, sandbox, waitFor } from '../helpers.js';

// --syslog: the lines as a syslog daemon gets them, from a unix datagram socket the test
// binds itself (as journald and rsyslog bind /dev/log), written one per line to a file.
const RECEIVER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], 'ab', buffering=0) as out:
    while True:
        out.write(s.recv(65536).rstrip(b'\\n') + b'\\n')
`;

const receivers: ChildProcess[] = [];
afterEach(() => {
  for (const receiver of receivers.splice(0)) receiver.kill('SIGKILL');
});

// Binds a datagram socket at `socket` and returns the file its messages go to, once bound.
async function receiver(socket: string, file: string): Promise<ChildProcess> {
  const child = spawn('python3', ['-c', RECEIVER, socket, file], { stdio: 'inherit' });
  receivers.push(child);
  // Datagrams sent after the bind wait in the socket's queue: its file is the barrier.
  await waitFor(() => existsSync(socket), 'the receiver to bind its socket');
  return child;
}

async function syslogged() {
  const box = sandbox();
  const socket = box.path('log.sock');
  const file = box.path('received');
  await receiver(socket, file);
  return { box, file, env: { ...box.env, CRONGUARD_SYSLOG_SOCKET: socket } };
}

// `<PRI>Mmm dd hh:mm:ss TAG[PID]: event=... ` -> its priority, tag, pid and fields.
function parse(line: string) {
  const match = /^<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d ([^[]+)\[(\d+)\]: (.*)$/.exec(line);
  if (!match) throw new Error(`not a syslog line: ${line}`);
  const fields: Record<string, string> = {};
  for (const m of (match[4] as string).matchAll(/(\w+)=("(?:[^"\\]|\\.)*"|\S+)/g)) {
    fields[m[1] as string] = (m[2] as string).startsWith('"') ? JSON.parse(m[2] as string) : (m[2] as string);
  }
  return { priority: Number(match[1]), tag: match[2], pid: Number(match[3]), fields };
}

// Facility cron (9): info is 9*8+6, err 9*8+3.
const INFO = 78;
const ERR = 75;

describe('--syslog', () => {
  it('sends a line at the start and one at the end of a run: tag = job, info, key=value fields', async () => {
    const { box, file, env } = await syslogged();
    const result = await cronguard(['-n', 'nightly', '--syslog', '--', 'sh', '-c', 'echo backed up'], env);
    expect(result).toMatchObject({ code: 0, stdout: 'backed up\n', stderr: '' });
    // The end line is sent before cronguard exits; what the receiver got is in its file soon.
    await waitFor(() => lines(file).length === 2, 'two lines');
    const [start, end] = lines(file).map(parse);
    const common = { job: 'nightly', run_id: '1', attempt: '1', trigger: 'cron', host: hostname() };
    expect(start).toMatchObject({ priority: INFO, tag: 'nightly', fields: { event: 'start', status: 'running', ...common } });
    expect(end).toMatchObject({ priority: INFO, tag: 'nightly', fields: { event: 'end', status: 'succeeded', exit_code: '0', ...common } });
    expect(end?.fields.duration_ms).toBe(String(runs(box.stateDir)[0]?.duration_ms));
    expect(end?.pid).toBe(start?.pid);
    expect(Object.keys(start?.fields ?? {})).toEqual(['event', 'job', 'run_id', 'attempt', 'trigger', 'host', 'status']);
  });

  it('sends the end of a failure with priority err, its exit code, and each attempt of a retried run', async () => {
    const { file, env } = await syslogged();
    const result = await cronguard(['-n', 'broken', '--syslog', '--retries', '1', '--retry-delay', '10ms', '--', 'sh', '-c', 'exit 3'], env);
    expect(result.code).toBe(3);
    await waitFor(() => lines(file).length === 4, 'four lines');
    const got = lines(file).map(parse).map((l) => [l.priority, l.fields.event, l.fields.run_id, l.fields.attempt, l.fields.status, l.fields.exit_code]);
    expect(got).toEqual([
      [INFO, 'start', '1', '1', 'running', undefined],
      [ERR, 'end', '1', '1', 'failed', '3'],
      [INFO, 'start', '2', '2', 'running', undefined],
      [ERR, 'end', '2', '2', 'failed', '3'],
    ]);
  });

  it("tags a job whose name holds ':' with '_' in its place (rsyslog ends a tag at ':'), the job field keeping the name", async () => {
    const { file, env } = await syslogged();
    const result = await cronguard(['-n', 'db:backup@eu+1', '--syslog', '--', 'true'], env);
    expect(result.code).toBe(0);
    await waitFor(() => lines(file).length === 2, 'two lines');
    for (const line of lines(file)) {
      expect(line).toMatch(/^<78>\w{3} [ \d]\d \d\d:\d\d:\d\d db_backup@eu\+1\[\d+\]: event=/);
      expect(parse(line).fields.job).toBe('db:backup@eu+1');
    }
  });

  it('reports a rule failure (--fail-on-stderr) as err with its error, redacted', async () => {
    const { file, env } = await syslogged();
    const script = 'echo "cannot reach postgres://backup:s3cret-pw@db/x, giving up" >&2';
    const result = await cronguard(['-n', 'complains', '--syslog', '--fail-on-stderr', '--', 'sh', '-c', script], env);
    expect(result.code).toBe(1);
    await waitFor(() => lines(file).length === 2, 'two lines');
    const end = parse(lines(file)[1] as string);
    expect(end).toMatchObject({ priority: ERR, fields: { status: 'failed', exit_code: '0', error: 'wrote to stderr: cannot reach postgres://backup:***@db/x, giving up' } });
    expect(lines(file).join('\n')).not.toContain('s3cret');
  });

  it("masks an env file's value before quoting it: a '\"' or '\\\\' in it, escaped first, no longer matched the mask", async () => {
    const { box, file, env } = await syslogged();
    const secrets = box.path('job.env');
    writeFileSync(secrets, 'PW="Qp7\\"Hidden\\\\Value99"\n', { mode: 0o600 });
    const result = await cronguard(['-n', 'quoted', '--syslog', '--fail-on-stderr', '--env-file', secrets, '-c', 'echo "connect failed: $PW" >&2'], env);
    expect(result.code).toBe(1);
    await waitFor(() => lines(file).length === 2, 'two lines');
    expect(parse(lines(file)[1] as string).fields.error).toBe('wrote to stderr: connect failed: ***');
    expect(lines(file).join('\n')).not.toMatch(/Qp7|Hidden|Value99/);
  });

  it('sends the end of a killed run with its signal, and of a command that could not start (no start line)', async () => {
    const { file, env } = await syslogged();
    expect((await cronguard(['-n', 'killed', '--syslog', '--', 'sh', '-c', 'kill -TERM $$'], env)).code).toBe(143);
    expect((await cronguard(['-n', 'missing', '--syslog', '--', 'no-such-command-here'], env)).code).toBe(127);
    await waitFor(() => lines(file).length === 3, 'three lines');
    const got = lines(file).map(parse).map((l) => [l.tag, l.priority, l.fields.event, l.fields.status, l.fields.signal, l.fields.error]);
    expect(got).toEqual([
      ['killed', INFO, 'start', 'running', undefined, undefined],
      ['killed', ERR, 'end', 'killed', 'SIGTERM', 'killed by SIGTERM'],
      ['missing', ERR, 'end', 'failed', undefined, 'command not found: no-such-command-here'],
    ]);
  });

  it('is turned on by the syslog setting, in the configuration file or $CRONGUARD_SYSLOG, and off by it', async () => {
    const { box, file, env } = await syslogged();
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), `syslog = on\nsyslog_socket = ${env.CRONGUARD_SYSLOG_SOCKET}\n`);
    const fileEnv = { ...box.env };
    expect((await cronguard(['-n', 'from-file', '--', 'true'], fileEnv)).code).toBe(0);
    expect((await cronguard(['-n', 'turned-off', '--', 'true'], { ...fileEnv, CRONGUARD_SYSLOG: 'off' })).code).toBe(0);
    expect((await cronguard(['-n', 'from-env', '--', 'true'], { ...env, XDG_CONFIG_HOME: box.path('no-config'), CRONGUARD_SYSLOG: 'TRUE' })).code).toBe(0);
    // Each end line went out before its cronguard exited: none can still come for turned-off.
    await waitFor(() => lines(file).length === 4, 'four lines');
    expect(lines(file).map((l) => `${parse(l).tag} ${parse(l).fields.event}`)).toEqual(['from-file start', 'from-file end', 'from-env start', 'from-env end']);
  });

  it('never changes the outcome: a missing socket, a dead one, no logger at all; one line on stderr at most', async () => {
    const box = sandbox();
    // A socket file whose receiver is gone: connection refused.
    const dead = box.path('dead.sock');
    const gone = await receiver(dead, box.path('unused'));
    gone.kill('SIGKILL');
    await new Promise((resolve) => gone.once('exit', resolve));
    const cases: [string, NodeJS.ProcessEnv, RegExp][] = [
      [box.path('missing.sock'), box.env, /No such file or directory/],
      [dead, box.env, /Connection refused/],
      [box.path('missing.sock'), { ...box.env, PATH: box.path('empty-path') }, /logger \(util-linux\) is not installed/],
    ];
    for (const [socket, env, why] of cases) {
      const ok = await cronguard(['-n', 'fine', '--syslog', '--', '/bin/sh', '-c', 'echo fine'], { ...env, CRONGUARD_SYSLOG_SOCKET: socket });
      expect(ok).toMatchObject({ code: 0, stdout: 'fine\n' });
      expect(ok.stderr).toMatch(new RegExp(`^cronguard: fine: syslog to ${socket} failed \\(${why.source}\\); the run's outcome is unaffected\\n$`));
      // A failure keeps its code, and the summary stays the last line.
      const failed = await cronguard(['-n', 'bad', '--syslog', '--retries', '1', '--retry-delay', '10ms', '--', '/bin/sh', '-c', 'exit 5'], { ...env, CRONGUARD_SYSLOG_SOCKET: socket });
      expect(failed.code).toBe(5);
      const said = failed.stderr.trim().split('\n');
      expect(said.filter((l) => l.includes('syslog'))).toHaveLength(1);
      expect(said.at(-1)).toMatch(/^cronguard: bad: failed with exit 5 after .*\(run \d+; cronguard logs \d+\)$/);
    }
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'failed', 'failed', 'succeeded', 'failed', 'failed', 'succeeded', 'failed', 'failed']);
  });

  it('bounds a syslog daemon that stopped reading: its full socket blocks logger, which is given up on', async () => {
    const box = sandbox();
    const socket = box.path('stuck.sock');
    const ready = box.path('ready');
    // Binds, fills its own queue until a send would block, and never reads.
    const stuck = `
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
c.setblocking(False)
try:
    while True:
        c.sendto(b'x' * 1024, sys.argv[1])
except BlockingIOError:
    pass
open(sys.argv[2], 'w').close()
time.sleep(3600)
`;
    receivers.push(spawn('python3', ['-c', stuck, socket, ready], { stdio: 'inherit' }));
    await waitFor(() => existsSync(ready), 'the socket to fill up');
    const result = await cronguard(['-n', 'stuck', '--syslog', '--', 'sh', '-c', 'exit 4'], { ...box.env, CRONGUARD_SYSLOG_SOCKET: socket });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/^cronguard: stuck: syslog to \S+ failed \(logger did not finish within 5s\); the run's outcome is unaffected\ncronguard: stuck: failed with exit 4 after .*\n$/);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'failed', exit_code: 4 });
  });

  it('refuses a syslog setting that is neither on nor off, naming the file and line: 64, nothing run', async () => {
    const box = sandbox();
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), '# fleet\nsyslog = sometimes\n');
    const result = await cronguard(['-n', 'x', '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: \S+\/config:2: 'sometimes' is not on or off \(on, off, true, false, yes, no, 1, 0\) \(see cronguard --help\)\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });
});
