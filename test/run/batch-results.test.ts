import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// A batch's results by argument (issue 36, item 5): one bad target no longer fails the whole
// batch, and retries re-run only the targets that failed. CRONGUARD_RESULTS is a file the
// command writes `ARG<TAB>ok` or `ARG<TAB>failed[<TAB>REASON]` lines to.
describe.each(STORES)('--batch with results by argument (%s)', (kind) => {
  it('each request ends with its own status; a retry runs the failed target alone, each request its own attempts', async () => {
    const box = storeBox(kind);
    const job = box.job('targets');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    for (const target of ['web1', 'bad-db', 'web2']) await box.request(job, [target]);
    const result = await cronguard(['-n', job, '--on-request', '--batch', '--retries', '2', '--retry-delay', '100ms', '--', fixture('targets.sh'), log], box.env);
    expect(result.code).toBe(1);
    expect(lines(log)).toEqual(['run web1 bad-db web2', 'run bad-db', 'run bad-db']);
    const requests = (await box.requests()).map((r) => [r.args[0], r.status, r.attempts, r.error]);
    expect(requests).toEqual([['web1', 'succeeded', 1, null], ['bad-db', 'failed', 3, 'cannot reach bad-db'], ['web2', 'succeeded', 1, null]]);
    expect((await box.runs()).map((r) => [r.status, r.exit_code])).toEqual([['failed', 1], ['failed', 1], ['failed', 1]]);
  });

  it('a command that exits 0 but says a target failed fails (exit 1), naming it; one it does not mention follows the exit code', async () => {
    const box = storeBox(kind);
    const job = box.job('quiet');
    await cronguard(['migrate'], box.env);
    for (const target of ['a', 'b', 'c']) await box.request(job, [target]);
    const script = 'printf "a\\tok\\nb\\tfailed\\tdisk full\\n" > "$CRONGUARD_RESULTS"';
    const result = await cronguard(['-n', job, '--on-request', '--batch', '--', 'sh', '-c', script, 'x'], box.env);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/: failed: 1 of 3 requests failed: b \(disk full\) \(the command exited 0\) \(run \d+; cronguard logs \d+\)\n$/);
    expect((await box.requests()).map((r) => [r.args[0], r.status])).toEqual([['a', 'succeeded'], ['b', 'failed'], ['c', 'succeeded']]);
    const [run] = await box.runs();
    expect(run).toMatchObject({ status: 'failed', exit_code: 0, error: '1 of 3 requests failed: b (disk full)' });
  });

  it('a line naming no target is ignored with one warning; a file with nothing keeps the batch one outcome; requests by #ID', async () => {
    const box = storeBox(kind);
    const job = box.job('stray');
    await cronguard(['migrate'], box.env);
    for (const target of ['p', 'q']) await box.request(job, [target]);
    const stray = await cronguard(['-n', job, '--on-request', '--batch', '--', 'sh', '-c', 'printf "nobody\\tok\\n" > "$CRONGUARD_RESULTS"; exit 3', 'x'], box.env);
    expect(stray.code).toBe(3);
    expect(stray.stderr).toMatch(/^cronguard: \S+: CRONGUARD_RESULTS: 1 line naming no argument of this attempt \(its arguments, or #ID\) as ARG<TAB>ok\|failed\[<TAB>REASON\], ignored: 'nobody\\tok'\n/);
    expect((await box.requests()).map((r) => r.status)).toEqual(['failed', 'failed']);
    const ids = [await box.request(job, ['r s']), await box.request(job, ['t'])];
    const byId = await cronguard(['-n', job, '--on-request', '--batch', '--', 'sh', '-c', `printf "#${ids[0]}\\tfailed\\n" > "$CRONGUARD_RESULTS"`, 'x'], box.env);
    expect(byId.code).toBe(1);
    expect((await box.requests()).slice(2).map((r) => [r.args[0], r.status])).toEqual([['r s', 'failed'], ['t', 'succeeded']]);
  });

  it("a REASON is masked as any output is (an env file's value), and a runaway file is read to a bound", async () => {
    const box = storeBox(kind);
    const job = box.job('secret');
    await cronguard(['migrate'], box.env);
    await box.request(job, ['db']);
    const env = box.path('job.env');
    writeFileSync(env, 'TOKEN=tok-8f7e6d5c4b\n', { mode: 0o600 });
    const script = 'head -c 3000000 /dev/zero | tr "\\0" x >> "$CRONGUARD_RESULTS"; printf "\ndb\tfailed\tauth with $TOKEN refused\n" >> "$CRONGUARD_RESULTS"';
    const result = await cronguard(['-n', job, '--env-file', env, '--on-request', '--batch', '--', 'sh', '-c', script, 'x'], box.env);
    // Only the first MiB is read, to its last whole line: here none, so the batch is one
    // outcome (the command's exit 0), whatever came after.
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect((await box.requests()).map((r) => r.status)).toEqual(['succeeded']);
    await box.request(job, ['db']);
    const again = await cronguard(['-n', job, '--env-file', env, '--on-request', '--batch', '--', 'sh', '-c', 'printf "db\tfailed\tauth with $TOKEN refused\n" > "$CRONGUARD_RESULTS"', 'x'], box.env);
    expect(again.code).toBe(1);
    const [, last] = await box.requests();
    expect(last).toMatchObject({ status: 'failed', error: 'auth with *** refused' });
    expect(again.stderr).not.toContain('tok-8f7e6d5c4b');
  });
});


// Issue 36, item 6: the job's last run is whichever batch ended last, so a target that fails
// every time hid behind the batches that succeeded. Its latest request failing counts.
describe.each(STORES)('a target that fails while the batches after it succeed (%s)', (kind) => {
  it('counts as failing in status, check, metrics and the web page, naming the target', async () => {
    const box = storeBox(kind);
    const job = box.job('hidden');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    const batch = () => cronguard(['-n', job, '--on-request', '--batch', '--every-tick', '--', fixture('targets.sh'), log], box.env);
    await box.request(job, ['web1']);
    await box.request(job, ['bad-web3']);
    expect((await batch()).code).toBe(1);
    await box.request(job, ['web2']);
    expect((await batch()).code).toBe(0);
    const [shown] = JSON.parse((await cronguard(['status', '--json', job], box.env)).stdout) as { last_status: string; failed_requests: { args: string[]; error: string }[] }[];
    expect(shown).toMatchObject({ last_status: 'succeeded', failed_requests: [{ args: ['bad-web3'], error: 'cannot reach bad-web3' }] });
    expect((await cronguard(['status', job], box.env)).stdout).toMatch(/failing +1 target failed its latest request: bad-web3 \(cannot reach bad-web3\)/);
    const check = await cronguard(['check', job, '--max-age', '1h'], box.env);
    expect(check.code).toBe(2);
    expect(check.stdout).toMatch(/^CRITICAL - .*last run succeeded, but 1 target failed its latest request: bad-web3 \(cannot reach bad-web3\)/);
    const metrics = (await cronguard(['metrics'], box.env)).stdout;
    expect(metrics).toContain(`cronguard_failing{job="${job}"} 1`);
    expect(metrics).toContain(`cronguard_request_target_failed{job="${job}",target="bad-web3"} 1`);
    // The target succeeds at last: no longer failing.
    await box.request(job, ['web3']);
    await box.request(job, ['bad-web3']);
    expect((await cronguard(['-n', job, '--on-request', '--batch', '--every-tick', '--', 'sh', '-c', 'for t; do printf "%s\\tok\\n" "$t" >> "$CRONGUARD_RESULTS"; done', 'x'], box.env)).code).toBe(0);
    const [after] = JSON.parse((await cronguard(['status', '--json', job], box.env)).stdout) as { failed_requests: unknown[] }[];
    expect(after?.failed_requests).toEqual([]);
  });
});
