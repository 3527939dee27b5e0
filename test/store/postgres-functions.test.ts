import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronguard, ROOT } from '../helpers.js';
import { pgSandbox, sql } from '../pg-helpers.js';

// The PostgreSQL functions that run now (admit(), finish(), the schedule readers...) are
// written across many migrations, each replacing the last. src/store/postgres/functions/
// holds each as a freshly migrated schema defines it, one file per function, so that nobody
// reads three migrations to know what runs; this test holds the files to the migrations.
// After a migration that changes a function: CRONGUARD_WRITE_PG_FUNCTIONS=1 rewrites them.
const DIR = join(ROOT, 'src', 'store', 'postgres', 'functions');
const HEAD = '-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).\n';

interface Fn {
  name: string;
  args: string;
  result: string;
  language: string;
  volatility: string;
  config: string[] | null;
  body: string;
}

const VOLATILITY: Record<string, string> = { i: 'IMMUTABLE', s: 'STABLE', v: 'VOLATILE' };

// Each function as a statement that defines it, the schema's name written {{schema}} as the
// migrations write it. Built from the catalog's parts rather than pg_get_functiondef, whose
// layout differs between server versions.
function define(fn: Fn, schema: string): string {
  const unschema = (text: string) => text.replaceAll(`"${schema}"`, '{{schema}}').replaceAll(`${schema}.`, '{{schema}}.');
  const set = (fn.config ?? []).map((c) => {
    const [key, value] = c.split(/=(.*)/s);
    return ` SET ${key} = '${value}'`;
  });
  return `CREATE OR REPLACE FUNCTION {{schema}}.${fn.name}(${unschema(fn.args)}) RETURNS ${unschema(fn.result)} LANGUAGE ${fn.language} ${VOLATILITY[fn.volatility]}${set.join('')} AS $$${unschema(fn.body)}$$;\n`;
}

describe('PostgreSQL functions as files', () => {
  it('are exactly what the migrations define, one file per function', async () => {
    const box = pgSandbox();
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const fns = await sql<Fn>(
      `SELECT p.proname AS name, pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result, l.lanname AS language,
              p.provolatile AS volatility, p.proconfig AS config, p.prosrc AS body
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
        WHERE n.nspname = $1 ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)`,
      [box.schema],
    );
    const files = new Map<string, string>();
    for (const fn of fns) files.set(`${fn.name}.sql`, `${files.get(`${fn.name}.sql`) ?? HEAD}\n${define(fn, box.schema)}`);
    if (process.env.CRONGUARD_WRITE_PG_FUNCTIONS) {
      rmSync(DIR, { recursive: true, force: true });
      mkdirSync(DIR);
      for (const [file, text] of files) writeFileSync(join(DIR, file), text);
    }
    expect(readdirSync(DIR).sort()).toEqual([...files.keys()].sort());
    for (const [file, text] of files) expect(readFileSync(join(DIR, file), 'utf8'), `${file} (CRONGUARD_WRITE_PG_FUNCTIONS=1 rewrites it)`).toBe(text);
  });
});
