import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines } from '../helpers.js';
import { mysqlClient, mysqlQuery } from '../mysql-helpers.js';
import { sql } from '../pg-helpers.js';
import { STORES, type StoreBox, storeBox } from '../stores.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// The arguments each run of args.sh got, in order.
const argsOfRuns = (file: string) => lines(file).filter((l) => l.startsWith('start ')).map((l) => l.split(' ').slice(2).join(' '));

// Arguments a web application might write that no command line carries, as each dialect's
// SQL spells them (SQLite: JSON text; PostgreSQL: a text[] literal; MySQL: JSON).
const MALFORMED = {
  sqlite: [`'[1]'`, `'[{"a":1}]'`, `'["a\\u0000b"]'`, `'[["a","b"]]'`, `'[null]'`],
  postgres: [`ARRAY[NULL]::text[]`, `'{{a,b},{c,d}}'::text[]`, `ARRAY['a', NULL]`],
  mysql: [`JSON_ARRAY(1)`, `JSON_ARRAY(JSON_OBJECT('a', 1))`, `'["a\\\\u0000b"]'`, `JSON_ARRAY(JSON_ARRAY('a', 'b'))`, `JSON_ARRAY(NULL)`, `JSON_OBJECT('a', 'b')`],
} as const;
// Good arguments, as each dialect spells them.
const GOOD = { sqlite: `'["a b", "", "é"]'`, postgres: `ARRAY['a b', '', 'é']`, mysql: `JSON_ARRAY('a b', '', 'é')` } as const;

const REASON = '(its args are not all strings|its args are not an array of strings|an argument holds a NUL byte)';

const schemaOf = (box: StoreBox): string => box.env.CRONGUARD_SCHEMA as string;

// An INSERT as a web application writes it, with args as an SQL expression.
async function insert(box: StoreBox, job: string, args: string): Promise<number> {
  if (box.kind === 'mysql') {
    const client = await mysqlClient();
    try {
      const [done] = await client.query(`INSERT INTO \`${schemaOf(box)}\`.requests (job, args) VALUES (?, ${args})`, [job]);
      return (done as { insertId: number }).insertId;
    } finally {
      await client.end();
    }
  }
  if (box.kind === 'postgres') {
    const [row] = await sql<{ id: string }>(`INSERT INTO "${schemaOf(box)}".requests (job, args) VALUES ($1, ${args}) RETURNING id`, [job]);
    return Number(row?.id);
  }
  const db = new Database(join(box.stateDir, 'cronguard.db'));
  try {
    return (db.prepare(`INSERT INTO requests (job, args) VALUES (?, ${args}) RETURNING id`).get(job) as { id: number }).id;
  } finally {
    db.close();
  }
}

// Rows that got in around the constraints (written before them, or by hand): the
// constraints dropped as such a log never had them.
async function dropConstraints(box: StoreBox): Promise<void> {
  if (box.kind === 'mysql') {
    await mysqlQuery(`ALTER TABLE \`${schemaOf(box)}\`.requests DROP CONSTRAINT requests_args_strings`);
    return;
  }
  if (box.kind === 'postgres') {
    await sql(`ALTER TABLE "${schemaOf(box)}".requests DROP CONSTRAINT IF EXISTS requests_args_strings`);
    return;
  }
  const db = new Database(join(box.stateDir, 'cronguard.db'));
  db.exec('DROP TRIGGER IF EXISTS requests_args_insert; DROP TRIGGER IF EXISTS requests_args_update');
  db.close();
}

