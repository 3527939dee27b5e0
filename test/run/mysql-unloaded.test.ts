import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BINARY, ROOT, sandbox } from '../helpers.js';
import { mysqlSandbox } from '../mysql-helpers.js';
import { pgSandbox } from '../pg-helpers.js';

// The MySQL driver and cronguard's MySQL code load only when a MySQL URL is used: the run
// path of the embedded log and of PostgreSQL opens none of their files (strace, as a user
// would check it).

const hasStrace = spawnSync('strace', ['-V']).status === 0;

// The built files that hold MySQL code (the driver, the dialect's SQL and lock).
function mysqlFiles(): string[] {
  const lib = join(ROOT, 'dist', 'lib');
  return readdirSync(lib)
    .filter((f) => /mysql_native_password|IS_USED_LOCK\(|MySQL is busy/.test(readFileSync(join(lib, f), 'utf8')))
    .map((f) => join(lib, f));
}

// Every file the binary opened for `args`, its children's included.
function opened(args: string[], env: NodeJS.ProcessEnv, trace: string): string[] {
  execFileSync('strace', ['-f', '-qq', '-e', 'trace=openat', '-o', trace, process.execPath, BINARY, ...args], { env, stdio: 'ignore' });
  return [...readFileSync(trace, 'utf8').matchAll(/openat\([^,]+, "([^"]+)"/g)].map((m) => m[1] as string);
}

describe.skipIf(!hasStrace)('the MySQL driver stays unloaded', () => {
  it('is found in the build (else this test proves nothing)', () => {
    expect(mysqlFiles().length).toBeGreaterThan(0);
  });

  it('by a run with the embedded log, and by one with PostgreSQL; a MySQL run does load it', () => {
    const files = mysqlFiles();
    const touched = (paths: string[]) => paths.filter((p) => files.includes(p) || p.includes('node_modules/mysql2'));
    const box = sandbox();
    expect(touched(opened(['-n', 'plain', '--', 'true'], box.env, box.path('sqlite.trace')))).toEqual([]);
    const pg = pgSandbox();
    expect(touched(opened(['-n', pg.job('pg'), '--', 'true'], pg.env, pg.path('pg.trace')))).toEqual([]);
    const my = mysqlSandbox();
    expect(touched(opened(['-n', my.job('my'), '--', 'true'], my.env, my.path('my.trace'))).length).toBeGreaterThan(0);
  });
});
