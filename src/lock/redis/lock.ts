import { hostname } from 'node:os';
import { PermissionError, UnavailableError, UsageError } from '../../errors.js';
import type { Messages } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';
import { type LockBackend, retryUntil } from '../backend.js';
import { holdLease, type LeaseLine } from '../lease.js';
import { type LeaseStore, leaseLine } from '../lease-line.js';
import type { LockSpec } from '../lock-spec.js';
import { ConnectionError, connectRedis, type Reply, ReplyError, type RespConnection } from './resp.js';
import { keysOf } from './target.js';

// -l redis: a lease on a Redis (or Valkey) key, held as -l lease holds its row (lock/lease.ts:
// renewed every third of the ttl, the command stopped with 75 when renewals stop finding it
// this holder's for 0.6 of the ttl, CRONGUARD_FENCING_TOKEN), taken first and the run log
// asked after, as a lock of this machine is (run/gate/local.ts).
//
// The key's value is "<token> <host> <pid>": every script that renews or releases it first
// checks that it is still exactly this holder's. The token comes from the job's counter, which
// only grows and never falls below the server's clock in milliseconds, so that a counter lost
// with the data (FLUSHALL, a restart without persistence, a replica promoted before the last
// INCR reached it) still hands out tokens greater than any given before.

// KEYS: lock, fence; ARGV: holder ("<host> <pid>"), ttl ms. {1, token} when taken, {0, value}
// when someone holds it (another cronguard's "<token> <host> <pid>", or an application's).
const TAKE = `local held = redis.call('GET', KEYS[1])
if held then return {0, held} end
local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = redis.call('INCR', KEYS[2])
if token < floor then
  token = floor
  redis.call('SET', KEYS[2], token)
end
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
return {1, tostring(token)}`;
// KEYS: lock; ARGV: value, ttl ms. 1 while it is still the holder's.
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;
// KEYS: the minute's tick; ARGV: host, ms. The host that has it (this one may claim again).
const TICK = `local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return held end
if not held then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return false`;
// A minute's tick is kept this long: past the minute, with room for clocks that disagree.
const TICK_MS = 120_000;
// Connecting (at the start, and a renewal's own connection) gives up after this long.
const CONNECT_MS = 5000;

type RedisSpec = Extract<LockSpec, { kind: 'redis' }>;

// A connection as a lease line uses it (see lease-line.ts): renewals go over the one that
// took the lock while it answers, over another while it does not.
class RedisLeaseSession implements LeaseStore<string> {
  constructor(
    readonly connection: RespConnection,
    private readonly value: (epoch: bigint) => string,
  ) {}
  get connectionLost(): boolean {
    return this.connection.lost;
  }
  async renewLease(key: string, epoch: bigint, ttlMs: number): Promise<boolean> {
    return (await this.connection.command('EVAL', RENEW, 1, key, this.value(epoch), Math.ceil(ttlMs))) === 1;
  }
  async releaseLease(key: string, epoch: bigint): Promise<void> {
    // Bounded: a frozen server would otherwise keep cronguard from exiting (the key expires).
    await within(this.connection.command('EVAL', RELEASE, 1, key, this.value(epoch)), CONNECT_MS);
  }
  close(): Promise<void> {
    return this.connection.close();
  }
}