describe.each(STORES)("requests' arguments (%s)", (kind) => {
  it('the store refuses args that are not an array of strings (NULL, numbers, objects, nested arrays, NUL)', async () => {
    const box = storeBox(kind);
    const job = box.job('strict');
    await cronguard(['migrate'], box.env);
    for (const args of MALFORMED[kind]) {
      await expect(insert(box, job, args), args).rejects.toThrow(kind === 'sqlite' ? /requests.args must be a JSON array of strings/ : /requests_args_strings/);
    }
    if (kind === 'postgres') {
      await expect(sql(`SELECT "${schemaOf(box)}".request($1, ARRAY['x', NULL])`, [job])).rejects.toThrow(/requests_args_strings/);
    }
    expect(await insert(box, job, GOOD[kind])).toBeGreaterThan(0);
    expect((await box.requests()).map((r) => r.args)).toEqual([['a b', '', 'é']]);
  });

  it('a run that claims malformed args anyway ends each such request failed with its reason, and serves the rest', async () => {
    const box = storeBox(kind);
    const job = box.job('lenient');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    await dropConstraints(box);
    const bad: number[] = [];
    for (const args of MALFORMED[kind]) bad.push(await insert(box, job, args));
    const good = await box.request(job, ['ok']);
    const result = await cronguard(['-n', job, '--on-request', '--batch', '--', fixture('args.sh'), log], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr.split('\n').filter(Boolean)).toEqual(bad.map((id) => expect.stringMatching(new RegExp(`^cronguard: ${job}: request ${id} failed without running: ${REASON}`))));
    expect(argsOfRuns(log)).toEqual(['ok']);
    const [run] = await box.runs();
    expect(run).toMatchObject({ status: 'succeeded' });
    const requests = await box.requests();
    expect(requests.find((r) => r.id === good)).toMatchObject({ status: 'succeeded', run_id: run?.id });
    for (const id of bad) expect(requests.find((r) => r.id === id)).toMatchObject({ status: 'failed', run_id: null, error: expect.stringMatching(new RegExp(`^${REASON}`)) });
  });

  it('an --on-request run for nothing but malformed args starts nothing (64) and leaves no row running', async () => {
    const box = storeBox(kind);
    const job = box.job('only-bad');
    await cronguard(['migrate'], box.env);
    await dropConstraints(box);
    const id = await insert(box, job, MALFORMED[kind][0]);
    const result = await cronguard(['-n', job, '--on-request', '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(64);
    expect(result.stderr).toMatch(/request \d+ failed without running: its args are not all strings[^\n]*\ncronguard: \S+: no request it claimed can be served/);
    expect(lines(box.path('ran'))).toEqual([]);
    expect((await box.runs()).map((r) => r.status)).toEqual(['failed']);
    expect((await box.requests()).find((r) => r.id === id)).toMatchObject({ status: 'failed' });
  });

  it('--batch: identical requests are served once, all of them by the run', async () => {
    const box = storeBox(kind);
    const job = box.job('dedupe');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    for (const id of ['101', '102', '103', '102']) await box.request(job, [id]);
    await box.request(job, ['102', '103']);
    expect(await cronguard(['-n', job, '--on-request', '--batch', '--', fixture('args.sh'), log], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(argsOfRuns(log)).toEqual(['101 102 103 102 103']);
    const [run, ...others] = await box.runs();
    expect(others).toEqual([]);
    expect((await box.requests()).map((r) => [r.status, r.run_id])).toEqual(Array(5).fill(['succeeded', run?.id]));
  });
});

describe("requests' arguments in SQLite, which cannot check UTF-8", () => {
  it('a request whose args are not UTF-8 (a Latin-1 file name) ends failed; the command never gets U+FFFD', async () => {
    const box = storeBox('sqlite');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    // ["café"] in Latin-1, as a web application on a Latin-1 connection writes it.
    const id = await insert(box, 'latin', `CAST(X'5B22636166E9225D' AS TEXT)`);
    const result = await cronguard(['-n', 'latin', '--', fixture('args.sh'), log], box.env);
    expect(result).toMatchObject({ code: 0, stderr: `cronguard: latin: request ${id} failed without running: its args are not valid UTF-8, and cronguard passes arguments on unchanged or not at all\n` });
    expect(argsOfRuns(log)).toEqual(['']);
    expect((await box.runs()).map((r) => r.status)).toEqual(['succeeded']);
    expect((await box.requests())[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(/not valid UTF-8/) });
  });
});
