import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, sandbox } from '../helpers.js';

// Copies of dist/ inside the tree (so that their requires still find node_modules), with
// their files' times kept, which the code cache is tied to.
const copies: string[] = [];
afterEach(() => {
  for (const dir of copies.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function copyOfDist(): string {
  const dir = join(ROOT, 'node_modules', '.cache', `cronguard-dist-${process.pid}-${copies.length}`);
  copies.push(dir);
  mkdirSync(dirname(dir), { recursive: true });
  // cp -a keeps times to the nanosecond (Node's cpSync does not).
  execFileSync('cp', ['-a', join(ROOT, 'dist'), dir]);
  return dir;
}

// A verbose run of the copy; returns its output and what it says of the code cache.
function run(dist: string, env: NodeJS.ProcessEnv) {
  const result = spawnSync(process.execPath, [join(dist, 'cronguard.cjs'), '-v', '-n', 'cached', '--', 'echo', 'ran'], { env, encoding: 'utf8' });
  const [used, rejected, missing] = /code cache: (\d+) files compiled from it, (\d+) rejected by V8, (\d+) without one/.exec(result.stderr)?.slice(1).map(Number) ?? [];
  return { code: result.status, stdout: result.stdout, used, rejected, missing };
}

describe('the V8 code cache of dist/', () => {
  it('is used by a run, for every file the run loads', () => {
    const result = run(copyOfDist(), sandbox().env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n', rejected: 0, missing: 0 });
    expect(result.used).toBeGreaterThanOrEqual(2);
  });

  it('is ignored for a file that changed, and rejected by V8 when it is not a cache; the run is the same', () => {
    const dist = copyOfDist();
    appendFileSync(join(dist, 'lib', 'main.cjs'), '\n// changed after the cache was made\n');
    for (const file of readdirSync(join(dist, 'cache')).filter((f) => !f.startsWith('main.cjs-'))) {
      writeFileSync(join(dist, 'cache', file), 'not a code cache');
    }
    const result = run(dist, sandbox().env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n', used: 0, missing: 1 });
    expect(result.rejected).toBeGreaterThanOrEqual(1);
  });
});

describe('the code cache training', () => {
  it('runs the PostgreSQL path against its stand-in server, so that pg is cached as a run uses it', async () => {
    const dist = copyOfDist();
    rmSync(join(dist, 'cache'), { recursive: true, force: true });
    const warnings: string[] = [];
    const warn = console.warn;
    console.warn = (line: string) => warnings.push(line);
    try {
      const train = join(ROOT, 'scripts', 'train.mjs');
      const { trainCodeCache } = (await import(train)) as { trainCodeCache(dist: string): Promise<void> };
      await trainCodeCache(dist);
    } finally {
      console.warn = warn;
    }
    expect(warnings).toEqual([]);
    // pg's file: its cache holds the functions a PostgreSQL run compiled, far more than what
    // a plain run leaves (it only loads the file at its end, to compile its top level).
    const plain = copyOfDist();
    rmSync(join(plain, 'cache'), { recursive: true, force: true });
    expect(spawnSync(process.execPath, [join(plain, 'train.cjs'), '-n', 'plain', '--', 'true'], { env: sandbox().env }).status).toBe(0);
    const pgCacheSize = (d: string) => {
      const pgFile = readdirSync(join(d, 'lib')).find((f) => f.startsWith('connect-')) as string;
      return statSync(join(d, 'cache', readdirSync(join(d, 'cache')).find((f) => f.startsWith(`${pgFile}-`)) as string)).size;
    };
    expect(pgCacheSize(dist)).toBeGreaterThan(1.3 * pgCacheSize(plain));
    expect(run(dist, sandbox().env)).toMatchObject({ code: 0, stdout: 'ran\n', rejected: 0, missing: 0 });
  }, 60_000);
});

describe('the npm package\'s postinstall (scripts/train.mjs --quiet)', () => {
  it('trains the cache for the installing node and notes that node for the launcher', () => {
    const dist = copyOfDist();
    rmSync(join(dist, 'cache'), { recursive: true, force: true });
    const result = spawnSync(process.execPath, [join(ROOT, 'scripts', 'train.mjs'), '--quiet', dist], { encoding: 'utf8' });
    expect(result).toMatchObject({ status: 0, stdout: '', stderr: '' });
    expect(readFileSync(join(dist, 'node'), 'utf8')).toBe(`${process.execPath}\n`);
    expect(run(dist, process.env)).toMatchObject({ code: 0, rejected: 0, missing: 0 });
  });

  it('says nothing and exits 0 where there is no dist/ yet (a clone\'s npm ci)', () => {
    const box = sandbox();
    const result = spawnSync(process.execPath, [join(ROOT, 'scripts', 'train.mjs'), '--quiet', box.path('dist')], { encoding: 'utf8' });
    expect(result).toMatchObject({ status: 0, stdout: '', stderr: '' });
  });
});
