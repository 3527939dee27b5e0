import type { Connection, ResultSetHeader } from 'mysql2/promise';
import { monotonicMs } from '../../util/time.js';
import { answerOf, startHeartbeat } from '../server-watch.js';
import type { MysqlConfig } from './config.js';
import { isRetryableTransaction, lostReason } from './errors.js';
import { LockProof } from './lock-proof.js';
import type { Answer, Changed, MysqlLockProbe, MysqlSession, Statement } from './session.js';

// No statement of cronguard's takes long; one that hangs means the network does.
const QUERY_TIMEOUT_MS = 30_000;
// A deadlock (1213) or a lock wait timeout (1205) rolls the transaction back: it is tried
// again this many times in all.
const TRANSACTION_TRIES = 4;

// The session over one connection of the driver's (connectMysql opens it, connect.ts; its interface is session.ts).
export class Session implements MysqlSession {
  roundTrips = 0;
  // The heartbeat's statements, counted apart (see SharedSession).
  heartbeats = 0;
  lost: string | null = null;
  connectionId: number;
  private lostHandlers: ((reason: string) => void)[] = [];
  private lockGone: string | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly proof = new LockProof();
  // Rejects each statement still waiting once the session is known lost: a cut network
  // would otherwise hold it until QUERY_TIMEOUT_MS. One entry per statement, gone when it
  // settles, so nothing keeps a settled result reachable.
  private readonly inFlight = new Set<(error: Error) => void>();
  private inTransaction = false;
  // Settles when the transaction under way ends (see outside).
  private transactionEnd: Promise<void> = Promise.resolve();
  private endTransaction = () => {};
  private answerMs: number | null = null;
  private answerAt: number | null = null;
  // When the server last sent anything: a statement waiting behind others that are being
  // answered is waiting its turn, not facing a server that stopped answering.
  private lastHeard = monotonicMs();

  constructor(
    private connection: Connection,
    readonly config: MysqlConfig,
    public maxPacketBytes: number,
  ) {
    this.connectionId = connection.threadId;
    this.attach(connection);
  }

  // The session's connection from now on. Only its own connection's events count: one it
  // left behind (see adopt) says nothing of the session any more.
  private attach(connection: Connection): void {
    this.connection = connection;
    this.connectionId = connection.threadId;
    this.lastHeard = monotonicMs();
    connection.on('error', (error: Error) => this.connection === connection && this.markLost(`connection error: ${error.message}`));
    connection.on('end', () => this.connection === connection && this.markLost('the server closed the connection'));
    (connection as unknown as { connection?: { stream?: NodeJS.EventEmitter } }).connection?.stream?.on('data', () => {
      if (this.connection === connection) this.lastHeard = monotonicMs();
    });
  }

  // A session lost while it held no lock (a waiter's, whose server restarted) takes the
  // connection of `fresh`, a new session to the same server: the store and the lock made on
  // this one carry on over it. One that held a lock is never revived: its lock is gone.
  adopt(fresh: MysqlSession): void {
    if (!this.lost || this.proof.held || this.lockGone !== null || this.inTransaction) throw new Error('only a lost session that held no lock connects again');
    const other = fresh as Session;
    // The connection left behind is dropped: a GET_LOCK a proxy still held would otherwise
    // be answered on it later, and the lock stay held by nobody.
    this.connection.destroy();
    this.maxPacketBytes = other.maxPacketBytes;
    this.attach(other.connection);
    this.lost = null;
  }

