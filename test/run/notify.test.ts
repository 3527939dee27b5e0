import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { BINARY, cronguard, fixture, isAlive, lines, release, runFile, runs, sandbox, start, waitFor } from '../helpers.js';

// --notify and --notify-url with the embedded log: once per incident, bounded, never the
// job's outcome. (notify-stores.test.ts: the same state in each store, and the fleet rule.)

const NOTIFIED = fixture('notified.sh');
// The events a notified.sh file holds, in order, without the output tails.
const events = (file: string) => lines(file).filter((l) => /^(failed|recovered) /.test(l));
const notifyTo = (file: string) => ['--notify', `${NOTIFIED} ${file}`];

const servers: { close(): void }[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

// A webhook stand-in on a free local port, keeping each request's body; `status` answers,
// 'hang' never does.
async function hookServer(status: number | 'hang' = 204) {
  const received: { method: string; contentType: string | undefined; body: string }[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks).toString('utf8') });
      if (status !== 'hang') res.writeHead(status).end();
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

describe('--notify: once per incident', () => {
  it('a job that fails 60 times, then succeeds, notifies exactly twice: failed at the first failure, recovered at the success', async () => {
    const box = sandbox();
    const file = box.path('notified');
    // 61 invocations from one shell, as cron would make them: the first 60 fail.
    const script = box.path('streak.sh');
    writeFileSync(
      script,
      `i=0; while [ $i -lt 61 ]; do i=$((i+1)); code=3; [ $i -eq 61 ] && code=0
"$@" -c "echo attempt $i; exit $code" > /dev/null 2>> "${box.path('stderr')}"; echo $? >> "${box.path('codes')}"; done\n`,
    );
    await runFile('/bin/sh', [script, process.execPath, BINARY, '-n', 'streak', ...notifyTo(file)], box.env);
    expect(lines(box.path('codes'))).toEqual([...Array(60).fill('3'), '0']);
    const host = hostname();
    expect(events(file)).toEqual([`failed job=streak run=1 exit=3 host=${host} status=failed`, `recovered job=streak run=61 exit=0 host=${host} status=succeeded`]);
    // The tail of each run's output comes on stdin.
    expect(readFileSync(file, 'utf8')).toContain('tail<\nattempt 1\n>tail\n');
    expect(readFileSync(file, 'utf8')).toContain('tail<\nattempt 61\n>tail\n');
    expect(runs(box.stateDir)).toHaveLength(61);
    // Only the summary lines: notifying says nothing.
    expect(lines(box.path('stderr')).filter((l) => !/: failed with exit 3 after /.test(l))).toEqual([]);
    // The next failure opens a new incident.
    await cronguard(['-n', 'streak', ...notifyTo(file), '--', 'false'], box.env);
    expect(events(file)).toHaveLength(3);
    expect(events(file)[2]).toMatch(/^failed job=streak run=62 exit=1 /);
  });

  it('a failed attempt that a retry makes good notifies nothing; a failure of the last attempt does, once', async () => {
    const box = sandbox();
    const file = box.path('notified');
    const ok = await cronguard(['-n', 'flaky', '--retries', '2', '--retry-delay', '10ms', ...notifyTo(file), '--', fixture('flaky.sh'), box.path('a'), '1', '5'], box.env);
    expect(ok.code).toBe(0);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['failed', 'succeeded']);
    expect(events(file)).toEqual([]);
    const bad = await cronguard(['-n', 'flaky', '--retries', '1', '--retry-delay', '10ms', ...notifyTo(file), '--', fixture('flaky.sh'), box.path('b'), '9', '5'], box.env);
    expect(bad.code).toBe(5);
    expect(events(file)).toEqual([expect.stringMatching(/^failed job=flaky run=4 exit=5 .* status=failed$/)]);
  });

  it('every outcome but success is a failure: a timeout (124), a command not found (127); a skip counts for nothing', async () => {
    const box = sandbox();
    const file = box.path('notified');
    const timedOut = await cronguard(['-n', 'j', '-t', '100ms', ...notifyTo(file), '--', 'sleep', '10'], box.env);
    expect(timedOut.code).toBe(124);
    expect(events(file)).toEqual([expect.stringMatching(/^failed job=j run=1 exit=124 .* status=timed_out$/)]);
    // A skip while the job holds its lock, succeeding: no recovery, and no failure.
    const holder = start(['-n', 'j', ...notifyTo(file), '--', fixture('hold.sh'), box.path('held'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('held')).length === 1, 'the holder to start');
    const skipped = await cronguard(['-n', 'j', ...notifyTo(file), '--', 'false'], box.env);
    expect(skipped.code).toBe(0);
    expect(events(file)).toHaveLength(1);
    release(box.path('go'));
    expect((await holder.done).code).toBe(0);
    expect(events(file)[1]).toMatch(/^recovered job=j run=2 exit=0 .* status=succeeded$/);
    const missing = await cronguard(['-n', 'j', ...notifyTo(file), '--', 'no-such-command-here'], box.env);
    expect(missing.code).toBe(127);
    expect(events(file)[2]).toMatch(/^failed job=j run=3 exit=127 .* status=failed$/);
    expect(readFileSync(file, 'utf8')).toContain('tail<\ncommand not found: no-such-command-here>tail');
    expect(events(file)).toHaveLength(3);
  });

  it('each run of an --every loop counts: a loop of failures notifies once', async () => {
    const box = sandbox();
    const file = box.path('notified');
    const result = await cronguard(['-n', 'loop', '--every', '50ms', '--for', '1s', ...notifyTo(file), '--', 'false'], box.env);
    expect(result.code).toBe(1);
    expect(runs(box.stateDir).every((r) => r.status === 'failed')).toBe(true);
    expect(events(file)).toEqual([expect.stringMatching(/^failed job=loop run=1 exit=1 /)]);
  });

  it('what a notifier is sent passes through redaction (a URL\'s password in the output)', async () => {
    const box = sandbox();
    const file = box.path('notified');
    await cronguard(['-n', 'leaky', ...notifyTo(file), '-c', 'echo "connecting to postgres://app:hunter22@db/x"; exit 2'], box.env);
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('postgres://app:***@db/x');
    expect(text).not.toContain('hunter22');
  });
});

