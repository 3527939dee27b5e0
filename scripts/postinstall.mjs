// The npm package's postinstall (and a clone's `npm ci`), run by the node that installs it.
// Both native addons must load in that node: built against another Node's headers (npm's
// nodedir set for another version, common where Debian's nodejs and a second Node
// coexist), every run would exit 69 while npm reported success. So the install fails here,
// with one line naming the cause and the fix; then the code cache is trained (train.mjs).
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { trainForInstall } from './train.mjs';

// As the bundle finds them (src/util/addon.ts): beside the package, else by resolution.
const ADDONS = [
  ['fs-ext', 'build/Release/fs_ext.node'],
  ['better-sqlite3', 'build/Release/better_sqlite3.node'],
];

// The line that says why `pkg` does not load in this node and what to do; null when it loads.
export function addonProblem(root, pkg, file, env = process.env) {
  const near = join(root, 'node_modules', pkg, file);
  let path;
  try {
    path = existsSync(near) ? near : createRequire(join(root, 'package.json')).resolve(`${pkg}/${file}`);
    process.dlopen({ exports: {} }, path);
    return null;
  } catch (error) {
    const message = String(error?.message ?? error);
    const built = /NODE_MODULE_VERSION (\d+)\./.exec(message)?.[1];
    const cause = built
      ? `the native addon ${pkg} was built for another Node.js (module version ${built}; ${process.execPath} ${process.version} needs ${process.versions.modules})`
      : `the native addon ${pkg} does not load in ${process.execPath} ${process.version} (${message.split('\n')[0]})`;
    return `cronguard: ${cause}${fix(root, env)}`;
  }
}

// npm builds addons against its nodedir's headers when one is set; this node's own headers
// sit beside it in a release tarball (bin/node, include/node/node.h).
function fix(root, env) {
  const own = dirname(dirname(process.execPath));
  const ownHeaders = existsSync(join(own, 'include', 'node', 'node.h'));
  const clone = existsSync(join(root, 'src'));
  const again = clone ? 'npm rebuild better-sqlite3 fs-ext' : 'install cronguard again';
  const nodedir = env.npm_config_nodedir;
  const version = nodedir ? headersVersion(nodedir) : null;
  if (nodedir && version?.split('.')[0] !== process.versions.node.split('.')[0]) {
    const holds = version ? `holds Node.js ${version}'s headers` : 'holds no Node.js headers';
    const cure = ownHeaders ? `with --nodedir=${own} (this node's headers) or with nodedir unset (npm config delete nodedir)` : 'with nodedir unset (npm config delete nodedir), so that this node\'s headers are fetched';
    return `; npm's nodedir (${nodedir}) ${holds}: ${again} ${cure}`;
  }
  return `: ${again} with this node (${process.execPath}), with python3, make and a C++ compiler`;
}

function headersVersion(nodedir) {
  try {
    const header = readFileSync(join(nodedir, 'include', 'node', 'node_version.h'), 'utf8');
    const part = (name) => new RegExp(`#define NODE_${name}_VERSION (\\d+)`).exec(header)?.[1];
    return [part('MAJOR'), part('MINOR'), part('PATCH')].every(Boolean) ? `${part('MAJOR')}.${part('MINOR')}.${part('PATCH')}` : null;
  } catch {
    return null;
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  for (const [pkg, file] of ADDONS) {
    const problem = addonProblem(root, pkg, file);
    if (problem) {
      process.stderr.write(`${problem}\n`);
      process.exit(1);
    }
  }
  await trainForInstall(join(root, 'dist'));
}
