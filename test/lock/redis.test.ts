import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, runs, sandbox, start, waitFor } from '../helpers.js';
import { oneLine } from '../one-line.js';
import { haveRedis, type PrivateRedis, privateRedis, REDIS_SERVER } from '../redis-server.js';

// -l redis (issue 39): a lease on a Redis key beside the embedded run log, against Debian's
// redis-server started by this file on a free port.

// The marks fenced.sh left: [kind, ms, token?].
function marks(file: string): string[][] {
  return lines(file).map((l) => l.split(' '));
}

describe('-l redis: bad input', () => {
  for (const [args, message] of [
    [['-l', 'redis'], /-l redis needs a lock URL: give --lock-url/],
    [['--lock-url', 'http://127.0.0.1:6379'], /--lock-url: a lock URL starts with redis:\/\/ or rediss:\/\//],
    [['--lock-url', 'redis://127.0.0.1/x'], /the path is a database number/],
    [['--lock-url', 'redis://127.0.0.1', '-l', 'flock'], /--lock-url names the server of a redis lock; it cannot go with -l flock/],
    [['--lock-url', 'redis://127.0.0.1?ca=/x'], /ca= checks a TLS server; use rediss:\/\//],
    [['--lock-url', 'redis://127.0.0.1', '--lease-ttl', '2s'], /--lease-ttl: '2s' is shorter than the minimum, 5s/],
  ] as const) {
    it(`${args.join(' ')}: exit 64, one line, nothing run`, async () => {
      const box = sandbox();
      const result = await cronguard([...args, '-n', 'bad', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
      expect(result.code).toBe(64);
      expect(oneLine(result.stderr)).toMatch(message);
      expect(lines(box.path('ran'))).toEqual([]);
    });
  }

  it('a lock URL from the environment is for -l redis lines: -l flock keeps its own lock', async () => {
    const box = sandbox();
    const result = await cronguard(['-l', 'flock', '-n', 'own', '--', 'true'], { ...box.env, CRONGUARD_LOCK_URL: 'redis://127.0.0.1:1' });
    expect(result).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('-l redis: unreachable', () => {
  it('nothing listening: exit 69, one line, nothing run', async () => {
    const box = sandbox();
    const result = await cronguard(['--lock-url', 'redis://127.0.0.1:1', '-n', 'down', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
    expect(result.code).toBe(69);
    expect(oneLine(result.stderr)).toMatch(/redis redis:\/\/127\.0\.0\.1:1\/0 is unreachable: connect ECONNREFUSED/);
    expect(lines(box.path('ran'))).toEqual([]);
  });
});

describe.skipIf(!haveRedis)(haveRedis ? '-l redis' : `-l redis: skipped, ${REDIS_SERVER} is missing`, () => {
  let redis: PrivateRedis | null = null;
  const server = async () => (redis ??= await privateRedis());

  it('a redis:// lock URL implies -l redis: the command gets a fencing token that grows, the key is gone after, the run is recorded', async () => {
    const r = await server();
    const box = sandbox();
    const out = box.path('tokens');
    const env = { ...box.env, CRONGUARD_LOCK_URL: r.url() };
    for (let i = 0; i < 3; i++) {
      const result = await cronguard(['--every-tick', '-n', 'token', '--', 'sh', '-c', `echo "$CRONGUARD_FENCING_TOKEN $CRONGUARD_LOCK_KEY" >> ${out}`], env);
      expect(result).toMatchObject({ code: 0, stderr: '' });
    }
    const tokens = lines(out).map((l) => l.split(' '));
    expect(tokens.map((t) => t[1])).toEqual(['cronguard:0:token', 'cronguard:0:token', 'cronguard:0:token']);
    const numbers = tokens.map((t) => BigInt(t[0] as string));
    expect(numbers[1]).toBeGreaterThan(numbers[0] as bigint);
    expect(numbers[2]).toBeGreaterThan(numbers[1] as bigint);
    expect(r.cli('EXISTS', 'cronguard:0:token')).toBe('0');
    expect(r.cli('GET', 'cronguard:0:token:fence')).toBe(String(numbers[2]));
    expect(runs(box.stateDir).map((row) => [row.status, row.lock_backend, row.lock_key])).toEqual(Array(3).fill(['succeeded', 'redis', 'cronguard:0:token']));
  });

  it('the fencing counter never falls back: after FLUSHALL the next token is still greater', async () => {
    const r = await server();
    const box = sandbox();
    const out = box.path('tokens');
    const args = ['--lock-url', r.url(), '--every-tick', '-n', 'flushed', '--', 'sh', '-c', `echo "$CRONGUARD_FENCING_TOKEN" >> ${out}`];
    expect(await cronguard(args, box.env)).toMatchObject({ code: 0, stderr: '' });
    r.cli('FLUSHALL');
    expect(await cronguard(args, box.env)).toMatchObject({ code: 0, stderr: '' });
    const [first, second] = lines(out).map(BigInt);
    expect(second).toBeGreaterThan(first as bigint);
  });

  it('an application holds a job off with SET cronguard:0:JOB x NX PX: the invocation skips (-E), the command does not run', async () => {
    const r = await server();
    const box = sandbox();
    expect(r.cli('SET', 'cronguard:0:app', 'deploying', 'NX', 'PX', '60000')).toBe('OK');
    const result = await cronguard(['--lock-url', r.url(), '-E', '3', '-n', 'app', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
    expect(result).toMatchObject({ code: 3, stderr: '' });
    expect(lines(box.path('ran'))).toEqual([]);
    // The application's value is left alone.
    expect(r.cli('GET', 'cronguard:0:app')).toBe('deploying');
  });

  it('?prefix= and /DB name the keys: cronguard:PREFIX:JOB, in that database', async () => {
    const r = await server();
    const box = sandbox();
    const result = await cronguard(['--lock-url', `${r.url()}/3?prefix=shop`, '--every-tick', '-n', 'pre', '--', 'sh', '-c', 'echo "$CRONGUARD_LOCK_KEY"'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'cronguard:shop:pre\n', stderr: '' });
    expect(r.cli('-n', '3', 'EXISTS', 'cronguard:shop:pre:fence')).toBe('1');
  });

  it("one run per tick across hosts: a minute another host claimed is skipped (exit 0), --every-tick runs; this host's own claim is its own", async () => {
    const r = await server();
    const box = sandbox();
    const minute = new Date().toISOString().slice(0, 16);
    const next = new Date(Date.now() + 60_000).toISOString().slice(0, 16);
    for (const m of [minute, next]) r.cli('SET', `cronguard:0:tick:tick:${m}`, 'other-host', 'PX', '120000');
    const ran = box.path('ran');
    const command = ['--', 'sh', '-c', `echo ran >> ${ran}`];
    const skipped = await cronguard(['--lock-url', r.url(), '-v', '-n', 'tick', ...command], box.env);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toMatch(/already ran this minute on host other-host/);
    expect(lines(ran)).toEqual([]);
    expect(await cronguard(['--lock-url', r.url(), '--every-tick', '-n', 'tick', ...command], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['ran']);
    // A minute of nobody's is claimed for this host, which may run again in it.
    const free = await cronguard(['--lock-url', r.url(), '-n', 'tick2', ...command], box.env);
    expect(free).toMatchObject({ code: 0, stderr: '' });
    const claimed = r.cli('KEYS', 'cronguard:0:tick2:tick:*').split('\n');
    expect(claimed).toHaveLength(1);
    expect(r.cli('GET', claimed[0] as string)).not.toBe('');
    expect(Number(r.cli('PTTL', claimed[0] as string))).toBeLessThanOrEqual(120_000);
    expect(await cronguard(['--lock-url', r.url(), '-n', 'tick2', ...command], box.env)).toMatchObject({ code: 0, stderr: '' });
  });

  it('an ACL user with a password works; a wrong password is 77 with one line; neither password is ever printed', async () => {
    const r = await server();
    r.cli('ACL', 'SETUSER', 'cron', 'on', '>s3cret-Pass', '~cronguard:*', '+@all');
    const box = sandbox();
    const ok = await cronguard(['--lock-url', r.url('cron:s3cret-Pass'), '-v', '--every-tick', '-n', 'acl', '--', 'sh', '-c', 'echo "$CRONGUARD_LOCK_URL"'], box.env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe(`redis://cron@127.0.0.1:${r.port}/0\n`);
    expect(ok.stderr).not.toMatch(/s3cret/);
    const wrong = await cronguard(['--lock-url', r.url('cron:wrong-Pass'), '-n', 'acl', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
    expect(wrong.code).toBe(77);
    expect(oneLine(wrong.stderr)).toMatch(/refused cronguard: WRONGPASS/);
    expect(wrong.stderr).not.toMatch(/wrong-Pass/);
    expect(lines(box.path('ran'))).toEqual([]);
    // The least a user needs, as docs/fleet-redis.md gives it: enough for a run and its tick.
    r.cli('ACL', 'SETUSER', 'least', 'on', '>least-Pass', '~cronguard:*', '+eval', '+client|setname', '+get', '+set', '+incr', '+pexpire', '+del', '+time');
    const least = await cronguard(['--lock-url', r.url('least:least-Pass'), '-n', 'least', '--', 'true'], box.env);
    expect(least).toMatchObject({ code: 0, stderr: '' });
    // Without EVAL: refused (77), nothing run.
    r.cli('ACL', 'SETUSER', 'noeval', 'on', '>noeval-Pass', '~cronguard:*', '+client|setname');
    const noEval = await cronguard(['--lock-url', r.url('noeval:noeval-Pass'), '-n', 'least', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
    expect(noEval.code).toBe(77);
    expect(oneLine(noEval.stderr)).toMatch(/NOPERM/);
    expect(lines(box.path('ran'))).toEqual([]);
    // From the environment, the same.
    const fromEnv = await cronguard(['-n', 'acl', '--', 'true'], { ...box.env, CRONGUARD_LOCK_URL: r.url('cron:wrong-Pass') });
    expect(fromEnv.code).toBe(77);
    expect(fromEnv.stderr).not.toMatch(/wrong-Pass/);
  });

  it('SIGKILL of a holder: the next invocation, waiting, gets the lock within the ttl', async () => {
    const r = await server();
    const box = sandbox();
    const first = box.path('first');
    const holder = start(['--lock-url', r.url(), '--lease-ttl', '5s', '--every-tick', '-n', 'killed', '--', fixture('fenced.sh'), first], box.env);
    await waitFor(() => lines(first).length > 1, 'the first command to run');
    const second = box.path('second');
    const waiting = start(['--lock-url', r.url(), '--lease-ttl', '5s', '--every-tick', '-w', '30s', '-n', 'killed', '--', 'sh', '-c', `date +%s%3N > ${second}`], box.env);
    // The waiter is polling (its command has not run) when the holder dies.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(lines(second)).toEqual([]);
    holder.child.kill('SIGKILL');
    const killedAt = Date.now();
    await holder.done;
    expect(await waiting.done).toMatchObject({ code: 0, stderr: '' });
    const startedAt = Number(lines(second)[0]);
    expect(startedAt - killedAt).toBeLessThan(5000 + 1500);
    // The first command died with its wrapper, before the second started.
    const last = marks(first).at(-1) as string[];
    expect(Number(last[1])).toBeLessThan(startedAt);
  });

  it('FLUSHALL mid-run: the holder finds its key gone at its next renewal, stops its command, exits 75 (lock_lost)', async () => {
    const r = await server();
    const box = sandbox();
    const file = box.path('fenced');
    const holder = start(['--lock-url', r.url(), '--lease-ttl', '6s', '--every-tick', '-n', 'flush', '--', fixture('fenced.sh'), file], box.env);
    await waitFor(() => lines(file).length > 1, 'the command to run');
    r.cli('FLUSHALL');
    const ended = await holder.done;
    expect(ended.code).toBe(75);
    expect(ended.stderr).toMatch(/no longer this holder's/);
    expect(marks(file).at(-1)?.[0]).toBe('term');
    expect(runs(box.stateDir).map((row) => row.status)).toEqual(['lock_lost']);
  });

  it('rediss:// with ?ca=: the lock over TLS, the server checked against that CA', async () => {
    const r = await privateRedis({ tls: true });
    const tls = r.tls as { port: number; ca: string };
    const box = sandbox();
    const url = `rediss://127.0.0.1:${tls.port}?ca=${tls.ca}`;
    const ok = await cronguard(['--lock-url', url, '--every-tick', '-n', 'tls', '--', 'sh', '-c', 'echo "$CRONGUARD_FENCING_TOKEN"'], box.env);
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(Number(ok.stdout)).toBeGreaterThan(0);
    // Without the CA the certificate is not trusted: nothing runs.
    const untrusted = await cronguard(['--lock-url', `rediss://127.0.0.1:${tls.port}`, '-n', 'tls', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
    expect(untrusted.code).toBe(69);
    expect(oneLine(untrusted.stderr)).toMatch(/self-signed certificate/);
    expect(lines(box.path('ran'))).toEqual([]);
  });
});
