// Bundles src/ into one CommonJS file, dist/cronguard.cjs. Native addons (fs-ext,
// better-sqlite3) stay outside and load from node_modules. CommonJS rather than ESM output
// because Node's ESM loader costs measurably more at start-up, and start-up is most of
// what cronguard costs a cron job; subcommand code is bundled in but only evaluated when
// that subcommand runs.
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

// pg decides at load time whether it runs on Cloudflare Workers by touching the global
// `Response`, which on Node 20 loads the whole fetch implementation: about 30 ms of every
// PostgreSQL run. cronguard only runs on Node, so the bundle takes Node's streams directly.
const pgNodeStreams = {
  name: 'pg-node-streams',
  setup(b) {
    b.onLoad({ filter: /[\\/]pg[\\/]lib[\\/]stream\.js$/ }, ({ path }) => {
      const source = readFileSync(path, 'utf8');
      const patched = source.replace('= getStreamFuncs()', '= getNodejsStreamFuncs()');
      if (patched === source) throw new Error('pg/lib/stream.js changed: revisit the pg-node-streams patch');
      return { contents: patched, loader: 'js' };
    });
  },
};

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

// Shared with the scale bench (test/bench/scale.ts), which bundles the stores the same way.
export const bundleOptions = {
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external: ['fs-ext', '*.node', 'pg-native'],
  loader: { '.sql': 'text' },
  define: { CRONGUARD_VERSION: JSON.stringify(version), 'import.meta.url': '__cronguardUrl' },
  banner: { js: "var __cronguardUrl = require('node:url').pathToFileURL(__filename).href;" },
  plugins: [pgNodeStreams],
  legalComments: 'none',
  logLevel: 'warning',
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
  await build({ ...bundleOptions, entryPoints: ['src/main.ts'], outfile: 'dist/cronguard.cjs' });
}
