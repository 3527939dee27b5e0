// pg's Client on its own (pg/lib/client.js): the package's index also loads its Pool, its
// native binding's loader and type registry, none of which cronguard uses, on every
// PostgreSQL run.
declare module 'pg/lib/client.js' {
  import type pg from 'pg';

  const Client: typeof pg.Client;
  export default Client;
}
