import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import pg from 'pg';
import { clusterName, freePort } from './free-port.js';

// A throwaway PostgreSQL cluster with few connections (`max_connections`), made with
// Debian's postgresql-common tools on a name and port of its own, for the tests and the
// bench of many jobs through a pooler. No vitest here: the bench bundles it.
const VERSION = '15';

export interface SmallCluster {
  readonly name: string;
  readonly port: number;
  // Its `test` database, as cronguard or PgBouncer is given it.
  readonly url: string;
  // Stops the server (a fast shutdown: sessions are ended), and starts it again on its port.
  stop(): void;
  start(): void;
  running(): boolean;
  drop(): void;
}

// Why such a cluster cannot be made here, or null.
export function clusterToolsMissing(): string | null {
  if (!existsSync('/usr/bin/pg_createcluster')) return 'postgresql-common (pg_createcluster) is not installed';
  if (!existsSync(`/usr/lib/postgresql/${VERSION}/bin/postgres`)) return `PostgreSQL ${VERSION}'s server is not installed`;
  if (process.geteuid?.() !== 0) return 'making clusters needs root';
  return null;
}

function sh(command: string, args: string[]): void {
  execFileSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function dropCluster(name: string): void {
  if (existsSync(`/etc/postgresql/${VERSION}/${name}`)) sh('pg_dropcluster', ['--stop', VERSION, name]);
}

// A fresh cluster (any earlier one of that name dropped first), started on a free port, with
// trust authentication and a `test` database; its name is `base` with this process's id.
export async function makeCluster(base: string, maxConnections: number): Promise<SmallCluster> {
  const name = clusterName(base);
  const port = await freePort();
  dropCluster(name);
  sh('pg_createcluster', [VERSION, name, '-p', String(port), '-o', `max_connections=${maxConnections}`, '-o', 'shared_preload_libraries=pg_stat_statements', '--start', '--', '-A', 'trust']);
  const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  await admin.connect();
  try {
    await admin.query('CREATE DATABASE test');
  } finally {
    await admin.end();
  }
  return {
    name,
    port,
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    stop: () => sh('pg_ctlcluster', [VERSION, name, 'stop', '-m', 'fast']),
    start: () => sh('pg_ctlcluster', [VERSION, name, 'start']),
    running: () => {
      try {
        sh('pg_ctlcluster', [VERSION, name, 'status']);
        return true;
      } catch {
        // pg_ctlcluster status exits non-zero for a cluster that is down.
        return false;
      }
    },
    drop: () => dropCluster(name),
  };
}
