import { UnavailableError } from '../../errors.js';
import type { TargetSessionAttrs } from './config.js';
import type { PgSession } from './session.js';

// Whether a server is a standby (in recovery) and whether its sessions are read-only, as
// libpq's target_session_attrs looks at them; `reported`: as the server (or a pooler) said at
// login, not asked.
export interface ServerState {
  readonly standby: boolean;
  readonly readOnly: boolean;
  readonly reported?: boolean;
}

// From PostgreSQL 14 the server reports both at startup (ParameterStatus in_hot_standby and
// default_transaction_read_only), so knowing costs no round trip; an older server (or a
// pooler that does not pass them on) is asked, once. A pooler passes on what its first server
// login reported, which a promotion or a demotion in place since has made wrong: what was
// reported is hearsay when it decides (see askedState).
export async function serverState(session: PgSession): Promise<ServerState> {
  const standby = session.parameters.get('in_hot_standby');
  const readOnly = session.parameters.get('default_transaction_read_only');
  if (standby !== undefined && readOnly !== undefined) return { standby: standby === 'on', readOnly: readOnly === 'on' || standby === 'on', reported: true };
  return askedState(session);
}

// What the server itself answers now: one statement.
export async function askedState(session: PgSession): Promise<ServerState> {
  const [row] = await session.query<{ standby: boolean; read_only: boolean }>(
    `SELECT pg_catalog.pg_is_in_recovery() AS standby, pg_catalog.current_setting('transaction_read_only') = 'on' AS read_only`,
  );
  return { standby: row?.standby === true, readOnly: row?.read_only === true || row?.standby === true };
}

// Whether a session on a server in this state may be kept, as libpq decides it.
// prefer-standby takes a standby here; connect() falls back to any server when none is.
export function accepts(attrs: TargetSessionAttrs, state: ServerState): boolean {
  switch (attrs) {
    case 'any':
      return true;
    case 'read-write':
      return !state.readOnly;
    case 'read-only':
      return state.readOnly;
    case 'primary':
      return !state.standby;
    case 'standby':
    case 'prefer-standby':
      return state.standby;
  }
}

// A run's locks and records belong on the primary: an advisory lock taken on a standby exists
// only there, beside the primary's run of the same job. One line, 69.
export function standbyRefusal(where: string): UnavailableError {
  return new UnavailableError(
    `PostgreSQL at ${where} is a read-only standby (in recovery): point the URL at the primary, or list the hosts with target_session_attrs=read-write`,
  );
}

// What a server is, in the words of a refusal.
export function describeState(state: ServerState): string {
  if (state.standby) return 'a read-only standby (in recovery)';
  return state.readOnly ? 'read-only (default_transaction_read_only is on)' : 'a writable primary';
}
