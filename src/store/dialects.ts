import type { CronguardError } from '../errors.js';
import type { Messages } from '../util/io.js';
import type { DatabaseConfig } from './database-config.js';
import type { MysqlConfig } from './mysql/config.js';
import { mysqlError } from './mysql/errors.js';
import { type DbConfig, refuseStandbyOnly } from './postgres/config.js';
import type { FleetRun, SharedDatabase, SharedStore } from './shared.js';
import { answeredByServer, storeError } from './store-error.js';

// The fleet's database dialects, each by its facts: the one place that tells them apart.
// Their code and drivers load only when a database of theirs is used.
interface Dialect<C> {
  // What the server is called in messages.
  readonly name: string;
  // The -l name of the lock its sessions hold (the default lock with such a URL), what that
  // lock needs, and how a refusal of the other dialect's lock names this one's URL.
  readonly lock: 'postgres' | 'mysql';
  readonly lockNeeds: string;
  readonly url: string;
  // A run's refusal of a URL it cannot lock and record with (throws a UsageError).
  checkRun(db: C): void;
  // The fleet's database for a run (its log, its locks).
  database(run: FleetRun, db: C, say: Messages): Promise<SharedDatabase>;
  // The shared log for a subcommand or the web page, as application `applicationName`;
  // `create`: its schema is made if missing. An aborted `abort` ends connecting.
  open(db: C, applicationName: string, create: boolean, abort?: AbortSignal): Promise<SharedStore>;
  // The web page's error for a failure of the log; null for a bug (neither the server's
  // answer nor the driver's, on a connection that still lives).
  pageError(error: unknown, db: C, lost: boolean): CronguardError | null;
}

const POSTGRES: Dialect<DbConfig> = {
  name: 'PostgreSQL',
  lock: 'postgres',
  lockNeeds: 'a PostgreSQL database',
  url: 'PostgreSQL',
  checkRun: refuseStandbyOnly,
  database: async (run, db, say) => (await import('./postgres/shared.js')).postgresDatabase(run, db, say),
  open: async (db, applicationName, create, abort) => (await import('./postgres/shared.js')).openPostgresShared(db, applicationName, create, abort),
  // As the CLI says them.
  pageError: (error) => storeError(error),
};

const MYSQL: Dialect<MysqlConfig> = {
  name: 'MySQL',
  lock: 'mysql',
  lockNeeds: 'a mysql:// or mariadb:// URL',
  url: 'a MySQL URL',
  checkRun: () => {},
  database: async (run, db, say) => (await import('./mysql/shared.js')).mysqlDatabase(run, db, say),
  open: async (db, applicationName, create, abort) => (await import('./mysql/shared.js')).openMysqlShared(db, applicationName, create, abort),
  // In its own words, naming the server.
  pageError: (error, db, lost) => (answeredByServer(error) || lost || (error as { code?: unknown })?.code !== undefined ? mysqlError(error, db.display) : storeError(error)),
};

const DIALECTS = { postgres: POSTGRES, mysql: MYSQL } as const;

// The dialect of a configured database. Each dialect's functions take its own config: the
// cast only forgets which, as `db` is that dialect's.
export function dialectOf(db: DatabaseConfig): Dialect<DatabaseConfig> {
  return DIALECTS[db.dialect] as Dialect<DatabaseConfig>;
}

// Every dialect, for a refusal that names the one a lock needs.
export function dialectWithLock(lock: string): Dialect<DatabaseConfig> | null {
  return (Object.values(DIALECTS).find((d) => d.lock === lock) as Dialect<DatabaseConfig> | undefined) ?? null;
}
