import { NotFoundError } from '../../errors.js';
import type { SchemaMemory } from '../shared.js';
import { isRetryableTransaction, serverErrno } from './errors.js';
import { appliedVersion, migrateMysql, MYSQL_MIGRATIONS } from './migrations.js';
import type { Changed, MysqlSession } from './session.js';
import { quoteName, runSql } from './sql.js';
import { pauseSql, readSql } from './sql-reads.js';

// Errors that mean the log is missing or older than this code: no such table (1146),
// database (1049) or column (1054). Migrate and try again.
const SCHEMA_MISSING = new Set([1146, 1049, 1054]);
// A statement on its own (autocommit) that met a deadlock or a lock wait timeout was rolled
// back whole: it is sent again, this many times in all (as the session's transactions are).
const STATEMENT_TRIES = 4;

// What every MySQL store statement goes through: the dialect's statements for its database,
// and the tables created or upgraded when the session finds them missing or behind.
export class MysqlBase {
  protected readonly sql: ReturnType<typeof runSql>;
  protected readonly reads: ReturnType<typeof readSql>;
  protected readonly pauses: ReturnType<typeof pauseSql>;
  // The log was checked (or is remembered) current for this session.
  private checked = false;

  // `create`: a missing log is created on first use (runs, migrate); a reader (history,
  // logs, locks) must not create one as a side effect of looking, say in a mistyped database.
  constructor(
    readonly session: MysqlSession,
    protected readonly database: string,
    protected readonly create = true,
    private readonly memory: SchemaMemory | null = null,
  ) {
    const D = quoteName(database);
    this.sql = runSql(D);
    this.reads = readSql(D);
    this.pauses = pauseSql(D);
  }

  get D(): string {
    return quoteName(this.database);
  }

  migrate(): Promise<number> {
    return migrateMysql(this.session, this.database);
  }

  async close(): Promise<void> {
    await this.session.close();
  }

  // Before the first statement: a run asks once per host and schema version (the memory
  // spares later runs the round trip). Tables dropped afterwards still fail a statement,
  // which migrates and tries again.
  protected async withSchema<T>(attempt: () => Promise<T>): Promise<T> {
    if (!this.checked) await this.check();
    try {
      return await attempt();
    } catch (error) {
      if (!SCHEMA_MISSING.has(serverErrno(error) ?? 0)) throw error;
      this.memory?.forget();
      if (!this.create) throw this.missing();
      await this.migrate();
      return attempt();
    }
  }

  // One statement that writes, outside a transaction, sent again on a deadlock or a lock
  // wait timeout rather than failing the run's record.
  protected async write(sql: string, params: readonly unknown[]): Promise<Changed> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.session.execute(sql, params);
      } catch (error) {
        if (attempt >= STATEMENT_TRIES || !isRetryableTransaction(error) || this.session.lost) throw error;
      }
    }
  }

  private async check(): Promise<void> {
    if (this.memory?.current) {
      this.checked = true;
      return;
    }
    const version = await appliedVersion(this.session, this.database);
    if (!this.create && version === 0) throw this.missing();
    if (this.create && version < MYSQL_MIGRATIONS.length) await this.migrate();
    this.checked = true;
    if (this.create) this.memory?.remember();
  }

  private missing(): NotFoundError {
    // MySQL hides a database from a user with no privilege on it: absent and unreadable look alike.
    const where = `database ${this.database} at ${this.session.config.display}`;
    return new NotFoundError(`no run log in ${where} (nothing was recorded there, or this user may not read it: see the README's grants)`);
  }
}
