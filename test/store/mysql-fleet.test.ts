import { describe, expect, it } from 'vitest';
import type { Admission } from '../../src/store/admission.js';
import { waitFor } from '../helpers.js';
import { mysqlClient, mysqlQuery } from '../mysql-helpers.js';
import { admitted, freshStore, mysqlStore, newRun, outcome, RULES } from './mysql-stores.js';

const minute = () => new Date(Math.floor(Date.now() / 60_000) * 60_000);
const FLEET = { ...RULES, oneRunPerTick: true };
const admittedOnes = (all: Admission[]) => all.filter((a) => a.admitted);

describe('mysql run log: one run per tick, across hosts', () => {
  it('lets one of two hosts run a tick and counts the other as its skip', async () => {
    const { store: a, database, job } = await freshStore();
    const b = await mysqlStore(database);
    const name = job('tick');
    const tick = minute();
    const first = await a.admit(newRun(name, { tick, host: 'host-a' }), FLEET);
    expect(first).toMatchObject({ admitted: true });
    if (!first.admitted) return;
    await a.setChildPid(first.runId, 100, 'echo');
    const second = await b.admit(newRun(name, { tick, host: 'host-b' }), FLEET);
    expect(second).toMatchObject({ admitted: false, reason: 'tick', holder: { runId: first.runId, host: 'host-a' } });
    // The same host may run its tick again (a retry, a manual run), and the next tick is anyone's.
    expect(await a.admit(newRun(name, { tick, host: 'host-a' }), FLEET)).toMatchObject({ admitted: true });
    const next = new Date(tick.getTime() + 60_000);
    expect(await b.admit(newRun(name, { tick: next, host: 'host-b' }), FLEET)).toMatchObject({ admitted: true });
    await a.finishRun(first.runId, outcome(), true);
    expect((await a.getRun(first.runId))?.overlaps).toBe(1);
  });

  it('gives a tick whose run never started its command to the next host', async () => {
    const { store: a, database, job } = await freshStore();
    const b = await mysqlStore(database);
    const name = job('unserved');
    const tick = minute();
    const first = await a.admit(newRun(name, { tick, host: 'host-a' }), FLEET);
    if (!first.admitted) throw new Error('refused');
    // The wrapper vanished before it started the command: its row is abandoned, no child pid.
    await a.finishRun(first.runId, outcome({ status: 'failed', exitCode: null }), true);
    expect(await b.admit(newRun(name, { tick, host: 'host-b' }), FLEET)).toMatchObject({ admitted: true });
  });

  it('admits one of 6 hosts that start the same tick at once, without a common lock', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    const name = job('six');
    const tick = minute();
    const hosts = await Promise.all(Array.from({ length: 6 }, () => mysqlStore(database)));
    const all = await Promise.all(hosts.map((h, i) => h.admit(newRun(name, { tick, host: `host-${i}` }), FLEET)));
    expect(admittedOnes(all)).toHaveLength(1);
    expect(all.filter((a) => !a.admitted && a.reason === 'tick')).toHaveLength(5);
  });

  it('admits 3 of 8 hosts that start the same tick at once with --max-running 3, each in a tick slot of its own', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    const name = job('eight');
    const tick = minute();
    const hosts = await Promise.all(Array.from({ length: 8 }, () => mysqlStore(database)));
    // Local locks: every host holds its own slot 0; the ticks are the job's, not the lock's.
    const all = await Promise.all(hosts.map((h, i) => h.admit(newRun(name, { tick, host: `host-${i}`, maxRunning: 3 }), FLEET)));
    expect(admittedOnes(all)).toHaveLength(3);
    expect(all.filter((a) => !a.admitted && a.reason === 'tick')).toHaveLength(5);
    const slots = await mysqlQuery<{ slot: number; tick_host: string }>(`SELECT slot, tick_host FROM \`${database}\`.slot_ticks WHERE job = ? ORDER BY slot`, [name]);
    const [row] = await mysqlQuery<{ tick_host: string }>(`SELECT tick_host FROM \`${database}\`.jobs WHERE name = ?`, [name]);
    expect(slots.map((s) => s.slot)).toEqual([1, 2]);
    expect(new Set([row?.tick_host, ...slots.map((s) => s.tick_host)]).size).toBe(3);
  });

  it('admits one of 6 hosts under a minimum interval at once', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    const name = job('interval');
    const hosts = await Promise.all(Array.from({ length: 6 }, () => mysqlStore(database)));
    const all = await Promise.all(hosts.map((h, i) => h.admit(newRun(name, { host: `host-${i}` }), { ...RULES, minIntervalMs: 600_000 })));
    expect(admittedOnes(all)).toHaveLength(1);
  });
});