describe('--notify: bounded, never the outcome', () => {
  it('a notifier that hangs is killed with its process group at --notify-timeout: one line, and the exit code is the job\'s', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    // It leaves a child behind, and waits for it.
    const hang = `sleep 600 & echo $$ $! > ${pids}; wait`;
    const result = await cronguard(['-n', 'hung', '--notify', hang, '--notify-timeout', '500ms', '-c', 'exit 3'], box.env);
    expect(result.code).toBe(3);
    const [said, summary, rest] = result.stderr.split('\n');
    expect(said).toBe("cronguard: hung: --notify command timed out after 500ms; its process group was killed; the run's outcome is unaffected");
    expect(summary).toMatch(/^cronguard: hung: failed with exit 3 after \S+ \(run 1; cronguard logs 1\)$/);
    expect(rest).toBe('');
    for (const pid of (lines(pids)[0] ?? '').split(' ').map(Number)) await waitFor(() => !isAlive(pid), `notifier process ${pid} to be gone`);
    expect(runs(box.stateDir).map((r) => [r.status, r.exit_code])).toEqual([['failed', 3]]);
  });

  it('a notifier that fails says so in one line, with its last line of stderr; a recovery\'s exit stays 0', async () => {
    const box = sandbox();
    const failing = ['--notify', 'echo "webhook down" >&2; exit 5'];
    const bad = await cronguard(['-n', 'nf', ...failing, '--', 'false'], box.env);
    expect(bad.code).toBe(1);
    expect(bad.stderr.split('\n')[0]).toBe("cronguard: nf: --notify command failed with exit 5: webhook down; the run's outcome is unaffected");
    expect(bad.stderr.split('\n')).toHaveLength(3);
    // An undelivered failure is tried again (notify-break.test.ts): this one delivers.
    expect((await cronguard(['-n', 'nf', '--notify', 'true', '--', 'false'], box.env)).code).toBe(1);
    const good = await cronguard(['-n', 'nf', ...failing, '--', 'true'], box.env);
    expect(good).toMatchObject({ code: 0, stdout: '', stderr: "cronguard: nf: --notify command failed with exit 5: webhook down; the run's outcome is unaffected\n" });
  });
});

