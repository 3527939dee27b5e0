import type { Messages } from '../util/io.js';
import type { DatabaseConfig } from './database-config.js';
import type { FleetRun, SharedDatabase } from './shared.js';

// The fleet's database for a run. The dialects' table loads with it: a run without a
// database loads no dialect's code at all.
export async function fleetDatabase(run: FleetRun, db: DatabaseConfig, say: Messages): Promise<SharedDatabase> {
  return (await import('./dialects.js')).dialectOf(db).database(run, db, say);
}
