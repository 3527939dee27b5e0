import { describe, expect, it } from 'vitest';
import { readSql } from '../../src/store/mysql/sql-reads.js';
import { mysqlClient, mysqlQuery } from '../mysql-helpers.js';
import { admitted, freshStore, mysqlStore, newRun, outcome, RULES } from './mysql-stores.js';

const ON_REQUEST = { ...RULES, onRequest: true };

describe('mysql run log: requests', () => {
  it('serves a request made by the documented INSERT, and one by addRequest, each once with its args', async () => {
    const { store, database, job } = await freshStore();
    const name = job('web');
    await store.migrate();
    // A web application's session in another time zone: the defaults are UTC all the same.
    const php = await mysqlClient();
    try {
      await php.query("SET time_zone = '+05:00'");
      await php.query(`INSERT INTO \`${database}\`.requests (job, args, requested_by) VALUES (?, JSON_ARRAY('a b', 'é😀'), 'php')`, [name]);
    } finally {
      await php.end();
    }
    expect(await store.hasDueRequest(name)).toBe(true);
    const cli = await store.addRequest({ job: name, args: ['--full'], notBefore: new Date(), requestedBy: 'ops' });
    const [web] = await store.listRequests(name, 10).then((rows) => rows.filter((r) => r.id !== cli));
    expect(web).toMatchObject({ job: name, args: ['a b', 'é😀'], requested_by: 'php', status: 'pending', attempts: 0, run_id: null });
    expect(Math.abs(Date.parse(web?.not_before as string) - Date.now())).toBeLessThan(60_000);

    // The oldest request with arguments per run: the web's, then the CLI's, then nothing.
    const first = await store.admit(newRun(name), ON_REQUEST);
    expect(first).toMatchObject({ admitted: true, requests: [{ id: web?.id, args: ['a b', 'é😀'] }] });
    if (!first.admitted) return;
    await store.finishRun(first.runId, outcome({ exitCode: 0 }), true);
    const second = await store.admit(newRun(name), ON_REQUEST);
    expect(second).toMatchObject({ admitted: true, requests: [{ id: cli, args: ['--full'] }] });
    if (!second.admitted) return;
    await store.finishRun(second.runId, outcome({ status: 'failed', exitCode: 2 }), true);
    expect(await store.admit(newRun(name), ON_REQUEST)).toEqual({ admitted: false, reason: 'idle' });
    expect(await store.hasDueRequest(name)).toBe(false);
    expect(await store.getRequest(web?.id as number)).toMatchObject({ status: 'succeeded', exit_code: 0, run_id: first.runId, attempts: 1 });
    expect(await store.getRequest(cli)).toMatchObject({ status: 'failed', exit_code: 2, run_id: second.runId });
    expect(await store.getRun(first.runId)).toMatchObject({ trigger: 'request', request_id: web?.id });
  });

  it('refuses, in the table, args that are not a JSON array of strings', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    const insert = (args: string) => mysqlQuery(`INSERT INTO \`${database}\`.requests (job, args) VALUES (?, ${args})`, [job('bad')]);
    // A CHECK refuses each (MariaDB 4025, MySQL 3819), or NOT NULL does (1048).
    for (const bad of ["JSON_ARRAY(1)", "JSON_ARRAY('a', 1)", "JSON_ARRAY('a', JSON_ARRAY('b'))", "JSON_ARRAY(NULL)", "JSON_OBJECT('a', 'b')",
      "'\"a\"'", "'not json'", "NULL", "JSON_ARRAY(CONCAT('a', CHAR(0)))", "JSON_ARRAY(TRUE)"]) {
      await expect(insert(bad), bad).rejects.toMatchObject({ errno: expect.toBeOneOf([4025, 3819, 1048]) });
    }
    for (const good of ["JSON_ARRAY()", "'[]'", "' [ \"a\" , \"\\\\\\\\u0000\" ] '", "JSON_ARRAY('')"]) await insert(good);
    await expect(mysqlQuery(`INSERT INTO \`${database}\`.requests (job) VALUES ('12')`)).rejects.toMatchObject({ errno: expect.toBeOneOf([4025, 3819]) });
    expect(await store.listRequests(job('bad'), 10)).toHaveLength(4);
  });

  it('lets a waiting loop poll its due requests through an index', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    for (let i = 0; i < 50; i++) await store.addRequest({ job: job(`other${i % 5}`), args: [], notBefore: new Date(), requestedBy: null });
    const poll = readSql(`\`${database}\``).hasDueRequest;
    const [plan] = await mysqlQuery<{ key: string | null; type: string }>(`EXPLAIN ${poll}`, [job('mine')]);
    expect(plan).toMatchObject({ key: 'requests_due', type: 'range' });
  });

  it('claims every due request for a --batch run, up to --batch-max, and none not yet due', async () => {
    const { store, job } = await freshStore();
    const name = job('batch');
    const ids: number[] = [];
    for (const args of [['a'], [], ['b', 'c'], ['d']]) ids.push(await store.addRequest({ job: name, args, notBefore: new Date(), requestedBy: null }));
    await store.addRequest({ job: name, args: ['later'], notBefore: new Date(Date.now() + 3_600_000), requestedBy: null });
    const first = await store.admit(newRun(name), { ...ON_REQUEST, batch: true, batchMax: 3 });
    expect(first).toMatchObject({ admitted: true, requests: [{ id: ids[0], args: ['a'] }, { id: ids[1], args: [] }, { id: ids[2], args: ['b', 'c'] }] });
    const second = await store.admit(newRun(name, { pid: 2, host: 'host-b' }), { ...ON_REQUEST, batch: true, batchMax: null });
    expect(second).toMatchObject({ admitted: true, requests: [{ id: ids[3], args: ['d'] }] });
  });

  it('4 claimers of 300 requests claim each once', async () => {
    const { store, job } = await freshStore();
    const name = job('many');
    for (let i = 0; i < 300; i++) await store.addRequest({ job: name, args: [`n${i}`], notBefore: new Date(), requestedBy: null });
    const claimers = await Promise.all([0, 1, 2, 3].map(() => mysqlStore((store as unknown as { database: string }).database)));
    const served = await Promise.all(
      claimers.map(async (claimer, host) => {
        const mine: number[] = [];
        for (;;) {
          const admission = await claimer.admit(newRun(name, { host: `host-${host}` }), ON_REQUEST);
          if (!admission.admitted) return mine;
          mine.push(...admission.requests.map((r) => r.id));
          await claimer.finishRun(admission.runId, outcome(), true);
        }
      }),
    );
    const all = served.flat();
    expect(all).toHaveLength(300);
    expect(new Set(all).size).toBe(300);
    const rows = await store.listRequests(name, 1000);
    expect(rows.every((r) => r.status === 'succeeded' && r.attempts === 1)).toBe(true);
  });

  it('cancels a pending request only, gives back claims, and makes retries follow them', async () => {
    const { store, job } = await freshStore();
    const name = job('back');
    const a = await store.addRequest({ job: name, args: [], notBefore: new Date(), requestedBy: null });
    const b = await store.addRequest({ job: name, args: [], notBefore: new Date(), requestedBy: null });
    const c = await store.addRequest({ job: name, args: [], notBefore: new Date(Date.now() + 3_600_000), requestedBy: null });
    expect(await store.cancelRequest(c)).toEqual({ cancelled: true });
    expect(await store.cancelRequest(c)).toEqual({ cancelled: false, status: 'cancelled' });
    expect(await store.cancelRequest(99999)).toEqual({ cancelled: false, status: 'missing' });
    const first = await store.admit(newRun(name), ON_REQUEST);
    expect(first).toMatchObject({ admitted: true, requests: [{ id: a }, { id: b }] });
    if (!first.admitted) return;
    await store.returnRequests(first.runId, { later: [b], refused: [], reason: '' });
    expect(await store.getRequest(b)).toMatchObject({ status: 'pending', run_id: null, attempts: 0 });
    await store.finishRun(first.runId, outcome({ status: 'failed', exitCode: 1 }), false);
    const retry = await store.startRetry(first.runId, newRun(name, { trigger: 'retry', attempt: 2 }));
    expect(await store.getRequest(a)).toMatchObject({ status: 'running', run_id: retry, attempts: 2 });
    expect(await store.getRun(retry)).toMatchObject({ request_id: a, trigger: 'retry', attempt: 2 });
    await store.finishRun(retry, outcome(), true);
    expect(await store.getRequest(a)).toMatchObject({ status: 'succeeded', run_id: retry });
    const second = await admitted(store, newRun(name), ON_REQUEST);
    await store.returnRequests(second, { later: [], refused: [b], reason: 'too long' });
    expect(await store.getRequest(b)).toMatchObject({ status: 'failed', error: 'too long', run_id: null });
  });
});

