import { named } from './named-params.js';

// The PostgreSQL statements about the run log's schema itself, beside the run log's own
// (sql.ts): what a session may do with it, and what `migrate --group` grants.

// What this session may do with schema :schema, asked in one statement that cannot fail
// whatever the schema's state (missing, half made, not ours): a statement that names a
// missing schema or table, or one the role may not use, fails, and the server logs an ERROR
// for it, which DBAs alert on. The CASE keeps to_regclass away from a schema the role may
// not use (it would fail there).
export const SCHEMA_STATE = named(`SELECT n.oid IS NOT NULL AS present,
         coalesce(has_schema_privilege(n.oid, 'USAGE'), false) AS usable,
         coalesce(pg_has_role(n.nspowner, 'USAGE'), false) AS owner,
         has_database_privilege(current_database(), 'CREATE') AS may_create,
         coalesce(CASE WHEN has_schema_privilege(n.oid, 'USAGE')
                       THEN has_table_privilege(to_regclass(format('%I.schema_migrations', n.nspname)), 'SELECT') END, false) AS versioned,
         coalesce(CASE WHEN has_schema_privilege(n.oid, 'USAGE')
                       THEN has_table_privilege(to_regclass(format('%I.runs', n.nspname)), 'DELETE')
                        AND has_table_privilege(to_regclass(format('%I.requests', n.nspname)), 'DELETE') END, false) AS may_delete
  FROM (VALUES (1)) AS one LEFT JOIN pg_namespace n ON n.nspname = :schema`);

// `migrate --group ROLE`: what a web application's role needs to queue requests (request()
// or INSERT), cancel one, and follow them and their runs; it reads the log as a dashboard
// does, now and after upgrades (tables later migrations add). R is the quoted role.
export function grantRequests(S: string, R: string): string[] {
  return [
    `GRANT USAGE ON SCHEMA ${S} TO ${R}`,
    `GRANT SELECT ON ALL TABLES IN SCHEMA ${S} TO ${R}`,
    `ALTER DEFAULT PRIVILEGES IN SCHEMA ${S} GRANT SELECT ON TABLES TO ${R}`,
    `GRANT INSERT, UPDATE (status, finished_at) ON ${S}.requests TO ${R}`,
    `GRANT USAGE ON SEQUENCE ${S}.requests_id_seq TO ${R}`,
    // Schedules (set_schedule(), or the plain statement): a job's schedule, not its command.
    `GRANT INSERT (name, schedule), UPDATE (schedule) ON ${S}.jobs TO ${R}`,
  ];
}
