import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { RunRow } from '../../src/store/types.js';
import { collected, cronguard, fixture, release, start, waitFor } from '../helpers.js';
import { mysqlQuery } from '../mysql-helpers.js';
import { sql } from '../pg-helpers.js';
import { STORES, type StoreBox, storeBox } from '../stores.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

async function runningRow(box: StoreBox, job: string): Promise<RunRow> {
  // The embedded log may be mid-creation when first looked at.
  const find = async () => (await box.runs().catch(() => [])).find((r) => r.job === job && r.status === 'running' && r.child_pid !== null);
  await waitFor(async () => (await find()) !== undefined, `${job} to start`);
  return (await find()) as RunRow;
}

// Moves a run to another host, as the shared log would show a run of the same job elsewhere.
async function moveToHost(box: StoreBox, id: number, host: string): Promise<void> {
  if (box.kind === 'mysql') {
    await mysqlQuery(`UPDATE \`${box.env.CRONGUARD_SCHEMA}\`.runs SET host = ? WHERE id = ?`, [host, id]);
    return;
  }
  if (box.kind === 'postgres') {
    await sql(`UPDATE "${(box as StoreBox & { schema: string }).schema}".runs SET host = $1 WHERE id = $2`, [host, id]);
    return;
  }
  const db = new Database(join(box.stateDir, 'cronguard.db'));
  try {
    db.prepare('UPDATE runs SET host = ? WHERE id = ?').run(host, id);
  } finally {
    db.close();
  }
}

describe.each(STORES)('cronguard logs -f (%s)', (kind) => {
  it('follows a running job from its first line to its end, then says how it ended', async () => {
    const box = storeBox(kind);
    const job = box.job('f');
    const go = box.path('go');
    const run = start(['-n', job, '--', fixture('lines.sh'), go, '3', '5'], box.env);
    const row = await runningRow(box, job);
    // Started before the job printed anything: it waits for the first line.
    const follower = start(['logs', '-f', job], box.env);
    const seen = collected(follower);
    release(`${go}.1`);
    await waitFor(() => seen.stdout().includes('line 1\n'), 'the follower to show line 1');
    expect(seen.stdout()).toBe('line 1\n');
    // The live copy holds the job's output: the owner's alone.
    const file = join(box.stateDir, 'live', (row.run_key as string).replaceAll('/', '_'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(box.stateDir, 'live')).mode & 0o777).toBe(0o700);
    release(`${go}.2`);
    await waitFor(() => seen.stdout().includes('line 2\n'), 'the follower to show line 2');
    expect(seen.stdout()).toBe('line 1\nline 2\n');
    release(`${go}.3`);
    const [ran, followed] = await Promise.all([run.done, follower.done]);
    expect(ran).toMatchObject({ code: 5, stdout: 'line 1\nline 2\nline 3\n' });
    expect(followed).toMatchObject({ code: 0, stdout: 'line 1\nline 2\nline 3\n' });
    expect(followed.stderr).toMatch(new RegExp(`^cronguard logs: run ${row.id} \\(${job}\\) ended: failed, exit 5, after \\S+\n$`));
    expect(existsSync(file)).toBe(false);
    expect(readdirSync(join(box.stateDir, 'live'))).toEqual([]);
  });

  it('of a job that is not running: prints its last run\'s output and exits 0', async () => {
    const box = storeBox(kind);
    const job = box.job('done');
    await cronguard(['-n', job, '--', 'echo', 'first'], box.env);
    await cronguard(['-n', job, '--', 'sh', '-c', 'echo last; exit 2'], box.env);
    const result = await cronguard(['logs', '-f', job], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'last\n' });
    expect(result.stderr).toMatch(new RegExp(`^cronguard logs: run \\d+ \\(${job}\\) is not running; it ended: failed, exit 2, after \\S+\n$`));
    const byId = await cronguard(['logs', '--follow', String((await box.runs())[0]?.id)], box.env);
    expect(byId).toMatchObject({ code: 0, stdout: 'first\n' });
  });

  it('of an unknown job: exit 1, one line', async () => {
    const box = storeBox(kind);
    await cronguard(['-n', box.job('known'), '--', 'true'], box.env);
    const result = await cronguard(['logs', '-f', box.job('unknown')], box.env);
    expect(result).toMatchObject({ code: 1, stdout: '', stderr: `cronguard logs: no runs recorded for job ${box.job('unknown')}\n` });
  });

  it('of a run on another host: says where it runs, exit 1', async () => {
    const box = storeBox(kind);
    const job = box.job('away');
    const go = box.path('go');
    const run = start(['-n', job, '--', fixture('lines.sh'), go, '1'], box.env);
    const row = await runningRow(box, job);
    await moveToHost(box, row.id, 'elsewhere');
    const result = await cronguard(['logs', '-f', job], box.env);
    release(`${go}.1`);
    await run.done;
    expect(result).toMatchObject({ code: 1, stdout: '' });
    expect(result.stderr).toBe(
      `cronguard logs: run ${row.id} (${job}) is running on elsewhere (pid ${row.pid}); its output is stored when it ends; follow it there (cronguard logs -f ${row.id} on elsewhere)\n`,
    );
  });
});
