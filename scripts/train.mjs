// Trains the V8 code cache of a built dist/ (see src/boot/code-cache.ts): at build time, by
// install.sh, and after `npm install` of the package (its postinstall), for the node that
// installed it. Needs nothing but Node: an installed package has no esbuild and no sources.
//
//   node scripts/train.mjs [--quiet] [DIST]
//
// --quiet: an install's training (trainForInstall, below).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fakePostgres } from './train-postgres.mjs';

// Runs dist/train.cjs on a subcommand, a run under the postgres lock and log and one under
// the mysql lock (each against a stand-in server: build and install time have no real one;
// its failure only costs that run's cache) and last a plain run. Each starts from the cache
// the runs before it wrote, so that a file several of them load holds what each compiled.
// Training runs use a throwaway state.
export async function trainCodeCache(dist, node = process.execPath, warn = console.warn) {
  const scratch = mkdtempSync(join(tmpdir(), 'cronguard-train-'));
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: scratch, CRONGUARD_STATE_DIR: join(scratch, 's'), CRONGUARD_LOCK_DIR: join(scratch, 'l') };
  const train = (args) => new Promise((resolve) => {
    const child = spawn(node, [join(dist, 'train.cjs'), ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (status) => resolve({ status, stderr }));
  });
  // Without a stand-in (no loopback port), only its database's run is left out.
  const versions = () => JSON.parse(readFileSync(join(dist, 'train.json'), 'utf8')).postgresMigrations;
  const standIn = (name, start) =>
    Promise.resolve().then(start).catch((error) => {
      warn(`note: no ${name} training run (those runs start a little slower): ${error.message}`);
      return null;
    });
  const server = await standIn('PostgreSQL', () => fakePostgres(versions()));
  // Loaded here: a package whose file list lacks it still trains the other runs.
  const mysql = await standIn('MySQL', async () => (await import('./train-mysql.mjs')).fakeMysql());
  try {
    rmSync(join(dist, 'cache'), { recursive: true, force: true });
    const pgRun = server && ['-n', 'train', '--db', `postgres://train@127.0.0.1:${server.address().port}/train?connect_timeout=5`, '--', 'true'];
    const mysqlRun = mysql && ['--no-log', '-n', 'train', '--db', `mysql://train@127.0.0.1:${mysql.address().port}/?connect-timeout=5`, '--', 'true'];
    const runs = [[['history'], null], [pgRun, 'PostgreSQL'], [mysqlRun, 'MySQL'], [['-n', 'train', '--', 'true'], null]];
    for (const [args, optional] of runs) {
      if (!args) continue;
      const result = await train(args);
      if (result.status !== 0 && !optional) throw new Error(`training run ${args.join(' ')} failed: ${result.stderr}`);
      if (result.status !== 0) warn(`note: the ${optional} training run failed (those runs start a little slower): ${result.stderr.trim()}`);
    }
  } finally {
    server?.close();
    mysql?.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

// An install's training (the npm package's postinstall, the Debian package's postinst): a
// package without dist/ (a clone's `npm ci`, before its build) or a failed training says
// nothing; cronguard then starts a little slower. It notes in dist/node the node that
// installed the package, which cron's PATH may not reach (bin/cronguard reads it).
export async function trainForInstall(dist) {
  if (!existsSync(join(dist, 'train.cjs'))) return;
  writeFileSync(join(dist, 'node'), `${process.execPath}\n`);
  await trainCodeCache(dist, process.execPath, () => {}).catch(() => undefined);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quiet = process.argv[2] === '--quiet';
  const dist = process.argv[quiet ? 3 : 2] ?? fileURLToPath(new URL('../dist', import.meta.url));
  await (quiet ? trainForInstall(dist) : trainCodeCache(dist));
}
