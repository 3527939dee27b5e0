import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { connectPostgres } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import { databaseUrl } from '../pg-helpers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

// A long-lived session (`serve`, an --every/--for loop) runs statements for hours: what it
// keeps must not grow with them. Each statement here returns 64 KiB; 3,000 of them kept
// would be 190 MiB.
it('keeps no statement result once it is answered, however many a session runs', async () => {
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, undefined, {});
  if (!db) throw new Error('no database');
  const session = await connectPostgres(db, 'cronguard:session-memory');
  try {
    for (let i = 0; i < 200; i++) await session.query("SELECT repeat('x', 65536) AS big");
    const before = heapAfterGc();
    for (let i = 0; i < 3000; i++) await session.query("SELECT repeat('x', 65536) AS big, $1::int AS n", [i]);
    const grown = heapAfterGc() - before;
    expect(grown).toBeLessThan(32 * 1024 * 1024);
  } finally {
    await session.close();
  }
});
