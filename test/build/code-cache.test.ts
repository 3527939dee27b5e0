import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
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

  it('holds files in ASCII only, so that each is read into a one-byte string', () => {
    const lib = join(ROOT, 'dist', 'lib');
    const wide = readdirSync(lib).filter((file) => /[^\0-\x7f]/.test(readFileSync(join(lib, file), 'utf8')));
    expect(wide).toEqual([]);
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

// A copy of the package as npm installs it (dist/, scripts/, package.json, node_modules),
// inside the tree; node_modules links to the project's, but for `broken`, an addon whose
// compiled file is not one (as dlopen sees an addon it cannot load).
function packageCopy(options: { dist?: boolean; broken?: string } = {}): string {
  const dir = join(ROOT, 'node_modules', '.cache', `cronguard-package-${process.pid}-${copies.length}`);
  copies.push(dir);
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  for (const file of ['postinstall.mjs', 'train.mjs', 'train-postgres.mjs', 'train-mysql.mjs']) copyFileSync(join(ROOT, 'scripts', file), join(dir, 'scripts', file));
  copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  if (options.dist !== false) {
    execFileSync('cp', ['-a', join(ROOT, 'dist'), join(dir, 'dist')]);
    rmSync(join(dir, 'dist', 'cache'), { recursive: true, force: true });
  }
  mkdirSync(join(dir, 'node_modules'));
  for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
    if (entry === '.cache') continue;
    if (entry === options.broken) execFileSync('cp', ['-R', join(ROOT, 'node_modules', entry), join(dir, 'node_modules', entry)]);
    else symlinkSync(join(ROOT, 'node_modules', entry), join(dir, 'node_modules', entry));
  }
  if (options.broken) {
    const release = join(dir, 'node_modules', options.broken, 'build', 'Release');
    for (const file of readdirSync(release).filter((f) => f.endsWith('.node'))) writeFileSync(join(release, file), 'not an addon\n');
  }
  return dir;
}

const postinstall = (dir: string, env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, [join(dir, 'scripts', 'postinstall.mjs')], { encoding: 'utf8', env: { PATH: process.env.PATH, ...env } });

describe('the npm package\'s postinstall (scripts/postinstall.mjs)', () => {
  it('loads both addons, trains the cache for the installing node and notes that node for the launcher', () => {
    const dir = packageCopy();
    const result = postinstall(dir);
    expect(result).toMatchObject({ status: 0, stdout: '', stderr: '' });
    expect(readFileSync(join(dir, 'dist', 'node'), 'utf8')).toBe(`${process.execPath}\n`);
    expect(run(join(dir, 'dist'), sandbox().env)).toMatchObject({ code: 0, rejected: 0, missing: 0 });
  });

  it('says nothing and exits 0 where there is no dist/ yet (a clone\'s npm ci)', () => {
    expect(postinstall(packageCopy({ dist: false }))).toMatchObject({ status: 0, stdout: '', stderr: '' });
  });

  // npm said "added 41 packages" and every run exited 69 (issue 36, item 1).
  it.each(['fs-ext', 'better-sqlite3'])('fails the install when %s does not load in the installing node: one line, the cause and the fix', (addon) => {
    const dir = packageCopy({ broken: addon });
    const result = postinstall(dir);
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(new RegExp(`^cronguard: the native addon ${addon} does not load in ${process.execPath} ${process.version} \\([^\n]*\\): install cronguard again with this node \\(${process.execPath}\\), with python3, make and a C\\+\\+ compiler\n$`));
    expect(existsSync(join(dir, 'dist', 'node'))).toBe(false);
  });

  it('names npm\'s nodedir when it holds another Node.js\'s headers, and this node\'s', () => {
    const dir = packageCopy({ broken: 'better-sqlite3' });
    const nodedir = join(dir, 'other-node');
    mkdirSync(join(nodedir, 'include', 'node'), { recursive: true });
    writeFileSync(join(nodedir, 'include', 'node', 'node_version.h'), '#define NODE_MAJOR_VERSION 18\n#define NODE_MINOR_VERSION 20\n#define NODE_PATCH_VERSION 4\n');
    const result = postinstall(dir, { npm_config_nodedir: nodedir });
    expect(result.status).toBe(1);
    const own = dirname(dirname(process.execPath));
    const cure = existsSync(join(own, 'include', 'node', 'node.h'))
      ? `with --nodedir=${own} (this node's headers) or with nodedir unset (npm config delete nodedir)`
      : "with nodedir unset (npm config delete nodedir), so that this node's headers are fetched";
    expect(result.stderr).toMatch(/^cronguard: the native addon better-sqlite3 does not load in [^\n]*\n$/);
    expect(result.stderr).toContain(`; npm's nodedir (${nodedir}) holds Node.js 18.20.4's headers: install cronguard again ${cure}\n`);
  });
});
