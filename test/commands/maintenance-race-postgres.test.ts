import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, release, start, waitFor } from '../helpers.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// `disable NAME --drain D` against an admission under way (found by a breaker). admit()
// read the job's own pause without a lock, so a pause committed while an admission that had
// read "not paused" was still at work did not wait for it: the drain that followed saw no
// run (the admission had not committed), said `drained`, and the run started after it.
// The admission is held, for the test, just after it read the pause (a statement trigger
// on its next write waits for a gate the test opens): where a busy server may hold it.
describe('maintenance: disable NAME --drain waits for an admission under way (postgres)', () => {
  it('returns drained only after the run an admission under way admitted has ended', async () => {
    const box = pgSandbox();
    const job = box.job('race');
    const S = `"${box.schema}"`;
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    await sql(`CREATE TABLE ${S}.gate (shut boolean); INSERT INTO ${S}.gate VALUES (true);
      CREATE FUNCTION ${S}.wait_at_gate() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN WHILE EXISTS (SELECT 1 FROM ${S}.gate) LOOP PERFORM pg_sleep(0.02); END LOOP; RETURN NULL; END $$;
      CREATE TRIGGER wait_at_gate BEFORE UPDATE ON ${S}.runs FOR EACH STATEMENT EXECUTE FUNCTION ${S}.wait_at_gate();`);
    const marker = box.path('ran');
    const racer = start(['-n', job, '--', 'sh', '-c', `echo ran >> ${marker}`], box.env);
    const atGate = `SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%${box.schema}%admit%'`;
    await waitFor(async () => (await sql(atGate)).length > 0, 'the admission to read the pause and wait at the gate');

    const disable = start(['disable', job, '--drain', '10m'], box.env);
    let atEnd: string | null = null;
    const ended = disable.done.then((d) => {
      atEnd = existsSync(marker) ? readFileSync(marker, 'utf8') : '';
      return d;
    });
    // Either the pause waits for the admission (as it should), or it is already done.
    const waiting = `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%${box.schema}%fleet_pause%'`;
    await waitFor(async () => atEnd !== null || (await sql(waiting)).length > 0, 'the pause to wait for the admission, or to end');
    await sql(`DELETE FROM ${S}.gate`);
    expect((await racer.done).code).toBe(0);
    const drained = await ended;
    expect(drained.code).toBe(0);
    expect(drained.stderr).toContain(`cronguard: drained: no run of ${job} is active\n`);
    // The run admitted under way ended before the drain said so.
    expect(atEnd).toBe(readFileSync(marker, 'utf8'));
    expect(atEnd).toBe('ran\n');
  });

  // A retry looks for a pause before its next attempt; a pause committed between that look
  // and the attempt's row left a drain nothing `running` to see: it said drained, and the
  // attempt started after it. The attempt's row is held here (a trigger) in that gap.
  it('starts no further attempt of --retries once a drain after the pause has said drained', async () => {
    const box = pgSandbox();
    const job = box.job('retry-race');
    const S = `"${box.schema}"`;
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    await sql(`CREATE TABLE ${S}.gate (shut boolean); INSERT INTO ${S}.gate VALUES (true);
      CREATE FUNCTION ${S}.wait_at_gate() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN WHILE EXISTS (SELECT 1 FROM ${S}.gate) LOOP PERFORM pg_sleep(0.02); END LOOP; RETURN NEW; END $$;
      CREATE TRIGGER wait_at_gate BEFORE INSERT ON ${S}.runs FOR EACH ROW WHEN (NEW.attempt = 2) EXECUTE FUNCTION ${S}.wait_at_gate();`);
    const marker = box.path('attempts');
    const racer = start(['-n', job, '--retries', '1', '--retry-delay', '1ms', '--', 'sh', '-c', `echo attempt >> ${marker}; exit 3`], box.env);
    const atGate = `SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%${box.schema}%runs%'`;
    await waitFor(async () => (await sql(atGate)).length > 0, 'the second attempt to be recorded and wait at the gate');

    const drained = await cronguard(['disable', job, '--drain', '10m'], box.env);
    expect(drained.code).toBe(0);
    const atEnd = readFileSync(marker, 'utf8');
    await sql(`DELETE FROM ${S}.gate`);
    const ended = await racer.done;
    expect(ended.code).toBe(3);
    expect(ended.stderr).toContain(`${job}: not retrying: paused since `);
    expect(readFileSync(marker, 'utf8')).toBe(atEnd);
    expect(atEnd).toBe('attempt\n');
    const attempts = (await pgRuns(box.schema)).filter((r) => r.job === job && r.attempt === 2);
    expect(attempts.map((r) => [r.status, r.exit_code, r.error])).toEqual([['failed', 3, expect.stringMatching(/^not started: the job was paused as attempt 2 was recorded/)]]);
  });

  // The database cut while a drain looks (a restart, a failover, a killed session): it said
  // 'internal error (this is a bug)' with a stack trace and exited 70. It looks again,
  // through a new connection, until D runs out; the pause holds either way.
  it('goes on through a lost connection and says drained when the run has ended', async () => {
    const box = pgSandbox();
    const job = box.job('cut');
    const [marks, barrier] = [box.path('marks'), box.path('barrier')];
    const held = start(['-n', job, '--', 'sh', fixture('hold.sh'), marks, barrier], box.env);
    await waitFor(() => existsSync(marks), 'the run to start');
    const draining = start(['disable', '--all', '--drain', '10m'], box.env);
    const looking = `SELECT pid FROM pg_stat_activity WHERE application_name = 'cronguard' AND query LIKE '%${box.schema}%runs%'`;
    await waitFor(async () => (await sql(looking)).length > 0, 'the drain to look');
    await sql(`SELECT pg_terminate_backend(pid) FROM (${looking}) l`);
    await waitFor(async () => (await sql(looking)).length > 0, 'the drain to look again, through a new connection');
    release(barrier);
    expect((await held.done).code).toBe(0);
    const drained = await draining.done;
    expect(drained.stderr).not.toContain('internal error');
    expect(drained.stderr).toMatch(/\ncronguard: lost the run log while draining \(.+\); looking again until --drain 10m00s runs out\n/);
    expect(drained.stderr).toContain('cronguard: drained: no run of any job is active\n');
    expect(drained.code).toBe(0);
  });
});
