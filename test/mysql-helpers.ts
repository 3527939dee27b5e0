import { randomBytes } from 'node:crypto';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterEach, inject } from 'vitest';
import { type Sandbox, sandbox } from './helpers.js';

// The MySQL/MariaDB tests' server (see global-setup.ts) and their throwaway databases: each
// test's run log is a database of its own, dropped after the test.
export const mysqlUrl = (): string => inject('mysqlUrl');

const databases: string[] = [];
afterEach(async () => {
  const drop = databases.splice(0);
  for (const db of drop) await mysqlQuery(`DROP DATABASE IF EXISTS \`${db}\``);
});

export interface MysqlSandbox extends Sandbox {
  // The tables' database (--schema), created by cronguard on first use.
  readonly database: string;
  // A job name unique to this test: GET_LOCK names are the whole server's.
  job(base: string): string;
}

export function mysqlSandbox(): MysqlSandbox {
  const database = `t_${randomBytes(6).toString('hex')}`;
  databases.push(database);
  const box = sandbox();
  const env = { ...box.env, CRONGUARD_DATABASE_URL: mysqlUrl(), CRONGUARD_SCHEMA: database };
  return { ...box, env, database, job: (base) => `${base}-${database}` };
}

// A connection held by the test (to hold a lock as an application would, or to kill one),
// to the tests' server or the one `at` names.
export async function mysqlClient(at = mysqlUrl()): Promise<Connection> {
  const { createConnection } = await import('mysql2/promise');
  const url = new URL(at);
  return createConnection({
    host: url.hostname,
    port: Number(url.port || 3306),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1) || undefined,
    timezone: 'Z',
    supportBigNumbers: true,
    // ?ssl-mode=REQUIRED: encrypted, unchecked (a server that requires TLS).
    ...(url.searchParams.get('ssl-mode') === 'REQUIRED' ? { ssl: { rejectUnauthorized: false } } : {}),
  });
}

export async function mysqlQuery<R = RowDataPacket>(sql: string, params: unknown[] = [], at?: string): Promise<R[]> {
  const client = await mysqlClient(at);
  try {
    const [rows] = await client.query(sql, params);
    return rows as R[];
  } finally {
    await client.end();
  }
}
