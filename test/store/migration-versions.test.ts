import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MYSQL_MIGRATIONS } from '../../src/store/mysql/migration-files.js';
import { MYSQL_SCHEMA_VERSION } from '../../src/store/mysql/migrations.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migration-files.js';
import { POSTGRES_SCHEMA_VERSION } from '../../src/store/postgres/migrations.js';

// The run path compares a log's version with the constant and loads the texts only to apply
// them: a migration file added without the constant raised would never be applied.
describe('schema versions', () => {
  for (const [dialect, version, texts] of [
    ['postgres', POSTGRES_SCHEMA_VERSION, POSTGRES_MIGRATIONS],
    ['mysql', MYSQL_SCHEMA_VERSION, MYSQL_MIGRATIONS],
  ] as const) {
    it(`${dialect}: the version is the number of migration files, each listed once in order`, () => {
      const files = readdirSync(new URL(`../../src/store/${dialect}/migrations`, import.meta.url)).filter((f) => f.endsWith('.sql'));
      expect(files.map((f) => f.slice(0, 4))).toEqual(files.map((_, i) => String(i + 1).padStart(4, '0')));
      expect(texts).toHaveLength(files.length);
      expect(version).toBe(files.length);
    });
  }
});
