import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { basename, join } from 'node:path';
import { Script } from 'node:vm';

// A V8 code cache for cronguard's own bundle files: start-up is paid on every tick of every
// job, and compiling the bundle was its largest part. Node 20 has no compile cache of its
// own (22's module.enableCompileCache writes at run time, which a cron job of another user
// cannot), so cronguard keeps one: produced by a training run at build and install time
// (train.ts), read by every run, and tied to the exact file (size and modification time)
// and Node build, so a stale cache is never used. V8 itself rejects one it cannot use.

interface Internals {
  _nodeModulePaths(dir: string): string[];
  _resolveFilename(request: string, module: Module, main: boolean, options?: unknown): string;
  _cache: NodeJS.Require['cache'];
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

// The files of lib/ require each other by their own name ("./x.cjs", scripts/build.mjs); such
// a request is answered from lib/ directly. Node's resolution of it (a path normalised, the
// file stat'ed and its real path taken, a package.json looked for) cost every run about as
// much as compiling a small file from its cache. Anything else (node:, fs-ext) goes to Node.
const LIB_FILE = /^\.\/[\w-]+\.cjs$/;

// Loads the .cjs files of `libDir` itself, each compiled through vm.Script with its cached
// data; with `produce`, writes each file's cache (with all the functions compiled so far)
// at exit. Returns main.cjs's exports.
export function runFromCodeCache(libDir: string, cacheDir: string, produce: boolean): unknown {
  const compiled: [string | null, Script][] = [];
  // How each file was compiled, for -v (main.ts reads it).
  const tally = { used: 0, rejected: 0, missing: 0 };
  (globalThis as Record<symbol, unknown>)[Symbol.for('cronguard.codeCache')] = tally;
  const modules = new Map<string, Module>();
  // The same for every file: they share a folder.
  const paths = internals._nodeModulePaths(libDir);

  const load = (name: string): unknown => {
    const filename = join(libDir, name);
    const known = modules.get(filename);
    if (known) return known.exports;
    const module = new Module(filename);
    module.filename = filename;
    module.paths = paths;
    modules.set(filename, module);
    const file = cacheFile(cacheDir, filename);
    // A training run starts from what the runs before it wrote, so that a file several runs
    // load (main.cjs, the fleet's resolving, the statement gate) keeps what each compiled.
    const cachedData = readCache(file);
    // Written wrapped as CommonJS wraps a module (scripts/build.mjs wrapLib), and in ASCII,
    // so that it is read into a one-byte string.
    const script = new Script(readFileSync(filename, 'latin1'), { filename, cachedData });
    if (produce) compiled.push([file, script]);
    else tally[cachedData === undefined ? 'missing' : script.cachedDataRejected ? 'rejected' : 'used']++;
    const wrapper = script.runInThisContext({ displayErrors: true }) as (...args: unknown[]) => void;
    wrapper.call(module.exports, module.exports, requireOf(module), module, filename, libDir);
    module.loaded = true;
    return module.exports;
  };

  // What CommonJS hands a module as `require` (Module.createRequire would compute its search
  // paths again, on every file).
  const requireOf = (module: Module): NodeJS.Require => {
    const require = ((id: string) => (LIB_FILE.test(id) ? load(id.slice(2)) : module.require(id))) as NodeJS.Require;
    require.resolve = ((request: string, options?: { paths?: string[] }) => internals._resolveFilename(request, module, false, options)) as NodeJS.RequireResolve;
    require.cache = internals._cache;
    return require;
  };

  if (produce) {
    process.once('exit', () => {
      // The files this run did not need are compiled too (their top level only): a run with
      // another configuration (PostgreSQL, pings) or a subcommand still skips parsing them.
      // Such a file keeps the cache an earlier training run that used it wrote.
      const used = compiled.length;
      for (const file of readdirSync(libDir)) if (file.endsWith('.cjs')) load(file);
      mkdirSync(cacheDir, { recursive: true });
      compiled.forEach(([file, script], i) => {
        if (file && (i < used || !existsSync(file))) writeFileSync(file, script.createCachedData());
      });
    });
  }
  return load('main.cjs');
}
