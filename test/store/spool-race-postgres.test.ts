import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { connectPostgres, openPostgresStore } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import { Spool } from '../../src/store/spool.js';
import type { SpooledRun } from '../../src/store/spool-record.js';
import { cronguard } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { databaseUrl, pgRuns, pgSandbox } from '../pg-helpers.js';

async function store(url: string, schema: string) {
  const db = resolveDb({ value: url, from: 'test' }, { value: schema, from: 'test' }, {}) as NonNullable<ReturnType<typeof resolveDb>>;
  return openPostgresStore(await connectPostgres(db, 'test'), schema);
}

const quiet = { warn: (line: string) => expect.fail(line), verbose: () => {} };

// One run's records as its wrapper writes them: the start, then the end.
function records(job: string): [SpooledRun, SpooledRun] {
  const at = '2026-03-01T03:00:00.000Z';
  const start: SpooledRun = {
    id: null,
    run: {
      job, trigger: 'cron', attempt: 1, host: 'vm', pid: 2 ** 22 + 1, username: 'u', command: 'job', startedAt: at, invokedAt: at,
      tick: null, lockBackend: 'flock', lockKey: null, slot: 0, maxRunning: 1, runKey: `race-${job}`, wrapperStart: 'no-such-boot/1',
    },
    childPid: null,
    outcome: null,
  };
  const outcome = { status: 'failed', finishedAt: at, durationMs: 5, exitCode: 7, signal: null, output: 'the end', outputTruncated: false, error: null } as const;
  return [start, { ...start, childPid: 9, outcome }];
}

describe('a deliverer racing the wrapper that writes the record', () => {
  it('never replaces the newer record when it puts its claimed one back; the run is logged as it ended', async () => {
    const box = pgSandbox();
    const job = box.job('race');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const spool = new Spool(box.stateDir, 'the-target');
    const [start, end] = records(job);
    spool.write(start);
    // The deliverer claims the start and sends it; the proxy holds the statement.
    const proxy = await cuttingProxy('ON CONFLICT (run_key)', 'request');
    const held = await store(proxy.url, box.schema);
    const delivering = spool.deliver(held, 'vm', quiet);
    await proxy.reached;
    // Meanwhile the wrapper writes its end; then the deliverer's connection is lost.
    spool.write(end);
    proxy.cut();
    expect(await delivering).toBe(0);
    await held.close();
    const files = readdirSync(spool.dir).sort();
    expect(files).toEqual([expect.stringMatching(/^race-.*\.\d+-\d+\.json$/), `race-${job}.json`]);
    expect(JSON.parse(readFileSync(`${spool.dir}/race-${job}.json`, 'utf8')).outcome).toMatchObject({ exitCode: 7 });
    // Both delivered, in whichever order: the end is what the log keeps.
    const direct = await store(databaseUrl(), box.schema);
    expect(await spool.deliver(direct, 'vm', quiet)).toBe(2);
    await direct.close();
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.exit_code, r.output])).toEqual([['failed', 7, 'the end']]);
    expect(readdirSync(spool.dir)).toEqual([]);
  });
});
