// The bench's MySQL mode (bench.mjs, requests.mjs): a local MariaDB or MySQL at
// BENCH_MYSQL_URL, when one answers; its run log in a database of the bench's own, dropped
// at the end. The start-up's floor loads mysql2 and connects (mysql-floor.cjs).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export function mysqlMode({ root, launcher, database, env }) {
  const url = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
  const { hostname, port } = new URL(url);
  const probe = `require('net').connect(${port || 3306}, '${hostname}').on('connect', () => process.exit(0)).on('error', () => process.exit(1))`;
  const reachable = spawnSync('node', ['-e', probe]).status === 0;
  const args = ['-n', 'b', '--db', url, '--schema', database, '--', 'true'];
  const floor = ['node', join(root, 'test/bench/mysql-floor.cjs'), url];
  const floorWorks = reachable && spawnSync(floor[0], floor.slice(1), { stdio: 'ignore' }).status === 0;
  const cases = [];
  // No ratio goal: loading mysql2 alone costs more than PostgreSQL's goal allows over node -e 0
  // (the floor shows it); what counts is the time over the floor.
  if (reachable) cases.push({ label: 'cronguard -n b --db mysql://... -- true (mysql lock + log)', argv: [launcher, ...args], floor: floorWorks ? 'mysql' : undefined, mysql: true });
  if (floorWorks) cases.push({ label: 'node: mysql2 connect, spawn true (mysql floor)', argv: floor, id: 'mysql', mysql: true });
  const shown = url.replace(/:[^:@/]*@/, ':***@');
  return {
    url,
    reachable,
    cases,
    trips() {
      if (!reachable) return `\nmysql mode skipped: nothing answers at ${shown}`;
      const trips = /(\d+) MySQL round trips?/.exec(spawnSync(launcher, ['-v', ...args], { env }).stderr.toString())?.[1] ?? '?';
      return `\nmysql mode: ${trips} round trips after connecting (${shown})`;
    },
    async drop() {
      if (!reachable) return;
      const { createConnection } = await import('mysql2/promise');
      const u = new URL(url);
      try {
        const connection = await createConnection({ host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) || undefined });
        await connection.query(`DROP DATABASE IF EXISTS \`${database}\``);
        await connection.end();
      } catch (error) {
        console.error(`bench: could not drop MySQL database ${database}: ${error.message}`);
        process.exitCode = 1;
      }
    },
  };
}
