import { PermissionError, UnavailableError } from '../../errors.js';
import { sha256 } from '../../util/sha256.js';
import { LOCK_WAIT_S } from './connect.js';
import { isPrivilegeError, serverErrno } from './errors.js';
import type { MysqlSession } from './session.js';
import { migrationSql, quoteName } from './sql.js';

// The schema version this code reads and writes: how many numbered migrations there are
// (held to the list by test/store/migration-versions.test.ts). The run path compares with it
// on every start; the migrations' text loads only when one is applied.
export const MYSQL_SCHEMA_VERSION = 10;

// How long a migrator waits for another host's migration before giving up.
const MIGRATE_WAIT_S = 120;
// A table or database that is not there (yet): the log is at version 0.
const MISSING = new Set([1146, 1049]);
// A statement run again after a crash that came between it and the record of its step
// finds its work done: the column it adds is there (1060, ER_DUP_FIELDNAME).
const DONE_BEFORE = new Set([1060]);

// The schema's version: the last migration applied whole; 0 when nothing is there yet (or
// this user may not read it: MySQL answers "denied" for a database it may not see, whether
// or not it exists; migrating then says what is missing).
export async function appliedVersion(session: MysqlSession, database: string): Promise<number> {
  try {
    const [row] = await session.query<{ v: number }>(migrationSql(quoteName(database)).version);
    return Number(row?.v ?? 0);
  } catch (error) {
    if (MISSING.has(serverErrno(error) ?? 0) || isPrivilegeError(error)) return 0;
    throw error;
  }
}

// Creates the database if missing and applies what is missing. A current log is only read
// (one statement), so a role that may not migrate runs on it. Hosts starting at once
// serialise on GET_LOCK('cg:migrate:<db>'), and each looks again once it holds it.
// A day: the server's own default.
const MIGRATE_LOCK_WAIT_S = 86_400;

export async function migrateMysql(session: MysqlSession, database: string): Promise<number> {
  const latest = MYSQL_SCHEMA_VERSION;
  if ((await appliedVersion(session, database)) >= latest) return latest;
  const sql = migrationSql(quoteName(database));
  const name = migrationLockName(database);
  const [got] = await session.query<{ got: number | null }>(sql.lock, [name, MIGRATE_WAIT_S]);
  if (got?.got !== 1) {
    throw new UnavailableError(`MySQL at ${session.config.display}: another cronguard has been migrating database ${database} for ${MIGRATE_WAIT_S} s; try again later`);
  }
  try {
    // DDL may wait for a table's metadata lock behind a long reader: a migration waits as
    // long as it must, not the run path's 5 s (connect.ts).
    await session.query(`SET SESSION lock_wait_timeout = ${MIGRATE_LOCK_WAIT_S}`);
    await applyMigrations(session, database);
  } catch (error) {
    if (isPrivilegeError(error)) throw mayNotMigrate(session, database, error);
    throw error;
  } finally {
    await session.query(`SET SESSION lock_wait_timeout = ${LOCK_WAIT_S}`).catch(() => {});
    await session.query(sql.unlock, [name]).catch(() => {});
  }
  return latest;
}

// Each migration not yet complete, from its first statement not yet done; each statement's
// success recorded before the next is sent.
async function applyMigrations(session: MysqlSession, database: string): Promise<void> {
  const D = quoteName(database);
  const sql = migrationSql(D);
  const [seen] = await session.query<{ n: number }>(sql.databaseSeen, [database]);
  // information_schema lists only the databases this user may see: one it cannot see is
  // created, which a user without CREATE is refused.
  if (Number(seen?.n) === 0) await session.query(sql.createDatabase);
  await session.query(sql.createTable);
  const done = await session.query<{ version: number; steps: number; complete: number }>(sql.progress);
  const { MYSQL_MIGRATIONS } = await import('./migration-files.js');
  for (let v = 1; v <= MYSQL_MIGRATIONS.length; v++) {
    const row = done.find((d) => Number(d.version) === v);
    if (row && Number(row.complete) === 1) continue;
    const steps = migrationStatements(MYSQL_MIGRATIONS[v - 1] as string, D);
    if (!row) await session.query(sql.begin, [v]);
    for (let step = Number(row?.steps ?? 0); step < steps.length; step++) {
      await session.query(steps[step] as string).catch((error: unknown) => {
        if (!DONE_BEFORE.has(serverErrno(error) ?? 0)) throw error;
      });
      await session.query(sql.step, [step + 1, v]);
    }
    await session.query(sql.complete, [v]);
  }
}

// A migration's statements, one at a time: its comment lines dropped (a comment may end in
// `;`), then split at each `;` that ends a line.
export function migrationStatements(text: string, D: string): string[] {
  return text
    .replaceAll('{{db}}', D)
    .split('\n')
    .filter((line) => !line.trim().startsWith('--'))
    .join('\n')
    .split(/;[ \t]*$/m)
    .filter((s) => s.trim() !== '');
}

// 'cg:migrate:<db>', or its hash where that passes GET_LOCK's 64 characters.
export function migrationLockName(database: string): string {
  const plain = `cg:migrate:${database}`;
  return plain.length <= 64 ? plain : `cg:migrate:${sha256(database).toString('hex').slice(0, 40)}`;
}

function mayNotMigrate(session: MysqlSession, database: string, error: unknown): PermissionError {
  const why = (error as { sqlMessage?: string }).sqlMessage ?? String(error);
  return new PermissionError(
    `MySQL at ${session.config.display}: cannot create or upgrade cronguard's tables in database ${database} (${why}); ` +
      `run cronguard migrate as a user with CREATE, ALTER, INDEX and REFERENCES on \`${database}\`.*, or create the database for this user`,
  );
}
