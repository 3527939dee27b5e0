import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, runs, sandbox, start, waitFor } from '../helpers.js';

// --notify and --notify-url on an operator's bad night: a notifier that leaves a daemon
// behind, a signal to cronguard while a notifier runs, a notifier that fails when the
// incident begins. (notify.test.ts: the ordinary cases.)

const servers: { close(): void }[] = [];
const pids: number[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
});

// A webhook stand-in that answers the statuses given, one per request, then 204.
async function flakyHook(statuses: number[]) {
  const received: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')).event);
      res.writeHead(statuses.shift() ?? 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received };
}

describe('a notifier that forks a daemon', () => {
  it('the invocation ends with the notifier, not at --notify-timeout: a leftover that keeps its stderr open is not waited for, nor killed', async () => {
    const box = sandbox();
    const pidFile = box.path('daemon');
    // The daemon holds the notifier's stderr; an hour's bound would hold the test up for good.
    const notifier = `(sleep 600 & echo $! > ${pidFile}); echo sent >> ${box.path('n')}`;
    const result = await cronguard(['-n', 'daemon', '--notify', notifier, '--notify-timeout', '1h', '--', 'false'], box.env);
    const daemon = Number(lines(pidFile)[0]);
    pids.push(daemon);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^cronguard: daemon: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
    expect(lines(box.path('n'))).toEqual(['sent']);
    expect(isAlive(daemon)).toBe(true);
  });
});

describe('a signal to cronguard while a notifier runs', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('%s ends the wait: the notifier (which ignores it) is killed with its group, one line, the exit code stays the job\'s', async (signal) => {
    const box = sandbox();
    const pidFile = box.path('notifier');
    const notifier = `trap '' TERM INT HUP; echo $$ > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; while :; do sleep 1; done`;
    const run = start(['-n', 'sig', '--notify', notifier, '--notify-timeout', '1h', '--', 'sh', '-c', 'exit 3'], box.env);
    await waitFor(() => lines(pidFile).length === 1, 'the notifier to start');
    const shell = Number(lines(pidFile)[0]);
    pids.push(shell);
    run.child.kill(signal);
    const result = await run.done;
    expect(result.code).toBe(3);
    const said = result.stderr.split('\n');
    expect(said[0]).toBe(`cronguard: sig: --notify command stopped: cronguard got ${signal}; its process group was killed; the run's outcome is unaffected`);
    expect(said[1]).toMatch(/^cronguard: sig: failed with exit 3 after /);
    expect(said.slice(2)).toEqual(['']);
    await waitFor(() => !isAlive(shell), 'the notifier to be gone');
    expect(runs(box.stateDir).map((r) => [r.status, r.exit_code])).toEqual([['failed', 3]]);
  });
});

describe('a wrapper killed outright (SIGKILL) while its notifier runs', () => {
  it('the notifier finishes what it was doing, and one that hangs is still killed with its group at about --notify-timeout', async () => {
    const box = sandbox();
    const notifier = `echo $$ > ${box.path('pid')}.tmp; mv ${box.path('pid')}.tmp ${box.path('pid')}
while [ ! -e ${box.path('go')} ]; do sleep 0.05; done; echo delivered > ${box.path('n')}; trap '' TERM; sleep 600 & wait`;
    const run = start(['-n', 'k9', '--notify', notifier, '--notify-timeout', '10s', '--', 'false'], box.env);
    await waitFor(() => lines(box.path('pid')).length === 1, 'the notifier to start');
    const shell = Number(lines(box.path('pid'))[0]);
    pids.push(shell);
    run.child.kill('SIGKILL');
    await run.done;
    writeFileSync(box.path('go'), '');
    await waitFor(() => lines(box.path('n')).length === 1, 'the notifier to deliver');
    await waitFor(() => !isAlive(shell), 'the notifier to be killed');
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['failed']);
  });
});

