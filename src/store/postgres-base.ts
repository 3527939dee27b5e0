import type { QueryResultRow } from 'pg';
import { NotFoundError } from '../errors.js';
import type { PgSession } from '../pg/session.js';
import { appliedVersion, migratePostgres, POSTGRES_MIGRATIONS, schemaState } from './postgres-migrations.js';
import { type Statement, statements } from './postgres-sql.js';
import type { SchemaMemory } from './shared.js';

// Errors that mean the schema is missing or older than this code (a table, a schema, a
// column, a function): migrate and try again.
const SCHEMA_MISSING = new Set(['42P01', '3F000', '42703', '42883']);

// What every PostgreSQL store statement goes through: the dialect's statements for its
// schema, and a schema created or upgraded when the session finds it missing or behind.
export class PostgresBase {
  protected readonly sql: ReturnType<typeof statements>;
  protected readonly S: string;
  // The schema was checked (or is remembered) current for this session.
  private checked = false;

  // `create`: a missing schema is created on first use (runs, migrate); a reader (history,
  // logs, locks) must not create one as a side effect of looking, say in a mistyped schema.
  constructor(
    readonly session: PgSession,
    protected readonly schema: string,
    protected readonly create = true,
    private readonly memory: SchemaMemory | null = null,
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

  // Before the first statement that names the schema: a statement naming a missing schema
  // fails, and the server logs an ERROR for it (DBAs alert on those), so the session asks
  // first, in statements that cannot fail. A run asks once per host and schema version: the
  // memory spares later runs the round trip. A schema dropped afterwards still fails a
  // statement, which migrates and retries as before.
  protected async withSchema<T>(attempt: () => Promise<T>): Promise<T> {
    if (!this.checked) await this.check();
    try {
      return await attempt();
    } catch (error) {
      if (!SCHEMA_MISSING.has((error as { code?: string }).code ?? '')) throw error;
      this.memory?.forget();
      if (!this.create) throw this.missing();
      await this.migrate();
      return attempt();
    }
  }

  private async check(): Promise<void> {
    if (this.memory?.current) {
      this.checked = true;
      return;
    }
    const state = await schemaState(this.session, this.schema);
    if (!this.create && !state.present) throw this.missing();
    if (!this.create && !state.usable) {
      throw Object.assign(new Error(`permission denied for schema ${this.schema}`), { code: '42501' });
    }
    const version = await appliedVersion(this.session, this.S, state);
    // A reader reads what is there; a role that may not upgrade the schema runs on it as it is.
    if (this.create && version < POSTGRES_MIGRATIONS.length && (!state.present || state.owner)) await this.migrate();
    this.checked = true;
    if (this.create && (version >= POSTGRES_MIGRATIONS.length || !state.present || state.owner)) this.memory?.remember();
  }

  private missing(): NotFoundError {
    return new NotFoundError(`no run log in schema ${this.schema} at ${this.session.db.display} (nothing was recorded there)`);
  }

  // After a statement that worked: a schema behind this code is upgraded, best effort, by a
  // role that may (migrate() says why it may not without sending a statement that fails). The
  // statement that needs the new schema fails, migrates and retries on its own (withSchema).
  protected async upgradeIfBehind(version: number | null | undefined): Promise<void> {
    if ((version ?? 0) < POSTGRES_MIGRATIONS.length) {
      this.memory?.forget();
      await this.migrate().catch(() => {});
    }
  }
}