describe('mysql run log: GET_LOCK admission', () => {
  it('admits exactly one of 32 at once, and its run counts the 31 skips', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    const name = job('lock32');
    const lock = { kind: 'named', name: `cg:test:${database}` } as const;
    const sessions = await Promise.all(Array.from({ length: 32 }, () => mysqlStore(database)));
    const all = await Promise.all(
      sessions.map((s, i) => s.lockAndAdmit(newRun(name, { pid: 1000 + i, lockBackend: 'mysql', lockKey: `cg:test:${database}` }), lock, RULES, true)),
    );
    const winners = all.filter((a) => a.admission.admitted);
    expect(winners).toHaveLength(1);
    expect(winners[0]?.holding).toBe(true);
    expect(all.filter((a) => !a.admission.admitted && a.admission.reason === 'locked' && !a.holding)).toHaveLength(31);
    const winner = all.findIndex((a) => a.admission.admitted);
    const admission = winners[0]?.admission;
    if (!admission?.admitted) return;
    expect(await sessions[winner]?.finishRun(admission.runId, outcome(), true, lock)).toBe(true);
    expect((await store.getRun(admission.runId))?.overlaps).toBe(31);
    const [free] = await mysqlQuery<{ used: number | null }>('SELECT IS_USED_LOCK(?) AS used', [`cg:test:${database}`]);
    expect(free?.used).toBeNull();
  });

  it('frees the lock on a refusal, keeps it for an idle loop, and never nests it', async () => {
    const { store, database, job } = await freshStore();
    const name = job('idle');
    const lock = { kind: 'named', name: `cg:idle:${database}` } as const;
    const run = newRun(name, { lockBackend: 'mysql', lockKey: `cg:idle:${database}` });
    const idle = await store.lockAndAdmit(run, lock, { ...RULES, onRequest: true }, true);
    expect(idle).toMatchObject({ holding: false, admission: { admitted: false, reason: 'idle' } });
    const kept = await store.lockAndAdmit(run, lock, { ...RULES, onRequest: true, keepLock: true }, true);
    expect(kept).toMatchObject({ holding: true, admission: { reason: 'idle' } });
    // Held before this admission: a refusal does not free it (and GET_LOCK did not nest).
    await store.setPaused(name, { reason: null, since: null, by: null }, 'ops@test', new Date().toISOString());
    expect(await store.lockAndAdmit(run, lock, RULES, true)).toMatchObject({ holding: true, admission: { reason: 'disabled' } });
    await store.setPaused(name, null, 'ops@test', new Date().toISOString());
    const again = await store.lockAndAdmit(run, lock, RULES, true);
    expect(again).toMatchObject({ holding: true, admission: { admitted: true } });
    if (!again.admission.admitted) return;
    expect(await store.finishRun(again.admission.runId, outcome(), true, lock)).toBe(true);
    const [free] = await mysqlQuery<{ used: number | null }>('SELECT IS_USED_LOCK(?) AS used', [`cg:idle:${database}`]);
    expect(free?.used).toBeNull();
  });

  it('abandons, on any host, a running row left under the lock it now holds', async () => {
    const { store: a, database, job } = await freshStore();
    const b = await mysqlStore(database);
    const name = job('proven');
    const key = `cg:proven:${database}`;
    const lock = { kind: 'named', name: key } as const;
    const first = await a.lockAndAdmit(newRun(name, { host: 'host-a', lockBackend: 'mysql', lockKey: key }), lock, RULES, true);
    if (!first.admission.admitted) throw new Error('refused');
    // Its wrapper is gone: the server frees the name once the connection has closed.
    await a.close();
    await waitFor(async () => (await mysqlQuery<{ used: number | null }>('SELECT IS_USED_LOCK(?) AS used', [key]))[0]?.used === null, 'the lock to be freed');
    const second = await b.lockAndAdmit(newRun(name, { host: 'host-b', lockBackend: 'mysql', lockKey: key }), lock, RULES, true);
    expect(second.admission).toMatchObject({ admitted: true });
    expect(await b.getRun(first.admission.runId)).toMatchObject({ status: 'abandoned' });
  });
});

describe('mysql run log: contention', () => {
  it('retries an admission that a deadlock rolled back, and surfaces nothing', async () => {
    const { store, database, job } = await freshStore();
    const name = job('deadlock');
    const stale = await admitted(store, newRun(name, { lockBackend: 'none', lockKey: null }));
    const other = await mysqlClient();
    try {
      // Another session holds the stale run's row, then asks for the job's row, which the
      // admission holds while it waits for the run's: one of the two is rolled back.
      await other.query('BEGIN');
      await other.query(`SELECT id FROM \`${database}\`.runs WHERE id = ? FOR UPDATE`, [stale]);
      const admitting = store.admit(newRun(name, { pid: 7, lockBackend: 'none', lockKey: null }), { ...RULES, isGone: (row) => row.id === stale });
      const abandoning = "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE 'UPDATE %runs SET status = ''abandoned''%'";
      await waitFor(async () => (await mysqlQuery(abandoning)).length > 0, 'the admission to wait for the run\'s row');
      await other.query(`SELECT name FROM \`${database}\`.jobs WHERE name = ? FOR UPDATE`, [name]).catch((error: { errno?: number }) => {
        if (error.errno !== 1213) throw error;
      });
      await other.query('COMMIT');
      expect(await admitting).toMatchObject({ admitted: true });
      expect(await store.getRun(stale)).toMatchObject({ status: 'abandoned' });
    } finally {
      await other.end();
    }
  });
});
