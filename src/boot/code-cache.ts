import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { basename, dirname, join } from 'node:path';
import { Script } from 'node:vm';

// A V8 code cache for cronguard's own bundle files: start-up is paid on every tick of every
// job, and compiling the bundle was its largest part. Node 20 has no compile cache of its
// own (22's module.enableCompileCache writes at run time, which a cron job of another user
// cannot), so cronguard keeps one: produced by a training run at build and install time
// (train.ts), read by every run, and tied to the exact file (size and modification time)
// and Node build, so a stale cache is never used. V8 itself rejects one it cannot use.

interface Internals {
  _extensions: Record<string, (module: Module, filename: string) => void>;
}

const internals = Module as unknown as Internals;

// The cache file for one source file as it is now, or null when it cannot be stat'ed.
function cacheFile(cacheDir: string, filename: string): string | null {
  try {
    // Nanoseconds: a rebuild within the same millisecond is not the same file.
    const { size, mtimeNs } = statSync(filename, { bigint: true });
    return join(cacheDir, `${basename(filename)}-${size}-${mtimeNs}-${process.version}-${process.arch}.v8`);
  } catch {
    return null;
  }
}

function readCache(file: string | null): Buffer | undefined {
  if (file === null) return undefined;
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

// What CommonJS hands a module as `require` (Module.createRequire would compute its search
// paths again, on every file).
function requireOf(module: Module): NodeJS.Require {
  const require = ((id: string) => module.require(id)) as NodeJS.Require;
  require.resolve = ((request: string, options?: { paths?: string[] }) =>
    (Module as unknown as { _resolveFilename(r: string, m: Module, main: boolean, o?: unknown): string })._resolveFilename(request, module, false, options)) as NodeJS.RequireResolve;
  require.cache = (Module as unknown as { _cache: NodeJS.Require['cache'] })._cache;
  return require;
}

// Compiles the .cjs files under `libDir` through vm.Script with their cached data; with
// `produce`, writes each file's cache (with all the functions compiled so far) at exit.
export function installCodeCache(libDir: string, cacheDir: string, produce: boolean): void {
  const compiled: [string | null, Script][] = [];
  // How each file was compiled, for -v (main.ts reads it).
  const tally = { used: 0, rejected: 0, missing: 0 };
  (globalThis as Record<symbol, unknown>)[Symbol.for('cronguard.codeCache')] = tally;
  const fallback = internals._extensions['.cjs'] ?? (internals._extensions['.js'] as Internals['_extensions'][string]);
  internals._extensions['.cjs'] = (module, filename) => {
    if (dirname(filename) !== libDir) return fallback(module, filename);
    const file = cacheFile(cacheDir, filename);
    // A training run starts from what the runs before it wrote, so that a file several runs
    // load (main.cjs, the fleet's resolving, the statement gate) keeps what each compiled.
    const cachedData = readCache(file);
    // Written wrapped as CommonJS wraps a module (scripts/build.mjs wrapLib).
    const script = new Script(readFileSync(filename, 'utf8'), { filename, cachedData });
    if (produce) compiled.push([file, script]);
    else tally[cachedData === undefined ? 'missing' : script.cachedDataRejected ? 'rejected' : 'used']++;
    const wrapper = script.runInThisContext({ displayErrors: true }) as (...args: unknown[]) => void;
    wrapper.call(module.exports, module.exports, requireOf(module), module, filename, libDir);
  };
  if (!produce) return;
  process.once('exit', () => {
    // The files this run did not need are compiled too (their top level only): a run with
    // another configuration (PostgreSQL, pings) or a subcommand still skips parsing them.
    // Such a file keeps the cache an earlier training run that used it wrote.
    const used = compiled.length;
    const require = Module.createRequire(join(libDir, 'main.cjs'));
    for (const file of readdirSync(libDir)) if (file.endsWith('.cjs')) require(join(libDir, file));
    mkdirSync(cacheDir, { recursive: true });
    compiled.forEach(([file, script], i) => {
      if (file && (i < used || !existsSync(file))) writeFileSync(file, script.createCachedData());
    });
  });
}