describe('--notify-url', () => {
  it('POSTs the alert as JSON: event, job, run_id, exit_code, host, status, output', async () => {
    const box = sandbox();
    const { url, received } = await hookServer();
    const failed = await cronguard(['-n', 'hooked', '--notify-url', url, '-c', 'echo out; echo err >&2; exit 4'], box.env);
    expect(failed.code).toBe(4);
    await cronguard(['-n', 'hooked', '--notify-url', url, '--', 'true'], box.env);
    expect(received.map((r) => [r.method, r.contentType])).toEqual([['POST', 'application/json'], ['POST', 'application/json']]);
    expect(received.map((r) => JSON.parse(r.body))).toEqual([
      { event: 'failed', job: 'hooked', run_id: 1, exit_code: 4, host: hostname(), status: 'failed', output: 'out\nerr\n' },
      { event: 'recovered', job: 'hooked', run_id: 2, exit_code: 0, host: hostname(), status: 'succeeded', output: '' },
    ]);
  });

  it('a server that answers 500, or never, is one line and the exit code is the job\'s; both notifiers go together', async () => {
    const box = sandbox();
    const broken = await hookServer(500);
    const result = await cronguard(['-n', 'h5', '--notify-url', broken.url, ...notifyTo(box.path('n')), '--', 'false'], box.env);
    expect(result.code).toBe(1);
    expect(result.stderr.split('\n')[0]).toBe(`cronguard: h5: --notify-url to ${new URL(broken.url).origin} failed: HTTP 500; the run's outcome is unaffected`);
    expect(events(box.path('n'))).toHaveLength(1);
    const silent = await hookServer('hang');
    const hung = await cronguard(['-n', 'hh', '--notify-url', silent.url, '--notify-timeout', '300ms', '--', 'sh', '-c', 'exit 6'], box.env);
    expect(hung.code).toBe(6);
    expect(hung.stderr.split('\n')[0]).toBe(`cronguard: hh: --notify-url to ${new URL(silent.url).origin} failed: no answer within 300ms; the run's outcome is unaffected`);
    // On a busy machine the POST may not even reach the server in 300ms: no answer either way.
    expect(silent.received.length).toBeLessThanOrEqual(1);
  });
});