  get connectionLost(): boolean {
    return this.lost !== null && this.lost !== 'closed';
  }

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    const [rows] = await this.send(sql, params);
    return rows as R[];
  }

  async execute(sql: string, params: readonly unknown[] = []): Promise<Changed> {
    const [header] = await this.send(sql, params);
    const { affectedRows, insertId } = header as ResultSetHeader;
    return { affectedRows, insertId };
  }

  // The statements in one packet (the connection allows several: connect.ts), one round
  // trip; the server stops at the first that fails, and the whole batch fails with it.
  async batch(statements: readonly Statement[]): Promise<Answer[]> {
    if (statements.length === 0) return [];
    const sql = statements.map(([text]) => text).join(';\n');
    const [result] = await this.send(sql, statements.flatMap(([, params]) => params));
    // One statement's result comes alone, several as a list of them.
    const results = statements.length === 1 ? [result] : (result as unknown[]);
    return results.map((r) => {
      if (Array.isArray(r)) return { rows: r, affectedRows: 0, insertId: 0 };
      const { affectedRows, insertId } = r as ResultSetHeader;
      return { rows: [], affectedRows, insertId };
    });
  }

  // A transaction whose BEGIN and COMMIT `fn` sends inside its batches (the first and the
  // last): a failure rolls back, and a deadlock or lock wait timeout runs `fn` again (its
  // `attempt`, from 1). `fn` sends everything through this session.
  async batchedTransaction<T>(fn: (attempt: number) => Promise<T>): Promise<T> {
    if (this.inTransaction) throw new Error('a batched transaction cannot be nested');
    for (let attempt = 1; ; attempt++) {
      this.inTransaction = true;
      this.transactionEnd = new Promise((resolve) => (this.endTransaction = resolve));
      try {
        return await fn(attempt);
      } catch (error) {
        // Harmless after the COMMIT went through: there is nothing left to roll back.
        if (!this.lost) await this.send('ROLLBACK', []).catch(() => {});
        if (this.lost || attempt >= TRANSACTION_TRIES || !isRetryableTransaction(error)) throw error;
      } finally {
        this.inTransaction = false;
        this.endTransaction();
      }
    }
  }

  // BEGIN, `fn`, COMMIT; a deadlock or lock wait timeout rolls back and tries again. `fn`
  // must send everything through the session it is given, and may be run more than once.
  async transaction<T>(fn: (session: MysqlSession) => Promise<T>): Promise<T> {
    if (this.inTransaction) return fn(this);
    return this.batchedTransaction(async () => {
      await this.send('BEGIN', []);
      const result = await fn(this);
      await this.send('COMMIT', []);
      return result;
    });
  }

  // `fn`'s first statement sent outside any transaction of this session: after the one under
  // way ends, and before another can begin (`fn` sends it at once, synchronously). A lease's
  // renewal inside another's transaction would be undone with it by a rollback.
  async outside<T>(fn: () => Promise<T>): Promise<T> {
    while (this.inTransaction) await this.transactionEnd;
    return fn();
  }

  private async send(sql: string, params: readonly unknown[]): Promise<[unknown, unknown]> {
    if (this.lost) throw new Error(`connection lost: ${this.lost}`);
    this.roundTrips++;
    try {
      const sent = this.connection.query({ sql, timeout: QUERY_TIMEOUT_MS }, params as unknown[]);
      return await answerOf(sent, this.inFlight, this.answerMs, () => this.lastHeard, (reason) => this.markLost(reason), this.answerAt);
    } catch (error) {
      // The driver's word for an error after which the connection is gone (a packet too large,
      // a timeout, the socket closed): the session is lost, so its store is opened again.
      if ((error as { fatal?: unknown }).fatal === true || /closed state/.test((error as Error).message)) this.markLost(lostReason(error as Error, 'the connection failed'));
      throw error;
    }
  }

  answerWithin(ms: number): void {
    this.answerMs = ms;
  }

  // See SharedSession.
  answerBy(atMs: number | null): void {
    this.answerAt = atMs;
  }

  // Starts the heartbeat (server-watch.ts): a connection killed (KILL), a server restart or
  // a cut network is noticed within seconds; with a probe (holdsLock), so is a lock that is
  // no longer this session's.
  watch(onLost: (reason: string) => void): void {
    this.lostHandlers.push(onLost);
    if (this.lost ?? this.lockGone) onLost((this.lost ?? this.lockGone) as string);
    if (this.heartbeat) return;
    this.heartbeat = startHeartbeat(
      {
        lastHeard: () => this.lastHeard,
        ask: () => this.proof.ask(this.ask),
        lost: (reason) => this.markLost(reason),
        lockGone: (reason) => this.loseLock(reason),
        failed: (error) => lostReason(error, 'heartbeat failed'),
      },
      () => this.heartbeats++,
    );
  }

  // From now on the heartbeat asks `probe` whether the session still holds its lock (taken
  // just now: the first beat counts from here).
  holdsLock(probe: MysqlLockProbe): void {
    this.proof.hold(probe);
  }

  // Asks now whether the lock is still this session's (as the heartbeat does): before a
  // command starts after cronguard could not beat for a while (stopped, starved), when the
  // server may have ended the silent session (wait_timeout) and freed the name.
  async confirmLock(): Promise<void> {
    if (!this.proof.held || this.lost || this.lockGone) return;
    const gone = await this.proof.ask(this.ask).catch((error: Error) => lostReason(error, 'heartbeat failed'));
    if (gone) this.loseLock(gone);
  }

  sinceBeatMs(): number {
    return this.proof.sinceMs();
  }

  onBeat(beat: () => void): () => void {
    return this.proof.onBeat(beat);
  }

  longestSilenceMs(): number {
    return this.proof.longestSilenceMs();
  }

  resetSilence(): void {
    this.proof.resetSilence();
  }

  giveUpLock(reason: string): void {
    this.loseLock(reason);
  }

  // A heartbeat's question, straight on the connection (not counted as the run's statement).
  private readonly ask = async <R>(sql: string, params: readonly unknown[]): Promise<R[]> =>
    (await this.connection.query(sql, params as unknown[]))[0] as R[];

  // The lock is no longer proven held, though the connection answers: its holders hear, the
  // heartbeat stops, and statements still go out (the outcome).
  private loseLock(reason: string): void {
    if (this.lost || this.lockGone) return;
    this.lockGone = reason;
    this.stopHeartbeat();
    for (const handler of this.lostHandlers) handler(reason);
  }

  // COM_QUIT goes out and the socket closes; the server frees the session's locks with it.
  // Nothing is awaited: the work is committed, and waiting would only add to every run.
  async close(): Promise<void> {
    this.stopHeartbeat();
    this.lostHandlers = [];
    if (this.lost) return this.destroy();
    this.lost = 'closed';
    void this.connection.end().catch(() => this.connection.destroy());
  }

  // Drops the socket at once (a lost or cut connection has nothing left to say).
  destroy(): void {
    this.stopHeartbeat();
    this.lost ??= 'closed';
    this.connection.destroy();
  }

  private stopHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  private markLost(reason: string): void {
    if (this.lost) return;
    this.lost = reason;
    for (const reject of this.inFlight) reject(new Error(`connection lost: ${reason}`));
    this.inFlight.clear();
    this.stopHeartbeat();
    for (const handler of this.lostHandlers) handler(reason);
  }
}
