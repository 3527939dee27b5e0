import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket, connect as tcp } from 'node:net';
import pg from 'pg';
import { clusterName, freePort } from './free-port.js';
import { waitFor } from './helpers.js';

// A real streaming replica for the field tests: a throwaway primary and its standby, made
// with Debian's postgresql-common tools (see /work/shared/FIELD.md), on free ports that
// makePair() chooses (read `port` after it).
export const PRIMARY = { name: clusterName('cg_i18_primary'), port: 0 };
export const STANDBY = { name: clusterName('cg_i18_standby'), port: 0 };
const VERSION = '15';

export const urlOf = (port: number, query = '') => `postgres://postgres@127.0.0.1:${port}/test${query}`;

// Why the pair cannot be made here, or null.
export function missingTools(): string | null {
  if (!existsSync('/usr/bin/pg_createcluster')) return 'postgresql-common (pg_createcluster) is not installed';
  if (!existsSync(`/usr/lib/postgresql/${VERSION}/bin/pg_basebackup`)) return `PostgreSQL ${VERSION}'s server tools are not installed`;
  if (process.geteuid?.() !== 0) return 'making clusters needs root';
  return null;
}

function sh(command: string, args: string[]): void {
  execFileSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

// The primary (trust authentication; its pg_hba lets 127.0.0.1 replicate) with a `test`
// database, and a standby streaming from it.
export async function makePair(): Promise<void> {
  dropPair();
  PRIMARY.port = await freePort();
  STANDBY.port = await freePort();
  sh('pg_createcluster', [VERSION, PRIMARY.name, '-p', String(PRIMARY.port), '--start', '--', '-A', 'trust']);
  await query(PRIMARY.port, 'CREATE DATABASE test', [], 'postgres');
  sh('pg_createcluster', [VERSION, STANDBY.name, '-p', String(STANDBY.port), '--', '-A', 'trust']);
  const data = emptied(STANDBY.name);
  sh('runuser', ['-u', 'postgres', '--', 'pg_basebackup', '-h', '127.0.0.1', '-p', String(PRIMARY.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '-c', 'fast']);
  sh('pg_ctlcluster', [VERSION, STANDBY.name, 'start']);
  await streaming(STANDBY.port, 'the standby to stream from the primary');
}

async function streaming(port: number, what: string): Promise<void> {
  await waitFor(async () => {
    const [row] = await query<{ ok: boolean }>(port, `SELECT pg_is_in_recovery() AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') AS ok`).catch(() => []);
    return row?.ok === true;
  }, what);
}

export function dropPair(): void {
  for (const { name } of [STANDBY, PRIMARY]) {
    if (existsSync(`/etc/postgresql/${VERSION}/${name}`)) sh('pg_dropcluster', ['--stop', VERSION, name]);
  }
}

// The data directory of a cluster, emptied for a base backup: the postgres user cannot
// recreate it (its parent is root's).
function emptied(name: string): string {
  const data = `/var/lib/postgresql/${VERSION}/${name}`;
  for (const entry of readdirSync(data)) rmSync(`${data}/${entry}`, { recursive: true, force: true });
  return data;
}

// A switchover that demotes the old primary in place, once the standby was promoted: the
// primary stops, becomes a fresh base backup of the promoted standby (what pg_rewind spares
// a large database) and starts again, on its port, as that server's standby.
export async function demotePrimary(): Promise<void> {
  sh('pg_ctlcluster', [VERSION, PRIMARY.name, 'stop', '-m', 'fast']);
  const data = emptied(PRIMARY.name);
  sh('runuser', ['-u', 'postgres', '--', 'pg_basebackup', '-h', '127.0.0.1', '-p', String(STANDBY.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '-c', 'fast']);
  sh('pg_ctlcluster', [VERSION, PRIMARY.name, 'start']);
  await streaming(PRIMARY.port, 'the old primary to stream from the promoted standby');
}

export function stopPrimary(): void {
  sh('pg_ctlcluster', [VERSION, PRIMARY.name, 'stop', '-m', 'fast']);
}

export async function promoteStandby(): Promise<void> {
  sh('pg_ctlcluster', [VERSION, STANDBY.name, 'promote']);
  await waitFor(async () => (await query<{ r: boolean }>(STANDBY.port, 'SELECT pg_is_in_recovery() AS r'))[0]?.r === false, 'the standby to be promoted');
}

export async function query<R extends pg.QueryResultRow>(port: number, text: string, values: unknown[] = [], database = 'test'): Promise<R[]> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

// A pooler in front of the primary: it passes connections through until its server goes
// away (`serverGone`); then, like PgBouncer with no server to give, it accepts logins (with
// the parameters the server had reported) and never answers a statement.
export interface Pooler {
  readonly port: number;
  serverGone(): void;
  close(): Promise<void>;
}

export async function pooler(upstreamPort: number): Promise<Pooler> {
  const sockets = new Set<Socket>();
  let gone = false;
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    if (gone) {
      client.once('data', () => client.write(welcome()));
      return;
    }
    const upstream = tcp(upstreamPort, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    serverGone: () => {
      gone = true;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

// AuthenticationOk, the parameters a PostgreSQL 15 primary reports, ReadyForQuery.
function welcome(): Buffer {
  const message = (type: string, body: Buffer) => {
    const head = Buffer.alloc(5);
    head.write(type);
    head.writeInt32BE(body.length + 4, 1);
    return Buffer.concat([head, body]);
  };
  const parameter = (name: string, value: string) => message('S', Buffer.from(`${name}\0${value}\0`));
  return Buffer.concat([
    message('R', Buffer.from([0, 0, 0, 0])),
    parameter('server_version', '15.0'),
    parameter('in_hot_standby', 'off'),
    parameter('default_transaction_read_only', 'off'),
    parameter('DateStyle', 'ISO, MDY'),
    parameter('integer_datetimes', 'on'),
    message('Z', Buffer.from('I')),
  ]);
}
