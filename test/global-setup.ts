import { execFileSync, spawn } from 'node:child_process';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    mysqlUrl: string;
  }
}

// End-to-end tests spawn the built binary, so build it from the current source first. The
// PostgreSQL tests get a throwaway server of their own (test/embedded-pg.mjs) unless
// CRONGUARD_TEST_DATABASE_URL names one. The MySQL tests use the machine's MariaDB (.ci/run
// starts it), or CRONGUARD_TEST_MYSQL_URL's server; each makes a database of its own.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  project.provide('mysqlUrl', process.env.CRONGUARD_TEST_MYSQL_URL || 'mysql://root@127.0.0.1:3306/test');
  const given = process.env.CRONGUARD_TEST_DATABASE_URL;
  if (given) {
    project.provide('databaseUrl', given);
    return async () => {};
  }
  const server = spawn(process.execPath, ['test/embedded-pg.mjs'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.trim());
    });
    server.once('exit', (code) => reject(new Error(`embedded PostgreSQL exited ${code} before it was ready`)));
  });
  project.provide('databaseUrl', url);
  return async () => {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.stdin.end();
    await exited;
  };
}