describe('mysql run log: claims of runs that ended without their last attempt', () => {
  it('puts back a claim whose command never started, and fails one whose command ran', async () => {
    const { store, job } = await freshStore();
    const name = job('orphans');
    const unstarted = await store.addRequest({ job: name, args: ['a'], notBefore: new Date(), requestedBy: null });
    const first = await store.admit(newRun(name, { pid: 10 }), ON_REQUEST);
    if (!first.admitted) throw new Error('refused');
    // Its wrapper died between two attempts: the row is finished, the claim still running.
    await store.finishRun(first.runId, outcome({ status: 'failed', exitCode: 1 }), false);
    expect(await store.unsettledRuns(name)).toMatchObject([{ id: first.runId, status: 'failed', host: 'host-a', pid: 10 }]);
    const second = await store.admit(newRun(name, { pid: 11 }), { ...ON_REQUEST, isGone: (row) => row.pid === 10 });
    expect(second).toMatchObject({ admitted: true, requests: [{ id: unstarted, args: ['a'] }] });
    if (!second.admitted) return;
    await store.setChildPid(second.runId, 500, 'echo a');
    await store.finishRun(second.runId, outcome({ status: 'failed', exitCode: 4 }), false);
    const third = await store.admit(newRun(name, { pid: 12 }), { ...ON_REQUEST, isGone: (row) => row.pid === 11 });
    expect(third).toEqual({ admitted: false, reason: 'idle' });
    expect(await store.getRequest(unstarted)).toMatchObject({
      status: 'failed', exit_code: 4, attempts: 1,
      error: `run ${second.runId} ended without its last attempt: its wrapper vanished before it could retry or record the end`,
    });
    expect(await store.unsettledRuns(name)).toEqual([]);
  });
});