describe('a notifier that fails does not use up the incident', () => {
  it('a failure whose alert could not be delivered is alerted at the next failure; once delivered, no more', async () => {
    const box = sandbox();
    const file = box.path('tries');
    // Fails twice (the webhook down), then delivers.
    const notifier = `echo "$CRONGUARD_EVENT" >> ${file}; [ $(wc -l < ${file}) -gt 2 ] || { echo down >&2; exit 5; }`;
    const codes: (number | null)[] = [];
    for (let i = 0; i < 4; i++) codes.push((await cronguard(['-n', 'retry', '--notify', notifier, '--', 'false'], box.env)).code);
    expect(codes).toEqual([1, 1, 1, 1]);
    expect(lines(file)).toEqual(['failed', 'failed', 'failed']);
    // The recovery is said once.
    for (let i = 0; i < 2; i++) expect((await cronguard(['-n', 'retry', '--notify', notifier, '--', 'true'], box.env)).code).toBe(0);
    expect(lines(file)).toEqual(['failed', 'failed', 'failed', 'recovered']);
  });

  it('a recovery that could not be delivered is said at the next success; a success after an undelivered failure says nothing', async () => {
    const box = sandbox();
    const hook = await flakyHook([204, 503]);
    const args = ['-n', 'rec', '--notify-url', hook.url, '--'];
    await cronguard([...args, 'false'], box.env);
    const undelivered = await cronguard([...args, 'true'], box.env);
    expect(undelivered.stderr).toBe(`cronguard: rec: --notify-url to ${new URL(hook.url).origin} failed: HTTP 503; the run's outcome is unaffected\n`);
    expect(await cronguard([...args, 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard([...args, 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(hook.received).toEqual(['failed', 'recovered', 'recovered']);
    // A failure nobody heard of opens no incident to recover from.
    const down = await flakyHook([500]);
    await cronguard(['-n', 'unheard', '--notify-url', down.url, '--', 'false'], box.env);
    expect(await cronguard(['-n', 'unheard', '--notify-url', down.url, '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(down.received).toEqual(['failed']);
  });

  it('with both notifiers, one that delivers is enough', async () => {
    const box = sandbox();
    const hook = await flakyHook([500, 500]);
    const file = box.path('n');
    for (let i = 0; i < 2; i++) await cronguard(['-n', 'both', '--notify-url', hook.url, '--notify', `echo "$CRONGUARD_EVENT" >> ${file}`, '--', 'false'], box.env);
    expect(hook.received).toEqual(['failed']);
    expect(readFileSync(file, 'utf8')).toBe('failed\n');
  });
});

describe('a notify command in a configuration file is read as sh reads it', () => {
  // notified.sh's first line: the event and job; the rest, its arguments are not shown.
  it.each([
    ['quoted words, the first and last quoted', `"${fixture('notified.sh')}" "$FILE"`],
    ['a # inside quotes after a blank', `${fixture('notified.sh')} "$FILE" "not # a comment"  # a comment`],
    ["a whole command in single quotes holding double ones", `'${fixture('notified.sh')} "$FILE"'`],
  ])('%s', async (_what, value) => {
    const box = sandbox();
    mkdirSync(box.path('config/cronguard'), { recursive: true });
    writeFileSync(box.path('config/cronguard/config'), `notify = ${value}\n`, { mode: 0o600 });
    const result = await cronguard(['-n', 'conf', '--', 'false'], { ...box.env, FILE: box.path('n') });
    expect(result.stderr).toMatch(/^cronguard: conf: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
    expect(lines(box.path('n'))[0]).toMatch(/^failed job=conf run=1 exit=1 /);
  });
});

describe('-v says where the notifiers come from', () => {
  it('a configuration file\'s line, a variable, a flag', async () => {
    const box = sandbox();
    mkdirSync(box.path('config/cronguard'), { recursive: true });
    writeFileSync(box.path('config/cronguard/config'), '# every job\nnotify = true\n', { mode: 0o600 });
    const env = { ...box.env, CRONGUARD_NOTIFY_URL: 'http://127.0.0.1:9/hook' };
    const fromFile = await cronguard(['-v', '-n', 'vv', '--', 'true'], env);
    expect(fromFile.stderr.split('\n')).toContain(`cronguard: notifiers: --notify (${box.path('config/cronguard/config')}:2), --notify-url ($CRONGUARD_NOTIFY_URL)`);
    const fromFlag = await cronguard(['-v', '-n', 'vv', '--notify', 'true', '--', 'true'], { ...box.env });
    expect(fromFlag.stderr.split('\n')).toContain('cronguard: notifiers: --notify');
  });
});

describe('--notify-timeout on a crontab line, the notifier from the configuration file', () => {
  it('the job still runs when the file\'s notifier is unset by an empty variable, or taken out of the file', async () => {
    const box = sandbox();
    mkdirSync(box.path('config/cronguard'), { recursive: true });
    writeFileSync(box.path('config/cronguard/config'), `notify = echo "$CRONGUARD_EVENT" >> ${box.path('n')}\n`, { mode: 0o600 });
    const args = ['-n', 'nt', '--notify-timeout', '5s', '-c', `echo ran >> ${box.path('ran')}; exit 2`];
    expect((await cronguard(args, box.env)).code).toBe(2);
    expect((await cronguard(args, { ...box.env, CRONGUARD_NOTIFY: '' })).code).toBe(2);
    writeFileSync(box.path('config/cronguard/config'), '# notify taken out\n');
    expect(await cronguard(args, box.env)).toMatchObject({ code: 2, stderr: expect.stringMatching(/^cronguard: nt: failed with exit 2 after /) });
    expect(lines(box.path('ran'))).toEqual(['ran', 'ran', 'ran']);
    expect(lines(box.path('n'))).toEqual(['failed']);
  });
});

describe('a bad notifier of the configuration file or the environment', () => {
  it('a bad notifier in the configuration file or the environment is every job\'s: one line names it, and the job runs without it', async () => {
    const box = sandbox();
    mkdirSync(box.path('config/cronguard'), { recursive: true });
    writeFileSync(box.path('config/cronguard/config'), `# alerts\nnotify_url = smtp://mail\nnotify = ${fixture('notified.sh')} ${box.path('n')}\n`, { mode: 0o600 });
    const result = await cronguard(['-n', 'bad', '--', 'sh', '-c', `touch ${box.path('ran')}; exit 3`], box.env);
    const [said, summary, rest] = result.stderr.split('\n');
    expect(said).toBe(`cronguard: ${box.path('config/cronguard/config')}:2: 'smtp://mail' is not an http:// or https:// URL with a host; the job runs without this notifier`);
    expect(summary).toMatch(/^cronguard: bad: failed with exit 3 after /);
    expect(rest).toBe('');
    expect(result.code).toBe(3);
    expect(lines(box.path('n')).filter((l) => /^(failed|recovered) /.test(l))).toHaveLength(1);
    const env = { ...box.env, CRONGUARD_NOTIFY_URL: 'mailto:ops@example.com' };
    const fromEnv = await cronguard(['-n', 'bad', '--', 'true'], env);
    expect(fromEnv).toMatchObject({ code: 0, stderr: "cronguard: $CRONGUARD_NOTIFY_URL: 'mailto:ops@example.com' is not an http:// or https:// URL with a host; the job runs without this notifier\n" });
    expect(lines(box.path('n')).filter((l) => /^(failed|recovered) /.test(l))[1]).toMatch(/^recovered job=bad /);
  });
});
