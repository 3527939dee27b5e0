import { randomBytes } from 'node:crypto';
import { afterEach } from 'vitest';
import type { AdmitOptions } from '../../src/store/admission.js';
import { connectMysql } from '../../src/store/mysql/connect.js';
import { MysqlStore } from '../../src/store/mysql/store.js';
import { resolveMysql } from '../../src/store/mysql/url.js';
import type { NewRun, RunOutcome } from '../../src/store/types.js';
import { mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// MySQL stores made directly on a session (not through the CLI), each on a throwaway
// database (mysqlSandbox drops it after the test); closed after each test.

const open: MysqlStore[] = [];
afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
});

export async function mysqlStore(database: string, create = true, url = mysqlUrl()): Promise<MysqlStore> {
  const config = resolveMysql({ value: url, from: 'test' }, { value: database, from: 'test' }, process.env);
  const store = new MysqlStore(await connectMysql(config, 'cronguard:test'), database, create, null);
  open.push(store);
  return store;
}

// A fresh database name (dropped after the test) and a store on it.
export async function freshStore(): Promise<{ store: MysqlStore; database: string; job: (base: string) => string }> {
  const box = mysqlSandbox();
  return { store: await mysqlStore(box.database), database: box.database, job: box.job };
}

export const RULES: AdmitOptions = {
  oneRunPerTick: false, isGone: () => false, minIntervalMs: null, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null,
};

export function newRun(job: string, over: Partial<NewRun> = {}): NewRun {
  const now = new Date(Math.floor(Date.now() / 1000) * 1000 + 123);
  return {
    job, trigger: 'cron', attempt: 1, host: 'host-a', pid: 4242, username: 'alice', command: 'echo hi', startedAt: now, invokedAt: new Date(now.getTime() - 7),
    tick: null, lockBackend: 'flock', lockKey: `/run/lock/${job}`, slot: 0, maxRunning: 1, runKey: `key-${randomBytes(8).toString('hex')}`, wrapperStart: 'boot:1', ...over,
  };
}

export function outcome(over: Partial<RunOutcome> = {}): RunOutcome {
  return {
    status: 'succeeded', finishedAt: new Date(), durationMs: 1500, exitCode: 0, signal: null, output: 'out\n', outputTruncated: false, error: null, ...over,
  };
}

// The admitted run's id (fails the test when refused).
export async function admitted(store: MysqlStore, run: NewRun, options: Partial<AdmitOptions> = {}): Promise<number> {
  const admission = await store.admit(run, { ...RULES, ...options });
  if (!admission.admitted) throw new Error(`refused: ${admission.reason}`);
  return admission.runId;
}
