import { UnavailableError } from '../../errors.js';

// SQLSTATE 53300 (too_many_connections) is one code for three limits, told apart only by the
// server's message; each has its own fix, so the one line cronguard ends with names it.
// Each running or waiting job holds one connection (see docs/fleet-postgres.md's "Connections a fleet
// costs").
export function noFreeSlot(message: string, where: string, retries: number): UnavailableError {
  const role = /too many connections for role "(.*)"/.exec(message)?.[1];
  const database = /too many connections for database "(.*)"/.exec(message)?.[1];
  const limit = role
    ? `role ${role} is at its CONNECTION LIMIT: one connection per running or waiting job; raise it (ALTER ROLE ${role} CONNECTION LIMIT n) or start fewer jobs at once`
    : database
      ? `database ${database} is at its CONNECTION LIMIT: raise it (ALTER DATABASE ${database} CONNECTION LIMIT n) or start fewer jobs at once`
      : `the server is full (max_connections, less its reserved slots): give cronguard's role a CONNECTION LIMIT below it so jobs cannot take the application's slots, or raise max_connections`;
  const tried = retries > 0 ? ` (retried ${retries} times)` : '';
  return new UnavailableError(`PostgreSQL at ${where} refused the connection: ${limit}${tried}`);
}
