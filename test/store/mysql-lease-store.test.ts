import { describe, expect, it } from 'vitest';
import { mysqlQuery } from '../mysql-helpers.js';
import { freshStore, mysqlStore, newRun, outcome, RULES } from './mysql-stores.js';

// MysqlStore's side of -l lease: taken by compare-and-set in the admission, renewed and
// released by key and epoch, let go by the outcome.

const KEY = -1234567890123456789n;
const lease = { kind: 'lease', key: KEY, ttlMs: 30_000 } as const;

async function rows(database: string) {
  return mysqlQuery<{ job: string; epoch: string; run_id: string | null; pid: number }>(
    `SELECT job, CAST(epoch AS CHAR) AS epoch, CAST(run_id AS CHAR) AS run_id, pid FROM \`${database}\`.leases`,
  );
}

describe('mysql run log: leases', () => {
  it('frees the lease on a refusal, keeps it for an idle loop, refuses it to another while held; the outcome releases it', async () => {
    const { store, database, job } = await freshStore();
    const other = await mysqlStore(database);
    const name = job('lease');
    const run = newRun(name, { lockBackend: 'lease', lockKey: String(KEY) });
    const idle = await store.lockAndAdmit(run, lease, { ...RULES, onRequest: true }, true);
    expect(idle).toMatchObject({ holding: false, epoch: null, admission: { admitted: false, reason: 'idle' } });
    expect(await rows(database)).toEqual([]);
    const kept = await store.lockAndAdmit(run, lease, { ...RULES, onRequest: true, keepLock: true }, true);
    expect(kept).toMatchObject({ holding: true, admission: { reason: 'idle' } });
    const epoch = kept.epoch as bigint;
    expect(await rows(database)).toEqual([{ job: name, epoch: String(epoch), run_id: null, pid: run.pid }]);
    const refused = await other.lockAndAdmit(newRun(name, { host: 'host-b', lockBackend: 'lease', lockKey: String(KEY) }), lease, RULES, true);
    expect(refused).toMatchObject({ holding: false, epoch: null, admission: { admitted: false, reason: 'locked' } });
    // Counted: parked on the job (no run holds it yet).
    expect(await mysqlQuery(`SELECT pending_overlaps AS n FROM \`${database}\`.jobs WHERE name = ?`, [name])).toEqual([{ n: 1 }]);
    expect(await store.renewLease(KEY, epoch, 30_000)).toBe(true);
    expect(await store.renewLease(KEY, epoch + 1n, 30_000)).toBe(false);
    await store.releaseLease(KEY, epoch);
    expect(await store.renewLease(KEY, epoch, 30_000)).toBe(false);
    const again = await store.lockAndAdmit(run, lease, RULES, true);
    expect(again).toMatchObject({ holding: true, admission: { admitted: true } });
    expect(again.epoch as bigint).toBeGreaterThan(epoch);
    if (!again.admission.admitted) return;
    expect(await rows(database)).toEqual([expect.objectContaining({ run_id: String(again.admission.runId) })]);
    expect(await store.finishRun(again.admission.runId, outcome(), true, { kind: 'lease', key: KEY, epoch: again.epoch as bigint })).toBe(true);
    expect(await rows(database)).toEqual([]);
    expect(await mysqlQuery(`SELECT status, overlaps FROM \`${database}\`.runs`)).toEqual([{ status: 'succeeded', overlaps: 1 }]);
  });

  it('an expired lease is taken over with a higher epoch, its run abandoned; its old holder can no longer renew it', async () => {
    const { store: a, database, job } = await freshStore();
    const b = await mysqlStore(database);
    const name = job('expired');
    const first = await a.lockAndAdmit(newRun(name, { lockBackend: 'lease', lockKey: String(KEY) }), lease, RULES, true);
    expect(first.holding).toBe(true);
    await mysqlQuery(`UPDATE \`${database}\`.leases SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND`);
    const second = await b.lockAndAdmit(newRun(name, { host: 'host-b', lockBackend: 'lease', lockKey: String(KEY) }), lease, RULES, true);
    expect(second).toMatchObject({ holding: true, admission: { admitted: true } });
    expect(second.epoch as bigint).toBeGreaterThan(first.epoch as bigint);
    expect(await a.renewLease(KEY, first.epoch as bigint, 30_000)).toBe(false);
    expect(await mysqlQuery(`SELECT host, status FROM \`${database}\`.runs ORDER BY id`)).toEqual([
      { host: 'host-a', status: 'abandoned' },
      { host: 'host-b', status: 'running' },
    ]);
  });

  it('a renewal sent while a transaction is under way on the log\'s session waits for it: a rollback does not undo it', async () => {
    const { store, database, job } = await freshStore();
    const taken = await store.lockAndAdmit(newRun(job('tx'), { lockBackend: 'lease', lockKey: String(KEY) }), lease, RULES, true);
    const epoch = taken.epoch as bigint;
    await mysqlQuery(`UPDATE \`${database}\`.leases SET expires_at = UTC_TIMESTAMP(6) + INTERVAL 2 SECOND`);
    let renewal: Promise<boolean> | null = null;
    await expect(
      store.session.transaction(async (t) => {
        await t.query('SELECT 1');
        renewal = store.renewLease(KEY, epoch, 60_000);
        await t.query('SELECT 1');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await (renewal as unknown as Promise<boolean>)).toBe(true);
    const [row] = await mysqlQuery<{ left: number }>(`SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), expires_at) AS \`left\` FROM \`${database}\`.leases`);
    expect(Number(row?.left)).toBeGreaterThan(30);
  });
});
