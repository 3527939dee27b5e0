import type { Setting } from '../util/setting.js';
import type { MysqlConfig } from './mysql/config.js';
import { isMysqlUrl, resolveMysql } from './mysql/url.js';
import { type DbConfig, resolveDb } from './postgres/config.js';

// The fleet's database as configured: its `dialect` tells which (no consumer needs instanceof).
export type DatabaseConfig = DbConfig | MysqlConfig;

// Only an explicit URL (--db, $CRONGUARD_DATABASE_URL or the configuration file) turns the
// shared mode on. mysql:// and mariadb:// name MySQL; anything else is a libpq connection
// string (a postgres:// URI or keyword=value pairs).
export function resolveDatabase(url: Setting | undefined, schema: Setting | undefined, env: Readonly<Record<string, string | undefined>>): DatabaseConfig | null {
  if (url === undefined) return null;
  return isMysqlUrl(url.value) ? resolveMysql(url, schema, env) : resolveDb(url, schema, env);
}
