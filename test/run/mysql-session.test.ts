import { describe, expect, it } from 'vitest';
import { connectMysql } from '../../src/store/mysql/connect.js';
import type { MysqlSession } from '../../src/store/mysql/session.js';
import { resolveMysql } from '../../src/store/mysql/url.js';
import { waitFor } from '../helpers.js';
import { mysqlClient, mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// The session every MySQL statement of cronguard's goes through: its settings, whatever the
// server's defaults; a killed connection seen as lost; a deadlocked transaction run again.

async function session(database: string): Promise<MysqlSession> {
  return connectMysql(resolveMysql({ value: mysqlUrl(), from: '--db' }, { value: database, from: '--schema' }, {}), 'cronguard:test');
}

describe('MySQL session', () => {
  it('is in UTC with a known sql_mode, and a value with quotes and backslashes goes in and out intact', async () => {
    const box = mysqlSandbox();
    const s = await session(box.database);
    try {
      const [row] = await s.query<{ tz: string; mode: string; wait: number; id: number }>(
        'SELECT @@time_zone AS tz, @@sql_mode AS mode, @@innodb_lock_wait_timeout AS wait, CONNECTION_ID() AS id',
      );
      expect(row).toEqual({ tz: '+00:00', mode: 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', wait: 5, id: s.connectionId });
      const tricky = `it's a "test" \\ with \\' and a trailing backslash\\`;
      const [echo] = await s.query<{ v: string; at: Date }>('SELECT ? AS v, UTC_TIMESTAMP(3) AS at', [tricky]);
      expect(echo?.v).toBe(tricky);
      // A Date read as UTC: near this process's clock, whatever the server's zone.
      expect(echo?.at).toBeInstanceOf(Date);
      expect(Math.abs(Number(echo?.at) - Date.now())).toBeLessThan(60_000);
      expect(s.roundTrips).toBe(2);
    } finally {
      await s.close();
    }
  });

  it('KILL of its connection: it is lost, and its watchers hear why', async () => {
    const box = mysqlSandbox();
    const s = await session(box.database);
    let heard: string | null = null;
    s.watch((reason) => {
      heard = reason;
    });
    await mysqlQuery(`KILL ${s.connectionId}`);
    await waitFor(() => heard !== null, 'the session to notice');
    expect(s.lost).not.toBeNull();
    await expect(s.query('SELECT 1')).rejects.toThrow(/connection lost/);
    s.destroy();
  });

  it('a transaction chosen as a deadlock victim is rolled back and run again', async () => {
    const box = mysqlSandbox();
    const t = `\`${box.database}\`.t`;
    await mysqlQuery(`CREATE DATABASE \`${box.database}\``);
    await mysqlQuery(`CREATE TABLE ${t} (id INT PRIMARY KEY, n INT NOT NULL) ENGINE = InnoDB`);
    await mysqlQuery(`INSERT INTO ${t} VALUES ${Array.from({ length: 20 }, (_, i) => `(${i + 1}, 0)`).join(', ')}`);
    const s = await session(box.database);
    const other = await mysqlClient();
    try {
      let tries = 0;
      // `other` holds rows 2-20: the heavier transaction, so InnoDB picks the session as victim.
      await other.query('BEGIN');
      await other.query(`UPDATE ${t} SET n = n + 1 WHERE id >= 2`);
      const done = s.transaction(async (tx) => {
        tries++;
        await tx.execute(`UPDATE ${t} SET n = n + 10 WHERE id = 1`);
        await tx.execute(`UPDATE ${t} SET n = n + 10 WHERE id = 2`);
      });
      // Its statement on row 2 is running: it cannot end while `other` holds that row.
      const waiting = async () =>
        (await mysqlQuery("SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE '%WHERE id = 2'", [s.connectionId])).length > 0;
      await waitFor(waiting, 'the session to hold row 1 and wait for row 2');
      // Now `other` asks for row 1: a deadlock; the session is rolled back, `other` goes on.
      await other.query(`UPDATE ${t} SET n = n + 1 WHERE id = 1`);
      await other.query('COMMIT');
      await done;
      expect(tries).toBe(2);
      const rows = await mysqlQuery<{ id: number; n: number }>(`SELECT id, n FROM ${t} WHERE id <= 3 ORDER BY id`);
      expect(rows).toEqual([
        { id: 1, n: 11 },
        { id: 2, n: 11 },
        { id: 3, n: 1 },
      ]);
    } finally {
      await other.end();
      await s.close();
    }
  });
});
