import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UnavailableError } from '../errors.js';

// cronguard's native addons (fs-ext, better-sqlite3), found by the path of their compiled
// file. Resolving the package instead (a walk up the node_modules folders, its package.json,
// its JavaScript wrapper compiled without the code cache) and computing paths through file
// URLs cost over a millisecond of every start, four times the loading of the addon itself.
// The bundle (dist/lib/) and the sources (src/<dir>/) both sit two folders below the folder
// that holds node_modules, as installed and as checked out; anywhere else, Node's resolution
// finds the file as usual. (The build defines import.meta.dirname as the bundle's __dirname.)
export function addonFile(pkg: string, file: string): string {
  // import.meta.dirname: Node 20.11 and later, and the bundle's __dirname.
  const here = import.meta.dirname ?? dirname(fileURLToPath(import.meta.url));
  const near = join(here, '..', '..', 'node_modules', pkg, file);
  return existsSync(near) ? near : createRequire(import.meta.url).resolve(`${pkg}/${file}`);
}

const loaded = new Map<string, unknown>();

// The addon's exports, loaded once per process. One built for another Node.js (installed
// with one node, run with another: nvm, a distribution upgrade) cannot load; that is the
// installation's fault, said in one line with its cure, not a crash.
export function loadAddon<T>(pkg: string, file: string): T {
  const path = addonFile(pkg, file);
  if (!loaded.has(path)) {
    const module = { exports: {} };
    try {
      process.dlopen(module, path);
    } catch (error) {
      const built = /NODE_MODULE_VERSION (\d+)\./.exec((error as Error).message)?.[1];
      if (built === undefined) throw error;
      throw new UnavailableError(
        `the native addon ${pkg} was built for another Node.js (module version ${built}; ${process.execPath} ${process.version} needs ${process.versions.modules}): reinstall cronguard for the node that runs it`,
      );
    }
    loaded.set(path, module.exports);
  }
  return loaded.get(path) as T;
}