// The lock backend of a Redis lock.
// `waiting`: the invocation waits for the lock (-w).
export function redisLockBackend(spec: RedisSpec, job: string, say: Messages, waiting: boolean): LockBackend {
  const { target, ttlMs } = spec;
  const keys = keysOf(spec.key);
  const host = hostname();
  const holder = `${host} ${process.pid}`;
  const value = (epoch: bigint) => `${epoch} ${holder}`;
  const description = `redis lock ${keys.lock} on ${target.display} (ttl ${ttlMs / 1000}s)`;
  const connect = (signal: AbortSignal) => connectRedis(target, `cronguard:${job}`, signal).catch((error) => Promise.reject(redisError(error, target.display)));
  let connection: RespConnection | null = null;
  // Who held it when it could not be taken: the value found in its key.
  let heldBy: string | null = null;

  // Until when (monotonicMs) this acquisition may wait: a take that is not answered by then
  // (at least CONNECT_MS after it was sent) finds the server out of reach (69). A take the
  // server runs after that leaves a key that expires after the ttl, with nothing run under it.
  let deadline = 0;
  // A waiter (-w) held nothing: once it has reached the server, a server that goes away (a
  // restart) is connected again at the next try, and one still down is waited for as for a
  // held lock, whether it went with the first try's take in flight (made before the wait),
  // between two tries or with a later take in flight (a take the server ran before it went
  // leaves a key that expires after the ttl, as a late one does). Still down when the wait is
  // over, it is 69 (outOfReach: the last failure). A first connection's failure is 69 at once.
  let reached = false;
  let unreachable: Error | null = null;
  const tryOnce = async () => {
    if (connection?.lost) connection = null;
    if (!connection) {
      try {
        connection = await connect(AbortSignal.timeout(CONNECT_MS));
      } catch (error) {
        if (!(waiting && reached)) throw error;
        unreachable = error as Error;
        return null;
      }
      reached = true;
      unreachable = null;
    }
    const sentAt = monotonicMs();
    let reply: Reply;
    try {
      reply = await within(connection.command('EVAL', TAKE, 2, keys.lock, keys.fence, holder, ttlMs), Math.max(CONNECT_MS, deadline - sentAt));
    } catch (error) {
      // A server that is there but does not answer is not waited for.
      if (!(waiting && connection.lost)) throw redisError(error, target.display);
      unreachable = redisError(error, target.display);
      connection = null;
      return null;
    }
    let took: ReturnType<typeof takeReply>;
    try {
      took = takeReply(reply);
    } catch (error) {
      throw redisError(error, target.display);
    }
    if ('held' in took) {
      heldBy = took.held;
      return null;
    }
    const epoch = took.token;
    const session = new RedisLeaseSession(connection, value);
    connection = null;
    const shared = leaseLine<string, RedisLeaseSession>(session, async (signal) => new RedisLeaseSession(await connectRedis(target, `cronguard:${job}`, signal), value));
    // The connection that took the lock is the lock's own (a database lease's is the run
    // log's, which the log closes): closed with the line, or it would hold the process open.
    const line: LeaseLine<string> = { ...shared, close: () => shared.close().finally(() => session.close()) };
    const env = { CRONGUARD_JOB: job, CRONGUARD_LOCK_URL: target.display, CRONGUARD_LOCK_KEY: keys.lock };
    const held = holdLease({ key: keys.lock, epoch, ttlMs, sentAt }, line, env, say);
    return Object.assign(held, {
      async claimTick(minute: Date): Promise<string | null> {
        try {
          const other = await within(session.connection.command('EVAL', TICK, 1, keys.tick(minute), host, TICK_MS), CONNECT_MS);
          if (other !== null && typeof other !== 'string') throw unexpected('the tick claim', other);
          return other;
        } catch (error) {
          throw redisError(error, target.display);
        }
      },
    });
  };

  return {
    description,
    async acquire({ waitMs, abort }) {
      deadline = monotonicMs() + waitMs;
      try {
        return await retryUntil(tryOnce, waitMs, abort);
      } finally {
        // Not taken: nothing more is asked of the server.
        const left = connection;
        connection = null;
        await left?.close();
      }
    },
    // A holder of this host (its pid, for the skip's count in this host's log); another
    // host's, or an application's, is only named with -v.
    async holder() {
      const [, thatHost, pid] = (heldBy ?? '').split(' ');
      if (heldBy !== null) say.verbose(`${job}: ${keys.lock} holds '${heldBy}'`);
      return { pid: thatHost === host && pid ? Number(pid) : null, stranger: null };
    },
    outOfReach: () => unreachable,
  };
}

// The take script's answer: {1, token} or {0, the value found}. Anything else comes from a
// server (or a proxy) that does not run the script as Redis does.
function takeReply(reply: Reply): { token: bigint } | { held: string } {
  if (Array.isArray(reply) && reply.length === 2 && typeof reply[1] === 'string') {
    if (reply[0] === 1 && /^\d{1,19}$/.test(reply[1])) return { token: BigInt(reply[1]) };
    if (reply[0] === 0) return { held: reply[1] };
  }
  throw unexpected('the take', reply);
}

function unexpected(what: string, reply: Reply): ConnectionError {
  return new ConnectionError(`not a Redis server that runs cronguard's scripts: ${what} answered ${JSON.stringify(reply).slice(0, 60)}`);
}

// The reply, or a ConnectionError once `ms` have passed without one.
async function within<T>(reply: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const silence = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ConnectionError(`no answer within ${Math.round(ms / 1000)}s`)), ms);
  });
  try {
    return await Promise.race([reply, silence]);
  } finally {
    clearTimeout(timer);
  }
}

// What stopped the lock, as the exit code the contract gives it: a server that refuses the
// user is 77, one that cannot be reached or answers with anything else 69.
function redisError(error: unknown, where: string): Error {
  if (error instanceof UnavailableError || error instanceof PermissionError || error instanceof UsageError) return error;
  if (error instanceof ReplyError) {
    if (error.code === 'WRONGPASS' || error.code === 'NOAUTH' || error.code === 'NOPERM' || /invalid password|invalid username/i.test(error.message)) {
      return new PermissionError(`redis ${where} refused cronguard: ${error.message}`);
    }
    return new UnavailableError(`redis ${where}: ${error.message}`);
  }
  const message = error instanceof ConnectionError || error instanceof Error ? error.message : String(error);
  return new UnavailableError(`redis ${where} is unreachable: ${message}`);
}
