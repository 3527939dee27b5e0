// Bundles src/ into dist/ with esbuild. Native addons (fs-ext, better-sqlite3) stay outside
// the bundle and load from node_modules; subcommands become lazily loaded chunks.
import { readFileSync } from 'node:fs';
import { build } from 'esbuild';

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

await build({
  entryPoints: { cronguard: 'src/main.ts' },
  outdir: 'dist',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  external: ['fs-ext', 'better-sqlite3'],
  loader: { '.sql': 'text' },
  define: { CRONGUARD_VERSION: JSON.stringify(version) },
  // Bundled CommonJS dependencies call require(); ESM output has none of its own.
  banner: { js: "import { createRequire as __cgRequire } from 'node:module'; const require = __cgRequire(import.meta.url);" },
  legalComments: 'none',
  logLevel: 'warning',
});