describe('notifiers from the environment and the configuration file', () => {
  it('notify and notify_url keys set every job\'s notifiers; the environment overrides the file, a flag both', async () => {
    const box = sandbox();
    const { url, received } = await hookServer();
    mkdirSync(box.path('config/cronguard'), { recursive: true });
    const config = box.path('config/cronguard/config');
    writeFileSync(config, `notify = ${NOTIFIED} ${box.path('from-file')}\nnotify_url = ${url}\n`, { mode: 0o600 });
    expect((await cronguard(['-n', 'cf', '--', 'false'], box.env)).code).toBe(1);
    expect(events(box.path('from-file'))).toHaveLength(1);
    expect(received).toHaveLength(1);
    const env = { ...box.env, CRONGUARD_NOTIFY: `${NOTIFIED} ${box.path('from-env')}` };
    await cronguard(['-n', 'cf', '--', 'true'], env);
    expect(events(box.path('from-env'))).toEqual([expect.stringMatching(/^recovered job=cf /)]);
    await cronguard(['-n', 'cf', ...notifyTo(box.path('from-flag')), '--', 'false'], env);
    expect(events(box.path('from-flag'))).toEqual([expect.stringMatching(/^failed job=cf /)]);
    expect(events(box.path('from-file'))).toHaveLength(1);
    expect(received).toHaveLength(3);
    // A notifier does not inherit the notifier settings: a job it runs under cronguard in
    // turn does not notify of its own failures too.
    await cronguard(['-n', 'cf', '--notify', `echo "[\${CRONGUARD_NOTIFY-}][\${CRONGUARD_NOTIFY_URL-}]" > ${box.path('inherited')}`, '--', 'true'], { ...env, CRONGUARD_NOTIFY_URL: url });
    expect(lines(box.path('inherited'))).toEqual(['[][]']);
  });

  it('--no-log: a notifier from the environment or the file tells of every failure and of no recovery', async () => {
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_NOTIFY: `${NOTIFIED} ${box.path('n')}` };
    for (const command of ['false', 'false', 'true']) await cronguard(['--no-log', '-n', 'nl', '--', command], env);
    expect(events(box.path('n'))).toEqual([expect.stringMatching(/^failed job=nl run= exit=1 /), expect.stringMatching(/^failed job=nl run= exit=1 /)]);
    expect(runs(box.stateDir)).toEqual([]);
  });
});

describe('a shared log that cannot answer (records spooled)', () => {
  it('a failure notifies all the same (a duplicate beats a missed alert); a success does not', async () => {
    const box = sandbox();
    // A port the system just handed out and took back: nothing listens there.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const args = ['--db', `postgres://cronguard@127.0.0.1:${port}/fleet`, '-l', 'flock', '-n', 'sp', ...notifyTo(box.path('n'))];
    for (const command of ['false', 'false', 'true']) await cronguard([...args, '--', command], box.env);
    expect(events(box.path('n'))).toEqual([expect.stringMatching(/^failed job=sp run= exit=1 /), expect.stringMatching(/^failed job=sp run= exit=1 /)]);
  });
});

describe('bad notifier settings: one line, 64, nothing run', () => {
  const cases: [string, string[], Record<string, string>, string][] = [
    ['a URL of another scheme', ['--notify-url', 'ftp://example.com/x'], {}, "--notify-url: 'ftp://example.com/x' is not an http:// or https:// URL with a host"],
    ['a URL with no host', ['--notify-url', 'http:example.com'], {}, "--notify-url: 'http:example.com' is not an http:// or https:// URL with a host"],
    ['a URL with a space', ['--notify-url', 'http://example.com/a b'], {}, "--notify-url: 'http://example.com/a b' contains spaces or control characters"],
    ['an empty command', ['--notify', ' '], {}, '--notify needs a shell command'],
    ['--notify-timeout 0', ['--notify', 'true', '--notify-timeout', '0'], {}, "--notify-timeout: '0' is not between 1ms and 1h"],
    ['--notify-timeout 0 without a notifier', ['--notify-timeout', '0'], {}, "--notify-timeout: '0' is not between 1ms and 1h"],
    ['--notify with --no-log', ['--no-log', '--notify', 'true'], {}, '--notify notifies once per incident, which the run log remembers; it cannot go with --no-log'],
    ['--notify-url with --no-log', ['--no-log', '--notify-url', 'http://example.com/'], {}, '--notify-url notifies once per incident, which the run log remembers; it cannot go with --no-log'],
  ];
  it.each(cases)('%s', async (_what, args, extra, message) => {
    const box = sandbox();
    const result = await cronguard(['-n', 'bad', ...args, '--', 'touch', box.path('ran')], { ...box.env, ...extra });
    expect(result).toMatchObject({ code: 64, stdout: '', stderr: `cronguard: ${message} (see cronguard --help)\n` });
    expect(lines(box.path('ran'))).toEqual([]);
    expect(runs(box.stateDir)).toEqual([]);
  });
});
