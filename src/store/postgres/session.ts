import type pg from 'pg';
import Client from 'pg/lib/client.js';
import { monotonicMs } from '../../util/time.js';
import { answerOf, startHeartbeat } from '../server-watch.js';
import { clientConfig } from './client-config.js';
import type { DbConfig } from './config.js';

// Asks, over the session, whether its lock is still held; returns why not, or null.
export type LockProbe = (ask: <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<R[]>) => Promise<string | null>;

// No statement of cronguard's takes long; one that hangs means the network does.
const QUERY_TIMEOUT_MS = 30_000;
// pg's error for a statement unanswered after it (pg/lib/client.js).
const READ_TIMEOUT = 'Query read timeout';

// Closes a connection at once, saying no goodbye.
function dropConnection(client: pg.Client): void {
  void client.end().catch(() => {});
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

// One dedicated, unpooled connection: a session-level advisory lock lives exactly as long
// as it. Counts statements so --verbose and the bench can report round trips.
export class PgSession {
  roundTrips = 0;
  // The heartbeat's statements, counted apart: one a second for as long as a job holds its
  // lock (see watch), which is most of what a fleet of long jobs sends.
  heartbeats = 0;
  private lostHandlers: ((reason: string) => void)[] = [];
  private lost: string | null = null;
  // The server backend this session's advisory lock was taken on (null: it holds none), and
  // what the heartbeat asks instead of SELECT 1 (see holdsLock); `lockGone`: why the lock is
  // no longer proven held though the connection lives on (the run's outcome still goes out).
  lockBackend: number | null = null;
  // When that backend started (text, see lock.ts): with the pid, it names the backend.
  lockBackendStart: string | null = null;
  // The server backend's pid as announced at the connection (BackendKeyData): a backend
  // started for this session, unless a pooler stands between (it announces one of its own).
  startedBackend: number | null;
  private probe: LockProbe | null = null;
  private lockGone: string | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  // Rejects each statement still waiting for an answer once the session is known lost: a
  // cut network would otherwise hold each one until QUERY_TIMEOUT_MS. One entry per
  // statement, gone when it settles: a promise shared by all of them and never settled
  // would keep every result it was raced against reachable for the session's life.
  private readonly inFlight = new Set<(error: Error) => void>();
  // See answerWithin and answerBy; null: QUERY_TIMEOUT_MS only.
  private answerMs: number | null = null;
  private answerAt: number | null = null;
  // When the server last sent anything: a statement waiting behind others that are being
  // answered is waiting its turn, not facing a server that stopped answering.
  private lastHeard = monotonicMs();

  private constructor(
    private client: pg.Client,
    readonly db: DbConfig,
    // What the server reported at startup (ParameterStatus): server_version, and from
    // PostgreSQL 14 in_hot_standby and default_transaction_read_only (see server-state.ts).
    private reported: ReadonlyMap<string, string>,
  ) {
    this.startedBackend = null;
    this.attach(client);
  }

  get parameters(): ReadonlyMap<string, string> {
    return this.reported;
  }

  // The session's connection from now on. Only its own connection's events count: one it
  // left behind (see adopt) says nothing of the session any more.
  private attach(client: pg.Client): void {
    this.client = client;
    this.startedBackend = (client as unknown as { processID?: number | null }).processID ?? null;
    this.lastHeard = monotonicMs();
    client.on('error', (error) => this.client === client && this.markLost(`connection error: ${error.message}`));
    client.on('end', () => this.client === client && this.markLost('the server closed the connection'));
    (client as unknown as { connection?: { stream?: NodeJS.EventEmitter } }).connection?.stream?.on('data', () => {
      if (this.client === client) this.lastHeard = monotonicMs();
    });
  }

  // A session lost while it held no lock (a waiter's, whose server restarted) takes the
  // connection of `fresh`, a new session to the same database: the store and the lock made on
  // this one carry on over it. One that held a lock is never revived: its lock is gone.
  adopt(fresh: PgSession): void {
    if (!this.lost || this.lockBackend !== null || this.lockGone !== null) throw new Error('only a lost session that held no lock connects again');
    // The connection left behind is dropped: a statement a pooler still held in its queue
    // would otherwise be answered on it later, and a lock it took stay held by nobody.
    dropConnection(this.client);
    this.reported = fresh.reported;
    this.attach(fresh.client);
    this.heartbeat = null;
    this.lost = null;
  }

  // One connection attempt; see connect.ts for TLS fallbacks and retries. An aborted `abort`
  // ends it at once, throwing the abort's reason.
  static async open(db: DbConfig, applicationName: string, tls: boolean, abort?: AbortSignal): Promise<PgSession> {
    const client = new Client({
      ...clientConfig(db.connection, tls),
      application_name: applicationName.slice(0, 63),
      keepAlive: true,
      keepAliveInitialDelayMillis: 1000,
      connectionTimeoutMillis: db.connection.connectTimeoutMs,
      query_timeout: QUERY_TIMEOUT_MS,
    });
    // Errors before the session exists are reported by connect() itself.
    client.on('error', () => {});
    // What the server reports at login: DateStyle (the driver parses timestamps in ISO form
    // only; another one costs a SET, which poolers keep per client, PgBouncer tracking
    // DateStyle, unlike a startup option they refuse) and whether it is a standby.
    const parameters = new Map<string, string>();
    (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) =>
      parameters.set(m.parameterName, m.parameterValue),
    );
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(abort?.reason);
      abort?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      abort?.throwIfAborted();
      await Promise.race([client.connect(), aborted]);
      if (!/^ISO/.test(parameters.get('DateStyle') ?? '')) await Promise.race([client.query('SET datestyle = ISO'), aborted]);
    } catch (error) {
      // No goodbye when aborted: a server that took the connection but never answers (a
      // stopped postmaster) would hold client.end() until connect_timeout, and a signal or
      // the end of a wait (-w) with it.
      if (abort?.aborted) dropConnection(client);
      else await client.end().catch(() => {});
      throw error;
    } finally {
      abort?.removeEventListener('abort', onAbort);
    }
    return new PgSession(client, db, parameters);
  }

  async query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    if (this.lost) throw new Error(`connection lost: ${this.lost}`);
    this.roundTrips++;
    const sent = this.client.query<R>(text, values);
    try {
      return (await answerOf(sent, this.inFlight, this.answerMs, () => this.lastHeard, (reason) => this.markLost(reason), this.answerAt)).rows;
    } catch (error) {
      // A FATAL answer (pg_terminate_backend, a server shutting down) ends the session: it is
      // lost now, not only once the socket closes after it, so the statement's failure is
      // the connection's, not the log's.
      if ((error as { severity?: unknown }).severity === 'FATAL') this.markLost(`connection error: ${(error as Error).message}`);
      // pg gives up on the statement but not on the connection, whose next statements would
      // queue behind it: a waiter (-w) whose statement a pooler held in its queue, with the
      // server hung, would end there, long before its wait; lost, it connects again instead.
      else if ((error as Error).message === READ_TIMEOUT) this.markLost(`no answer in ${QUERY_TIMEOUT_MS / 1000} s`);
      throw error;
    }
  }

  // For the web server: a statement (queued ones included) still unanswered after `ms` in
  // which the server sent nothing means the server or the network stopped answering, and
  // the session is lost at once, rather than each page waiting QUERY_TIMEOUT_MS on a
  // connection that stays stuck. Statements answered in turn meanwhile keep it alive.
  answerWithin(ms: number): void {
    this.answerMs = ms;
  }

  // See SharedSession.
  answerBy(atMs: number | null): void {
    this.answerAt = atMs;
  }

  // NOTIFY on `channel` calls `onNotify` with the payload, from now on. A listening session
  // hears nothing once its connection is gone, and one cut silently would tell only at the
  // next statement's timeout: the heartbeat marks it lost within seconds.
  async listen(channel: string, onNotify: (payload: string) => void): Promise<void> {
    this.client.on('notification', (message) => {
      if (message.channel === channel) onNotify(message.payload ?? '');
    });
    await this.query(`LISTEN ${this.escapeIdentifier(channel)}`);
    this.watch(() => {});
  }

  escapeIdentifier(name: string): string {
    return this.client.escapeIdentifier(name);
  }

  // Starts the heartbeat (server-watch.ts): a session killed by pg_terminate_backend, a
  // server restart or a cut network is noticed within seconds.
  watch(onLost: (reason: string) => void): void {
    this.lostHandlers.push(onLost);
    if (this.lost ?? this.lockGone) onLost((this.lost ?? this.lockGone) as string);
    if (this.heartbeat) return;
    const ask = <R extends pg.QueryResultRow>(text: string, values: unknown[]) => this.client.query<R>(text, values).then((r) => r.rows);
    this.heartbeat = startHeartbeat(
      {
        lastHeard: () => this.lastHeard,
        ask: () => (this.probe ? this.probe(ask) : this.client.query('SELECT 1').then(() => null)),
        lost: (reason) => this.markLost(reason),
        lockGone: (reason) => this.loseLock(reason),
        failed: (error) => `heartbeat failed: ${error.message}`,
      },
      () => this.heartbeats++,
    );
  }

  // The session's advisory lock was taken on server backend `backend`; from now on the
  // heartbeat asks `probe` whether it is still held there (see lock.ts).
  holdsLock(backend: number, backendStart: string | null, probe: LockProbe): void {
    this.lockBackend = backend;
    this.lockBackendStart = backendStart;
    this.probe = probe;
  }

  // The lock is no longer proven held, though the connection answers: its holders hear, the
  // heartbeat stops, and statements still go out (the outcome, the unlock).
  private loseLock(reason: string): void {
    if (this.lost || this.lockGone) return;
    this.lockGone = reason;
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const handler of this.lostHandlers) handler(reason);
  }

  get isLost(): boolean {
    return this.lost !== null;
  }

  get connectionLost(): boolean {
    return this.isLost;
  }

  async close(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.lostHandlers = [];
    // A lost connection on a cut network would keep its socket until the kernel gives up
    // retransmitting (many minutes); there is nothing left to say on it.
    if (this.lost) (this.client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    // Terminate goes out at once; waiting for the server to close the socket would add ~5 ms
    // to every run (more if it stopped answering) for nothing: the work is committed, and
    // the session's locks end with the socket when cronguard exits. So the socket no longer
    // keeps the process alive (the write of Terminate, a pending request, still does).
    void this.client.end().catch(() => {});
    (this.client as unknown as { connection?: { stream?: { unref?(): void } } }).connection?.stream?.unref?.();
  }

  private markLost(reason: string): void {
    if (this.lost) return;
    this.lost = reason;
    for (const reject of this.inFlight) reject(new Error(`connection lost: ${reason}`));
    this.inFlight.clear();
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const handler of this.lostHandlers) handler(reason);
  }
}
