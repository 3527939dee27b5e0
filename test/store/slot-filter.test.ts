import { describe, expect, it } from 'vitest';
import { listRunsParams, listRunsSql as mysqlListRuns } from '../../src/store/mysql/sql-reads.js';
import { listRunsStatement } from '../../src/store/postgres/sql.js';
import { listRunsSql as sqliteListRuns } from '../../src/store/sqlite/sql.js';

// history --slot N in each dialect's read: a parameter, never the number in the text, and a
// run from before slots (NULL) read as slot 0. The server dialects' end-to-end cases need
// their slot columns (their migrations); SQLite's run in test/commands/history-slots.test.ts.
describe('RunFilter.slot in each dialect', () => {
  it('PostgreSQL: coalesce(slot, 0) = a named parameter', () => {
    const statement = listRunsStatement('"cg"', { jobs: ['report'], slot: 7, limit: 20 });
    expect(statement.text).toMatch(/WHERE job = ANY\(\$1::text\[\]\) AND coalesce\(slot, 0\) = \$2 ORDER BY/);
    expect(statement.names).toEqual(['jobs', 'slot', 'limit']);
    expect(statement.text).not.toMatch(/\b7\b/);
    expect(listRunsStatement('"cg"', { limit: 20 }).names).not.toContain('slot');
  });

  it('MySQL: COALESCE(slot, 0) = ?, its value in the order of the marks', () => {
    const filter = { jobs: ['report'], host: 'web1', slot: 0, limit: 20 };
    expect(mysqlListRuns('`cg`', filter)).toMatch(/WHERE job IN \(\?\) AND host = \? AND COALESCE\(slot, 0\) = \? ORDER BY/);
    expect(listRunsParams(filter)).toEqual(['report', 'web1', 0, 20]);
    expect(mysqlListRuns('`cg`', { limit: 20 })).not.toMatch(/coalesce\(slot/i);
  });

  it('SQLite: coalesce(slot, 0) = @slot', () => {
    expect(sqliteListRuns({ slot: 3, limit: 20 })).toMatch(/WHERE coalesce\(slot, 0\) = @slot ORDER BY/);
    expect(sqliteListRuns({ limit: 20 })).not.toMatch(/slot =/);
  });
});
