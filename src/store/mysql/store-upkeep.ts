import { UsageError } from '../../errors.js';
import { monotonicMs } from '../../util/time.js';
import { PRUNE_BATCH, type PruneOptions, type PruneResult } from '../types.js';
import { serverErrno } from './errors.js';
import type { MysqlSession } from './session.js';
import { quoteName } from './sql.js';
import type { ReadSql } from './sql-reads.js';

// The log's upkeep: retention (prune), the periodic task that runs it, and what
// `migrate --group` grants. None of it is on a run's path.

// A duplicate key (1062): another session inserted the row first.
const DUPLICATE = 1062;
// No such account: MariaDB's "can't find any matching row in the user table" (1133), MySQL
// 8's "you are not allowed to create a user with GRANT" (1410).
const NO_ACCOUNT = new Set([1133, 1410]);

// Deletes old finished runs, then old ended requests, in batches of PRUNE_BATCH, each its
// own short transaction, oldest first, up to the newest run old enough to go (so runs
// recorded meanwhile are never looked at). A job's latest `keep` runs, its latest success
// and running rows stay; rows another session has locked are left for next time. Stops at
// the deadline, saying so (complete: false).
export async function pruneLog(session: MysqlSession, sql: ReadSql, { before, keep, deadline }: PruneOptions): Promise<PruneResult> {
  const [bound] = await session.query<{ id: number }>(sql.pruneBound, [before]);
  const upTo = Number(bound?.id ?? 0);
  let runs = 0;
  let after = 0;
  for (;;) {
    if (monotonicMs() >= deadline) return { runs, requests: 0, complete: false };
    const ids = await session.transaction(async (t) => {
      const batch = (await t.query<{ id: number }>(sql.pruneBatch, [after, upTo, before, keep, Math.max(keep - 1, 0), PRUNE_BATCH])).map((r) => Number(r.id));
      if (batch.length > 0) await t.execute(sql.pruneRuns(batch.length), batch);
      return batch;
    });
    if (ids.length === 0) break;
    runs += ids.length;
    after = Math.max(...ids);
  }
  let requests = 0;
  for (let n = -1; n !== 0 && monotonicMs() < deadline; requests += n) {
    n = (await session.transaction((t) => t.execute(sql.pruneRequests, [before, PRUNE_BATCH]))).affectedRows;
  }
  return { runs, requests, complete: monotonicMs() < deadline };
}

// Claims `task` when it last ran `everyMs` ago or more, for the whole log: its row locked,
// then inserted or moved on (a racing first insert fails on the key: the other has it).
export function claimTask(session: MysqlSession, sql: ReadSql, task: string, everyMs: number): Promise<boolean> {
  return session.transaction(async (t) => {
    const now = new Date();
    const [row] = await t.query<{ last_at: Date }>(sql.taskRow, [task]);
    if (!row) {
      return t.execute(sql.taskNew, [task, now]).then(
        () => true,
        (error) => {
          if (serverErrno(error) === DUPLICATE) return false;
          throw error;
        },
      );
    }
    if (row.last_at.getTime() > now.getTime() - everyMs) return false;
    await t.execute(sql.taskRan, [now, task]);
    return true;
  });
}

// `migrate --group ACCOUNT` on MySQL: what a web application's account needs to queue
// requests (the documented INSERT), cancel one, and follow them and their runs. ACCOUNT is
// a user or role ('webapp': MariaDB's roles have no host, and MySQL reads it as
// 'webapp'@'%', as it names roles too) or 'user@host', as CREATE USER named it.
export async function allowRequests(session: MysqlSession, database: string, account: string): Promise<void> {
  const D = quoteName(database);
  const who = accountName(account);
  // MariaDB's GRANT makes a missing account, with no password, unless the session's sql_mode
  // has NO_AUTO_CREATE_USER (the session sets its own mode, without it); MySQL 8 never does,
  // and refuses the mode: there the SET fails and nothing needs undoing.
  await session.query('SET @cronguard_sql_mode = @@SESSION.sql_mode');
  const guarded = await session.query("SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_AUTO_CREATE_USER')").then(() => true, () => false);
  try {
    await session.query(`GRANT SELECT ON ${D}.* TO ${who}`);
    await session.query(`GRANT INSERT, UPDATE (status, finished_at) ON ${D}.requests TO ${who}`);
    // Schedules: a job's schedule, not its command, nor its name (renaming a paused job's row
    // would resume it); so INSERT IGNORE and UPDATE, as docs/fleet-mysql.md has them.
    await session.query(`GRANT INSERT (name, schedule), UPDATE (schedule) ON ${D}.jobs TO ${who}`);
  } catch (error) {
    if (!NO_ACCOUNT.has(serverErrno(error) ?? 0)) throw error;
    throw new UsageError(`--group: no user or role '${account}' on the server; CREATE USER (or CREATE ROLE) it first`);
  } finally {
    if (guarded) await session.query('SET SESSION sql_mode = @cronguard_sql_mode');
  }
}

function accountName(account: string): string {
  const at = account.lastIndexOf('@');
  const literal = (s: string) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
  if (at < 0) {
    if (account === '') throw new UsageError('--group: give a MySQL user or role, or user@host');
    return literal(account);
  }
  const [user, host] = [account.slice(0, at), account.slice(at + 1)];
  if (user === '' || host === '') throw new UsageError(`--group: give a MySQL user or role, or user@host, not '${account}'`);
  return `${literal(user)}@${literal(host)}`;
}
