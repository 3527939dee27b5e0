import type { QueryResultRow } from 'pg';
import { NotFoundError } from '../errors.js';
import type { PgSession } from '../pg/session.js';
import { migratePostgres, POSTGRES_MIGRATIONS } from './postgres-migrations.js';
import { type Statement, statements } from './postgres-sql.js';

// Errors that mean the schema is missing or older than this code (a table, a schema, a
// column, a function): migrate and try again.
const SCHEMA_MISSING = new Set(['42P01', '3F000', '42703', '42883']);

// What every PostgreSQL store statement goes through: the dialect's statements for its
// schema, and a schema created or upgraded when a statement finds it missing or behind.
export class PostgresBase {
  protected readonly sql: ReturnType<typeof statements>;
  protected readonly S: string;

  // `create`: a missing schema is created on first use (runs, migrate); a reader (history,
  // logs, locks) must not create one as a side effect of looking, say in a mistyped schema.
  constructor(
    readonly session: PgSession,
    protected readonly schema: string,
    protected readonly create = true,
  ) {
    this.S = session.escapeIdentifier(schema);
    this.sql = statements(this.S);
  }

  migrate(): Promise<number> {
    return migratePostgres(this.session, this.schema);
  }

  async close(): Promise<void> {
    await this.session.close();
  }

  protected run<R extends QueryResultRow>(statement: Statement, values: Record<string, unknown>): Promise<R[]> {
    return this.session.query<R>(statement.text, statement.names.map((name) => values[name]));
  }

  // The hot path does not check the schema first: a statement that fails because the
  // schema is missing migrates and retries, saving a round trip on every run.
  protected async withSchema<T>(attempt: () => Promise<T>): Promise<T> {
    try {
      return await attempt();
    } catch (error) {
      if (!SCHEMA_MISSING.has((error as { code?: string }).code ?? '')) throw error;
      if (!this.create) {
        throw new NotFoundError(`no run log in schema ${this.schema} at ${this.session.db.display} (nothing was recorded there)`);
      }
      await this.migrate();
      return attempt();
    }
  }

  // After a statement that worked: a schema behind this code is upgraded, best effort. A role
  // that may not migrate still recorded its run; the statement that needs the new schema
  // fails, migrates and retries on its own (withSchema).
  protected async upgradeIfBehind(version: number | null | undefined): Promise<void> {
    if ((version ?? 0) < POSTGRES_MIGRATIONS.length) await this.migrate().catch(() => {});
  }
}
