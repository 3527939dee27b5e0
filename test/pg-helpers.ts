import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterEach, inject } from 'vitest';
import { advisoryKey } from '../src/store/postgres/lock.js';
import type { RunRow } from '../src/store/types.js';
import { type Sandbox, sandbox } from './helpers.js';

const schemas: string[] = [];
afterEach(async () => {
  const drop = schemas.splice(0);
  if (drop.length === 0) return;
  await sql(`DROP SCHEMA IF EXISTS ${drop.map((s) => `"${s}"`).join(', ')} CASCADE`);
});

export const databaseUrl = (): string => inject('databaseUrl');

// A sandbox whose run log is a fresh schema of the test server, dropped afterwards. Job
// names must be unique too: advisory locks are shared by the whole database.
export function pgSandbox(): Sandbox & { schema: string; job: (base: string) => string } {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  schemas.push(schema);
  const box = sandbox();
  const env = { ...box.env, CRONGUARD_DATABASE_URL: databaseUrl(), CRONGUARD_SCHEMA: schema };
  return { ...box, env, schema, job: (base) => `${base}-${schema}` };
}

export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

export async function pgRuns(schema: string): Promise<RunRow[]> {
  try {
    return await sql<RunRow>(`SELECT * FROM "${schema}".runs ORDER BY id`);
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return [];
    throw error;
  }
}

// The backend pid of a cronguard session, found by its application_name.
export async function backendOf(job: string): Promise<number | null> {
  const [row] = await sql<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
    `cronguard:${job}`.slice(0, 63),
  ]);
  return row?.pid ?? null;
}

// A connection held open by the test, e.g. to hold an advisory lock as an application would.
export async function holdingClient(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  return client;
}

// A TCP proxy in front of the test server (or the server of URL `to`) that a test can stop
// (connections refused, as with a stopped server), start again, or freeze (packets silently
// dropped, as with a cut network).
export interface PgProxy {
  readonly url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  freeze(): void;
  // Data flows again on the connections frozen, as when the network comes back.
  thaw(): void;
  // From the first packet of a client holding `text` on, what clients send waits in the proxy
  // until resume() passes it on, in order (see mysql-proxy.ts).
  holdFrom(text: string): void;
  holding(): boolean;
  resume(): void;
  // Resets every connection, the proxy still listening: the client sees its connection reset.
  cut(): void;
  close(): Promise<void>;
}

export async function proxy(to = databaseUrl()): Promise<PgProxy> {
  const target = new URL(to);
  const sockets = new Set<Socket>();
  let frozen = false;
  let holdText: string | null = null;
  const held: (() => void)[] = [];
  let server: Server | null = null;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('error', () => {});
          s.on('close', () => sockets.delete(s));
        }
        client.on('data', (d: Buffer) => {
          if (frozen) return;
          if (holdText !== null && (held.length > 0 || d.includes(holdText))) held.push(() => upstream.write(d));
          else upstream.write(d);
        });
        upstream.on('data', (d) => frozen || client.write(d));
        client.on('end', () => upstream.end());
        upstream.on('end', () => client.end());
      });
      const listening = server;
      listening.listen(port, '127.0.0.1', () => {
        port = (listening.address() as { port: number }).port;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      if (server) server.close(() => resolve());
      else resolve();
      server = null;
    });
  await listen();
  const url = new URL(to);
  url.port = String(port);
  return {
    url: url.toString(),
    stop,
    start: listen,
    freeze: () => (frozen = true),
    thaw: () => (frozen = false),
    holdFrom: (text) => (holdText = text),
    holding: () => held.length > 0,
    resume: () => {
      holdText = null;
      for (const pass of held.splice(0)) pass();
    },
    cut: () => {
      for (const s of sockets) s.resetAndDestroy();
    },
    close: stop,
  };
}

// Advisory locks a job's runs hold on the server: on its lock key, or by a session of its
// own (application_name cronguard:JOB, which a pooler passes on). The server is shared with
// test files running alongside, whose jobs hold advisory locks of their own.
export async function advisoryLocksOf(job: string, schema: string): Promise<unknown[]> {
  return sql(
    `SELECT l.pid FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory'
        AND ((l.objsubid = 1 AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid)
             OR a.application_name = $2)`,
    [advisoryKey(job, schema).toString(), `cronguard:${job}`.slice(0, 63)],
  );
}
