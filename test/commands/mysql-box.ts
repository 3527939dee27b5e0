import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { type MysqlSandbox, mysqlClient, mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';

// A MySQL run log for the subcommands' and the web page's tests: the throwaway database of
// mysqlSandbox, read and written as an operator or a web application would (plain SQL).
export interface MysqlBox extends MysqlSandbox {
  // The database, quoted for statements.
  readonly D: string;
  rows<R = RowDataPacket>(sql: string, params?: unknown[]): Promise<R[]>;
  // A request made as docs/fleet-mysql.md tells a web application to make it: the plain INSERT.
  request(job: string, args?: string[], by?: string): Promise<number>;
  request_(id: number): Promise<{ status: string; run_id: number | null; exit_code: number | null; args: string[] }>;
}

export function mysqlBox(): MysqlBox {
  const box = mysqlSandbox();
  const D = `\`${box.database}\``;
  return {
    ...box,
    D,
    rows: (sql, params = []) => mysqlQuery(sql, params),
    request: async (job, args = [], by = 'php') => {
      // JSON_ARRAY(?, ?, ...) as the documented statement spells the arguments out; its id
      // as PHP's lastInsertId() reads it (MySQL has no RETURNING).
      const marks = args.map(() => '?').join(', ');
      const client = await mysqlClient();
      try {
        const [done] = await client.query<ResultSetHeader>(`INSERT INTO ${D}.requests (job, args, requested_by) VALUES (?, JSON_ARRAY(${marks}), ?)`, [job, ...args, by]);
        return done.insertId;
      } finally {
        await client.end();
      }
    },
    request_: async (id) => {
      const [row] = await mysqlQuery<{ status: string; run_id: number | null; exit_code: number | null; args: string | string[] }>(
        `SELECT status, run_id, exit_code, args FROM ${D}.requests WHERE id = ?`,
        [id],
      );
      if (!row) throw new Error(`no request ${id}`);
      return { ...row, run_id: row.run_id === null ? null : Number(row.run_id), args: typeof row.args === 'string' ? JSON.parse(row.args) : row.args };
    },
  };
}
