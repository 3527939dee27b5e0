import { describe, expect, it } from 'vitest';
import { resolveDb } from '../../src/pg/config.js';
import { connectPostgres, openPostgresStore, openSqliteStore, type RunStore } from '../../src/store/index.js';
import { openSharedStore, resolveDatabase } from '../../src/store/shared.js';
import { mysqlUrl } from '../mysql-helpers.js';
import { databaseUrl } from '../pg-helpers.js';
import { STORES, type StoreKind, storeBox } from '../stores.js';

async function openStore(kind: StoreKind, box: ReturnType<typeof storeBox>): Promise<RunStore> {
  if (kind === 'sqlite') return openSqliteStore(box.stateDir);
  const schema = box.env.CRONGUARD_SCHEMA as string;
  if (kind === 'mysql') {
    const db = resolveDatabase({ value: mysqlUrl(), from: 'test' }, { value: schema, from: 'test' }, {});
    return openSharedStore(db as NonNullable<typeof db>, 'test', true);
  }
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, { value: schema, from: 'test' }, {}) as NonNullable<ReturnType<typeof resolveDb>>;
  return openPostgresStore(await connectPostgres(db, 'test'), schema);
}

// markAlert is the compare-and-set behind --notify: of invocations that record the same
// change at once (hosts of a fleet, each with its own connection), exactly one moves it.
describe.each(STORES)('the alert state (%s)', (kind) => {
  it('moves once per change, however many connections try at once; a job without a row gets one', async () => {
    const box = storeBox(kind);
    const job = box.job('alerted');
    const first = await openStore(kind, box);
    await first.migrate();
    const stores = [first, ...(await Promise.all(Array.from({ length: 7 }, () => openStore(kind, box))))];
    try {
      const moved = (results: boolean[]) => results.filter(Boolean).length;
      // A success while nothing failed moves nothing.
      expect(await first.markAlert(job, false)).toBe(false);
      expect(moved(await Promise.all(stores.map((s) => s.markAlert(job, true))))).toBe(1);
      expect(await first.markAlert(job, true)).toBe(false);
      expect(moved(await Promise.all(stores.map((s) => s.markAlert(job, false))))).toBe(1);
      expect(await first.markAlert(job, false)).toBe(false);
      expect(await first.markAlert(job, true)).toBe(true);
      expect((await first.jobStatus(job)).map((s) => s.job)).toEqual([job]);
    } finally {
      for (const store of stores) await store.close();
    }
  });
});
