import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advisoryKey } from '../../src/store/postgres/lock.js';
import { cronguard, fixture, lines, ROOT, runs, sandbox, start, waitFor } from '../helpers.js';
import { databaseUrl, pgSandbox, sql } from '../pg-helpers.js';

// Starts `cronguard ARGS -- hold.sh` and waits until the command runs; release() lets it end.
async function holding(args: string[], env: NodeJS.ProcessEnv, dir: string) {
  const log = `${dir}/hold-${Math.random().toString(36).slice(2)}`;
  const barrier = `${log}.go`;
  const run = start([...args, '--', fixture('hold.sh'), log, barrier], env);
  await waitFor(() => lines(log).length > 0, 'the command to start');
  return {
    run,
    release: async () => {
      writeFileSync(barrier, '');
      return run.done;
    },
  };
}

const locksOf = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
  const result = await cronguard(['locks', '--json', ...args], env);
  expect(result).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(result.stdout) as Record<string, unknown>[];
};

describe('cronguard locks (flock)', () => {
  it('lists the lock files someone holds, with the run that holds them', async () => {
    const box = sandbox();
    const busy = await holding(['-n', 'busy'], box.env, box.dir);
    await cronguard(['-n', 'idle', '--', 'true'], box.env);
    const held = await locksOf(box.env);
    const table = await cronguard(['locks'], box.env);
    await busy.release();
    const row = runs(box.stateDir)[0];
    expect(held).toEqual([
      {
        job: 'busy', lock: 'flock', key: `${box.lockDir}/busy.lock`, host: hostname(), pid: row?.pid, run_id: 1,
        since: row?.started_at, holder_pid: row?.pid, verified: true,
      },
    ]);
    expect(table.stdout).toMatch(/^JOB\s+LOCK\s+HOST\s+PID\s+SINCE\s+RUN\s+NOTE\nbusy\s+flock\s/);
  });

  it('finds a --lock-file lock and one in another lock dir through their run rows', async () => {
    const box = sandbox();
    const file = await holding(['-n', 'by-file', '--lock-file', box.path('elsewhere.lock')], box.env, box.dir);
    const dir = await holding(['-n', 'by-dir', '--lock-dir', box.path('other-locks')], box.env, box.dir);
    const held = await locksOf(box.env);
    await Promise.all([file.release(), dir.release()]);
    expect(held.map((h) => [h.job, h.key, h.verified]).sort()).toEqual([
      ['by-dir', box.path('other-locks/by-dir.lock'), true],
      ['by-file', box.path('elsewhere.lock'), true],
    ]);
  });

  it('shows a held lock with no run row, with its holder pid from /proc/locks', async () => {
    const box = sandbox();
    const unlogged = await holding(['-n', 'quiet', '--no-log'], box.env, box.dir);
    const held = await locksOf(box.env);
    await unlogged.release();
    expect(held).toEqual([
      expect.objectContaining({ job: 'quiet', lock: 'flock', run_id: null, holder_pid: unlogged.run.child.pid, verified: true }),
    ]);
  });

  it('records lock paths given relative to the working directory as absolute ones', async () => {
    const box = sandbox();
    const held = await holding(['-n', 'rel', '--lock-file', 'relative.lock'], box.env, box.dir);
    // `locks` runs from another directory (the repository), as an operator's shell would.
    const listed = await locksOf({ ...box.env, CRONGUARD_TEST_SANDBOX: ROOT });
    await held.release();
    expect(listed).toEqual([expect.objectContaining({ job: 'rel', key: box.path('relative.lock'), verified: true })]);
  });

  it('no longer lists a lock once its run ended', async () => {
    const box = sandbox();
    const done = await holding(['-n', 'brief'], box.env, box.dir);
    await done.release();
    expect(await locksOf(box.env)).toEqual([]);
  });

  it('says so when nothing is held', async () => {
    const box = sandbox();
    await cronguard(['-n', 'idle', '--', 'true'], box.env);
    expect(await cronguard(['locks'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: no locks held\n' });
    expect(await locksOf(box.env)).toEqual([]);
  });

  it('rejects unknown options with 64, pointing at its own help', async () => {
    const result = await cronguard(['locks', '--all'], sandbox().env);
    expect(result).toMatchObject({ code: 64, stdout: '', stderr: "cronguard locks: unknown option '--all' (see cronguard locks --help)\n" });
  });
});

describe('cronguard locks (postgres)', () => {
  const other = 'test_other_i18';
  const otherUrl = () => Object.assign(new URL(databaseUrl()), { pathname: `/${other}` }).toString();
  beforeAll(async () => {
    await sql(`CREATE DATABASE ${other}`).catch((error) => {
      if ((error as { code?: string }).code !== '42P04') throw error;
    });
  });
  afterAll(async () => {
    await sql(`DROP DATABASE IF EXISTS ${other} WITH (FORCE)`);
  });

  // A session named as cronguard names its own, holding `key` in `database`.
  async function holdingAs(job: string, key: bigint, url: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url, application_name: `cronguard:${job}` });
    await client.connect();
    await client.query('SELECT pg_advisory_lock($1::bigint)', [key.toString()]);
    return client;
  }

  it("lists only its own database's locks and its own schema's keys", async () => {
    const box = pgSandbox();
    const mine = box.job('mine');
    const elsewhere = box.job('elsewhere');
    const ours = await holding(['-n', mine], box.env, box.dir);
    // The same schema and job in another database of the server; a job of another schema here.
    const clients = [
      await holdingAs(elsewhere, advisoryKey(elsewhere, box.schema), otherUrl()),
      await holdingAs(mine, advisoryKey(mine, box.schema), otherUrl()),
      await holdingAs(elsewhere, advisoryKey(elsewhere, `${box.schema}_b`), databaseUrl()),
    ];
    try {
      const held = await locksOf(box.env);
      expect(held).toEqual([expect.objectContaining({ job: mine, lock: 'postgres', key: advisoryKey(mine, box.schema).toString(), run_id: 1 })]);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
      await ours.release();
    }
  });
});
