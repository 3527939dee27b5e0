// pgpass ships no types; this is the part cronguard uses.
declare module 'pgpass' {
  import type { Writable } from 'node:stream';

  interface ConnInfo {
    host: string;
    port: number;
    database: string;
    user: string;
  }
  function pgpass(connInfo: ConnInfo, callback: (password: string | undefined) => void): void;
  namespace pgpass {
    function warnTo(stream: Writable): Writable;
  }
  export default pgpass;
}
