import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runUuid, signalUrl, tail } from '../../src/run/report/ping.js';
import { cronguard, fixture, runs, sandbox } from '../helpers.js';

// One request as the monitoring server saw it.
interface Received {
  readonly method: string;
  readonly path: string;
  readonly rid: string | null;
  readonly body: string;
  readonly userAgent: string | undefined;
  readonly contentType: string | undefined;
}

// What the server does with the n-th request (from 0): answer with a status, or never.
type Answer = (request: Received, n: number) => number | 'hang';

const servers: { close(): void }[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

// A Healthchecks stand-in on a free local port that records every request it gets.
async function pingServer(answer: Answer = () => 200) {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const request: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        rid: url.searchParams.get('rid'),
        body: Buffer.concat(chunks).toString('utf8'),
        userAgent: req.headers['user-agent'],
        contentType: req.headers['content-type'],
      };
      const status = answer(request, received.length);
      received.push(request);
      if (status !== 'hang') res.writeHead(status).end('OK');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

// A port nothing listens on: one the system just handed out and took back.
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}/ping/abc`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const paths = (received: readonly Received[]) => received.map((r) => r.path.replace(/rid=[^&]*/, 'rid=RID'));

describe('--ping-url', () => {
  it('pings URL/start when the command starts and URL when it succeeds, with one rid and the output as the body', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    const result = await cronguard(['-n', 'pinged', '--ping-url', `${url}/ping/abc`, '--', 'sh', '-c', 'echo hello; echo world >&2'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'hello\n', stderr: 'world\n' });
    expect(paths(received)).toEqual(['/ping/abc/start?rid=RID', '/ping/abc?rid=RID']);
    const [start, end] = received as [Received, Received];
    expect(start).toMatchObject({ method: 'POST', body: '' });
    expect(start.userAgent).toMatch(/^cronguard\/\d+\.\d+\.\d+/);
    expect(end).toMatchObject({ method: 'POST', body: 'hello\nworld\n', contentType: 'text/plain; charset=utf-8', rid: start.rid });
    // The rid is the run's own, traceable to its row of the run log.
    const [row] = runs(box.stateDir);
    expect(start.rid).toMatch(UUID);
    expect(start.rid).toBe(runUuid(row?.run_key as string));
    expect(row).toMatchObject({ status: 'succeeded', exit_code: 0 });
  });

  it('sends the tail of the output, bounded by --ping-body-bytes (10240 by default, 0: none)', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    const big = 'head -c 30000 /dev/zero | tr "\\0" x; echo; seq 1 2000';
    await cronguard(['-n', 'big', '--ping-url', url, '--', 'sh', '-c', big], box.env);
    await cronguard(['-n', 'small', '--ping-url', url, '--ping-body-bytes', '100', '--', 'sh', '-c', big], box.env);
    await cronguard(['-n', 'none', '--ping-url', url, '--ping-body-bytes', '0', '--', 'sh', '-c', big], box.env);
    const bodies = received.filter((r) => !r.path.startsWith('/start')).map((r) => r.body);
    const output = runs(box.stateDir)[0]?.output as string;
    expect(bodies.map((b) => Buffer.byteLength(b))).toEqual([10240, 100, 0]);
    expect(bodies[0]).toBe(output.slice(-10240));
    expect(bodies[1]).toMatch(/\n1999\n2000\n$/);
  });

  it('pings URL/fail when the command fails; the exit code and summary line are the command\'s', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    const result = await cronguard(['-n', 'broken', '--ping-url', url, '--', 'sh', '-c', 'echo broken; exit 3'], box.env);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/^cronguard: broken: failed with exit 3 after .* \(run 1; cronguard logs 1\)\n$/);
    expect(paths(received)).toEqual(['/start?rid=RID', '/fail?rid=RID']);
    expect(received[1]?.body).toBe('broken\n');
  });

  it('pings URL/<exit code> with --ping-exit-code: 0, a failure, and 128+N for a signal', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    const run = (name: string, script: string) => cronguard(['-n', name, '--ping-url', url, '--ping-exit-code', '--', 'sh', '-c', script], box.env);
    expect((await run('zero', 'true')).code).toBe(0);
    expect((await run('three', 'exit 3')).code).toBe(3);
    expect((await run('killed', 'kill -TERM $$')).code).toBe(143);
    expect(paths(received).filter((p) => !p.startsWith('/start'))).toEqual(['/0?rid=RID', '/3?rid=RID', '/143?rid=RID']);
  });

  it('keeps the query string of the URL, and a trailing slash makes no //start', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    await cronguard(['-n', 'q', '--ping-url', `${url}/ping/abc?source=cron&x=a%20b`, '--', 'true'], box.env);
    await cronguard(['-n', 'slash', '--ping-url', `${url}/ping/abc/`, '--', 'false'], box.env);
    expect(paths(received)).toEqual([
      '/ping/abc/start?source=cron&x=a%20b&rid=RID',
      '/ping/abc?source=cron&x=a%20b&rid=RID',
      '/ping/abc/start?rid=RID',
      '/ping/abc/fail?rid=RID',
    ]);
  });

  it('reports a run with --retries once: start with the first attempt, end after the last', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    const args = ['-n', 'flaky', '--ping-url', url, '--retries', '2', '--retry-delay', '100ms', '--', fixture('flaky.sh'), box.path('attempts'), '1', '5'];
    const result = await cronguard(args, box.env);
    expect(result.code).toBe(0);
    expect(paths(received)).toEqual(['/start?rid=RID', '/?rid=RID']);
    const rows = runs(box.stateDir);
    expect(rows.map((r) => r.status)).toEqual(['failed', 'succeeded']);
    expect(received[0]?.rid).toBe(runUuid(rows[0]?.run_key as string));
    expect(received[1]?.rid).toBe(received[0]?.rid);
  });

  it('sends nothing for a skipped invocation (a paused job): a skip is not a run', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    expect((await cronguard(['disable', 'paused'], box.env)).code).toBe(0);
    const result = await cronguard(['-n', 'paused', '--ping-url', url, '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(received).toEqual([]);
  });

  it('reports a command that cannot start as a failure, with the reason as the body', async () => {
    const box = sandbox();
    const { url, received } = await pingServer();
    const result = await cronguard(['-n', 'missing', '--ping-url', url, '--', 'no-such-command-anywhere'], box.env);
    expect(result.code).toBe(127);
    expect(paths(received)).toEqual(['/fail?rid=RID']);
    expect(received[0]?.body).toBe('command not found: no-such-command-anywhere');
  });
});

describe('the pieces of a ping', () => {
  it('rid: the version 5 UUID of the run key in cronguard\'s namespace, as Python computes it', () => {
    // python3 -c "import uuid; print(uuid.uuid5(uuid.UUID('0f9281b8-8ae4-43b2-b046-5ecd87da8cf9'), 'abc/1/2'))"
    expect(runUuid('abc/1/2')).toBe('bb6f44f1-2504-5015-b09b-bf6f7479053d');
  });

  it('signal URLs: the path extended, the query kept', () => {
    expect(signalUrl('https://h/p/', 'start', 'r').href).toBe('https://h/p/start?rid=r');
    expect(signalUrl('https://h/p//', 'success', 'r').href).toBe('https://h/p?rid=r');
    expect(signalUrl('https://h/', 'success', 'r').href).toBe('https://h/?rid=r');
    expect(signalUrl('https://u:pw@h/p?a=1&b', '3', 'r').href).toBe('https://u:pw@h/p/3?a=1&b&rid=r');
  });

  it('the body: the last bytes, never half a character', () => {
    expect(tail('abc', 10).toString()).toBe('abc');
    expect(tail('abcdef', 3).toString()).toBe('def');
    expect(tail('xé€', 4).toString()).toBe('€');
    expect(tail(null, 10).length).toBe(0);
  });
});

describe('a ping that fails never changes the run', () => {
  it('an unreachable URL: the job runs and succeeds, exit 0, one warning line, recorded as succeeded', async () => {
    const box = sandbox();
    const target = await closedPort();
    const result = await cronguard(['-n', 'offline', '--ping-url', target, '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(0);
    expect(existsSync(box.path('ran'))).toBe(true);
    expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    expect(result.stderr).toMatch(/^cronguard: offline: ping to http:\/\/127\.0\.0\.1:\d+ failed \(.*ECONNREFUSED.*\); the run's outcome is unaffected\n$/);
    // The warning names the server, not the check's key in the path.
    expect(result.stderr).not.toContain('/ping/abc');
    const history = JSON.parse((await cronguard(['history', 'offline', '--json'], box.env)).stdout);
    expect(history).toMatchObject([{ job: 'offline', status: 'succeeded', exit_code: 0 }]);
  });

  it('an unreachable URL on a failing run: the command\'s exit code, and the summary line stays last', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'offline', '--ping-url', await closedPort(), '--', 'sh', '-c', 'exit 5'], box.env);
    expect(result.code).toBe(5);
    const lines = result.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/ping to .* failed/);
    expect(lines[1]).toMatch(/^cronguard: offline: failed with exit 5/);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'failed', exit_code: 5 });
  });

  it('a server that never answers holds cronguard up for a bounded time only', async () => {
    const box = sandbox();
    const { url, received } = await pingServer(() => 'hang');
    const started = Date.now();
    const result = await cronguard(['-n', 'hung', '--ping-url', url, '--', 'true'], box.env);
    // The bound is about 10 s; this only catches a hang, on however loaded a machine.
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^cronguard: hung: ping to .* failed \(.*no answer within .*\); the run's outcome is unaffected\n$/);
    expect(received.map((r) => r.path.split('?')[0])).toContain('/start');
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'succeeded' });
  });

  it('retries a 500, and then it is delivered without a word', async () => {
    const box = sandbox();
    const delivered = box.path('start-delivered');
    // The first start and the first end get a 500; the command runs until the start's retry
    // has arrived, however slow the machine.
    const { url, received } = await pingServer((_, n) => {
      if (n === 1) writeFileSync(delivered, '');
      return n === 0 || n === 2 ? 500 : 200;
    });
    const wait = `while [ ! -e '${delivered}' ]; do sleep 0.05; done`;
    const result = await cronguard(['-n', 'flaky-server', '--ping-url', url, '--', 'sh', '-c', wait], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(paths(received)).toEqual(['/start?rid=RID', '/start?rid=RID', '/?rid=RID', '/?rid=RID']);
    expect(new Set(received.map((r) => r.rid)).size).toBe(1);
  });

  it('does not retry a 404 (no such check), and warns once for the whole invocation', async () => {
    const box = sandbox();
    const { url, received } = await pingServer(() => 404);
    const result = await cronguard(['-n', 'unknown', '--ping-url', url, '--every', '100ms', '--for', '3s', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^cronguard: unknown: ping to .* failed \(start: HTTP 404; success: HTTP 404\); the run's outcome is unaffected\n$/);
    const rows = runs(box.stateDir);
    expect(rows.length).toBeGreaterThan(1);
    // Each run sent its start and its end once: a 404 is an answer, not a network failure.
    expect(received).toHaveLength(2 * rows.length);
  });
});

describe('a malformed ping URL is a usage error', () => {
  it.each([['ftp://x'], ['not a url'], ['http://'], ['http://[::1'], ['https://h/x?rid=1']])('%j: exit 64, one line, nothing run or recorded', async (url) => {
    const box = sandbox();
    const result = await cronguard(['-n', 'bad', '--ping-url', url, '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: --ping-url: '.*' .*\(see cronguard --help\)\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });

  it.each([[['--ping-exit-code']], [['--ping-body-bytes', '100']]])('%j without --ping-url: exit 64', async (args) => {
    const box = sandbox();
    const result = await cronguard([...args, '-n', 'bad', '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 64 });
    expect(result.stderr).toMatch(/applies with --ping-url/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });
});
