import { join, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import { inDatabase, type LockBackendName, type LockSpec } from '../lock/lock-spec.js';
import type { RedisTarget } from '../lock/redis/target.js';
import { MAX_SLOTS } from '../lock/slots.js';
import type { DatabaseConfig } from '../store/database-config.js';
import type { LogSpec } from '../store/log-spec.js';
import { parseDuration } from '../util/duration.js';
import { deriveName, validateName } from '../util/name.js';
import { type ResolvedDir, resolveLockDir, resolveStateDir } from '../util/paths.js';
import type { Setting } from '../util/setting.js';
import type { Fleet } from './fleet.js';
import { parseNotify } from './notify.js';
import { observing } from './observe.js';
import type { ParsedRun, RawOptions } from './options.js';
import { parsePing } from './ping.js';
import { outcomeRules } from './rules.js';
import type { RunConfig } from './run-config.js';
import { scheduling } from './schedule.js';
import { secrecy } from './secrecy.js';
import type { SettingKey, Settings } from './settings.js';
import { parseSyslog } from './syslog.js';
import { optionalDuration, parseBytes, parseExitCode, parseSignal } from './values.js';

export type { RunConfig };

export interface Context {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly root: boolean;
  readonly settings: Settings;
  // cli/fleet.ts, loaded by the caller when usesFleet(); null otherwise.
  readonly fleet: Fleet | null;
}

// The fleet database's URL, wherever it is configured (--db, the environment, a file).
function databaseSetting({ options }: ParsedRun, settings: Settings): Setting | undefined {
  return settings.get('database_url', { value: typeof options.db === 'string' ? options.db : undefined, name: '--db' });
}

// The Redis lock's URL, as the database's.
function lockUrlSetting({ options }: ParsedRun, settings: Settings): Setting | undefined {
  return settings.get('lock_url', { value: typeof options.lockUrl === 'string' ? options.lockUrl : undefined, name: '--lock-url' });
}

// Whether an invocation has a database or a Redis server configured: only then does the
// caller load cli/fleet.ts for resolveRunConfig.
export function usesFleet(parsed: ParsedRun, settings: Settings): boolean {
  return databaseSetting(parsed, settings) !== undefined || lockUrlSetting(parsed, settings) !== undefined;
}

const MAX_CAPTURE = 64 * 1024 * 1024;
export function resolveRunConfig({ options, repeated, command }: ParsedRun, ctx: Context): RunConfig {
  const str = (key: string): string | undefined => {
    const value = options[key];
    return typeof value === 'string' ? value : undefined;
  };
  const shell = str('shell');
  if (shell !== undefined && command.length > 0) {
    throw new UsageError(
      `-c takes the whole command as one shell string; unexpected '${command[0]}' after it`,
    );
  }
  if (shell === undefined && command.length === 0) {
    throw new UsageError('no command given: cronguard [options] -- command [args...]');
  }
  if (shell === '') throw new UsageError('-c needs a non-empty shell string');
  if (shell === undefined && command[0] === '') throw new UsageError('the command is an empty string');
  const argv = shell !== undefined ? ['/bin/sh', '-c', shell] : command;
  const name = str('name') !== undefined ? validateName(str('name') as string) : deriveName(argv);

  const setting = (key: SettingKey, option: string) => ctx.settings.get(key, { value: str(option), name: `--${flagName(option)}` });
  const url = databaseSetting({ options, repeated, command }, ctx.settings);
  const lockUrl = lockUrlSetting({ options, repeated, command }, ctx.settings);
  const fleet = url === undefined && lockUrl === undefined ? null : fleetOf(ctx);
  const db = url === undefined ? null : (fleet as Fleet).resolveDatabase(url, setting('schema', 'schema'), ctx.env);
  const dialect = db && fleet?.dialectOf(db);
  // --lock-file names the lock the user wants (flock on that file), whatever database is
  // configured for the log: a fleet's /etc/cronguard.conf must not break such crontab lines.
  const explicitFile = str('lockFile');
  const lock = parseLock(str('lock') ?? (explicitFile !== undefined ? 'flock' : lockUrl ? 'redis' : (dialect?.lock ?? 'flock')), db, fleet);
  if (lock === 'redis' && lockUrl === undefined) throw new UsageError('-l redis needs a lock URL: give --lock-url redis://HOST[:PORT][/DB] or set CRONGUARD_LOCK_URL');
  const redis = lockUrl === undefined ? null : redisTarget(lockUrl, lock, fleet as Fleet);
  if (db && dialect && (inDatabase(lock) || !options.noLog)) dialect.checkRun(db);
  if (str('lockKey') !== undefined && lock !== 'postgres') throw new UsageError(lockKeyRefusal(lock));
  const leaseTtlMs = parseLeaseTtl(str('leaseTtl'), lock);
  if (lock === 'lease' && options.noLog) throw new UsageError('-l lease keeps its lease in the run log; it cannot go with --no-log');
  const onLockLoss = str('onLockLoss') ?? 'terminate';
  if (onLockLoss !== 'terminate' && onLockLoss !== 'continue') {
    throw new UsageError(`--on-lock-loss: '${onLockLoss}' is not terminate or continue`);
  }
  if (explicitFile !== undefined && lock !== 'flock') {
    throw new UsageError(`--lock-file names a file for flock to lock; it cannot go with -l ${lock} (leave out -l, or use -l flock)`);
  }
  if (explicitFile === '') throw new UsageError('--lock-file needs a path');
  const lockDir = absolute(resolveLockDir(setting('lock_dir', 'lockDir'), ctx.env, ctx.root), 'lock');
  const stateDir = absolute(resolveStateDir(setting('state_dir', 'stateDir'), ctx.env, ctx.root), 'state');
  const envFile = setting('env_file', 'envFile');
  const timeoutMs = optionalDuration(str('timeout'), '--timeout');
  const log: LogSpec = options.noLog ? { kind: 'none' } : db ? { kind: 'shared', db } : { kind: 'sqlite' };
  const lockSpec = (): LockSpec<DatabaseConfig> => {
    const dir = { path: lockDir.dir, isDefault: lockDir.isDefault };
    // Only the database's locks have keys, and they have a database: `fleet` is loaded.
    const key = () => (str('lockKey') !== undefined ? (fleet as Fleet).parseLockKey(str('lockKey') as string) : (fleet as Fleet).advisoryKey(name, db?.schema));
    switch (lock) {
      case 'flock':
        return explicitFile !== undefined ? { kind: 'flock', path: resolve(explicitFile), dir: null, byHand: true } : { kind: 'flock', path: join(lockDir.dir, `${name}.lock`), dir, byHand: false };
      case 'lockfile':
        return { kind: 'lockfile', dir, job: name };
      case 'postgres':
        return { kind: 'advisory', key: key(), byHand: str('lockKey') !== undefined, db: db as DatabaseConfig };
      case 'mysql':
        return { kind: 'named', name: (fleet as Fleet).mysqlLockName((db as DatabaseConfig).schema, name), db: db as DatabaseConfig };
      case 'lease':
        return { kind: 'lease', key: key(), ttlMs: leaseTtlMs as number, db: db as DatabaseConfig };
      case 'redis': {
        const target = redis as RedisTarget;
        // A shared log keeps the fleet's one run per tick itself; logs of each host's own
        // leave it to the lock every host shares.
        return { kind: 'redis', target, key: (fleet as Fleet).redisKeys(target, name).lock, ttlMs: leaseTtlMs as number, ticks: log.kind !== 'shared' };
      }
      case 'none':
        return { kind: 'none' };
    }
  };

  // Parsed before --replace looks at it: '01' is 1, which --replace goes with.
  const maxRunning = parseMaxRunning(str('maxRunning'), lock);
  const warnings: string[] = [];
  const notify = parseNotify({ command: setting('notify', 'notify'), url: setting('notify_url', 'notifyUrl') }, str('notifyTimeout'), options.noLog === true, (line) => warnings.push(line));
  return Object.freeze({
    name,
    argv: Object.freeze([...argv]),
    display: shell !== undefined ? `/bin/sh -c ${quote(shell)}` : argv.map(quote).join(' '),
    lock: Object.freeze(lockSpec()),
    maxRunning,
    stateDir: stateDir.dir,
    log: Object.freeze(log),
    onLockLoss,
    waitMs: str('wait') === undefined ? 0 : parseDuration(str('wait') as string, '--wait'),
    conflictExitCode: parseExitCode(str('conflictExitCode')),
    timeoutMs,
    killSignal: parseSignal(str('killSignal') ?? 'TERM'),
    killAfterMs: parseDuration(str('killAfter') ?? '10s', '--kill-after'),
    quiet: options.quiet === true,
    captureBytes: parseBytes(str('capture'), '--capture', 65536, MAX_CAPTURE),
    ...outcomeRules(str, options, ctx.env, timeoutMs),
    everyTick: options.everyTick === true,
    replace: replacing(options, maxRunning),
    ...scheduling(str, options),
    ...observing(ctx.settings.get('retention'), setting('metrics_dir', 'metricsDir'), !options.noLog),
    ping: parsePing(str, options),
    notify,
    ...secrecy(envFile, ctx.settings.all('redact', repeated.redact ?? [], '--redact'), str('recordCommand')),
    syslog: parseSyslog(ctx.settings.get('syslog', { value: options.syslog ? 'on' : undefined, name: '--syslog' }), ctx.settings.get('syslog_socket')),
    verbose: options.verbose === true,
    warnings: Object.freeze(warnings),
    sources: Object.freeze([
      db ? `database ${db.display} (from ${db.from}), schema ${db.schema}` : 'no database configured',
      ...(redis ? [`lock server ${redis.display} (from ${redis.from})`] : []),
      `lock dir ${lockDir.dir} (${lockDir.from})`,
      `state dir ${stateDir.dir} (${stateDir.from})`,
      ...(envFile ? [`env file ${resolve(envFile.value)} (${envFile.from})`] : []),
      ...(notify ? [notify.origin] : []),
    ]),
  });
}

function fleetOf(ctx: Context): Fleet {
  if (!ctx.fleet) throw new Error('a database or lock URL is configured, but cli/fleet.ts was not loaded (usesFleet)');
  return ctx.fleet;
}

// --replace finds the running copy in the run log: without one there is nothing to find it in.
function replacing(options: RawOptions, maxRunning: number): boolean {
  if (options.replace === true && options.noLog === true) throw new UsageError('--replace finds the running copy in the run log; it cannot go with --no-log');
  if (options.replace === true && maxRunning > 1) throw new UsageError('--replace stops the running copy of a job that has one; with --max-running there may be several: stop one with cronguard stop');
  return options.replace === true;
}

// The option table's key as the user spells the flag: lockDir is --lock-dir.
function flagName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

// Paths are made absolute once: the run row records them for `cronguard locks`, which may
// run in another directory.
function absolute(resolved: ResolvedDir, what: string): ResolvedDir {
  if (resolved.dir === '') throw new UsageError(`${resolved.from}: the ${what} directory must not be empty`);
  return { ...resolved, dir: resolve(resolved.dir) };
}

function parseLock(value: string, db: DatabaseConfig | null, fleet: Fleet | null): LockBackendName {
  if (value !== 'flock' && value !== 'lockfile' && value !== 'postgres' && value !== 'mysql' && value !== 'lease' && value !== 'redis' && value !== 'none') {
    throw new UsageError(`unknown lock backend '${value}' (use flock, lockfile, postgres, mysql, lease, redis or none)`);
  }
  if (inDatabase(value) && !db) {
    throw new UsageError(`lock backend ${value} needs a database: give --db URL or set CRONGUARD_DATABASE_URL`);
  }
  if (!db || !fleet) return value;
  // A lock of one server's kind cannot be taken on the other's.
  const owner = fleet.dialectWithLock(value);
  const current = fleet.dialectOf(db);
  if (owner && owner !== current) throw new UsageError(`lock backend ${value} needs ${owner.lockNeeds}; with ${current.url} use -l ${current.lock} (the default)`);
  return value;
}

// The Redis server of -l redis. A lock URL of the environment or a configuration file is
// there for the jobs that take a Redis lock: a line with -l flock (or --lock-file) keeps its
// own lock. Given on the line, it must be the lock's.
function redisTarget(url: Setting, lock: LockBackendName, fleet: Fleet): RedisTarget | null {
  if (lock !== 'redis') {
    if (url.from === '--lock-url') throw new UsageError(`--lock-url names the server of a redis lock; it cannot go with -l ${lock}`);
    return null;
  }
  const option = url.from.startsWith('--') ? url.from : `lock URL (${url.from})`;
  if (!fleet.isRedisUrl(url.value)) throw new UsageError(`${option}: a lock URL starts with redis:// or rediss://`);
  return fleet.resolveRedisTarget(url);
}

// The shortest lease: its holder renews every third of it and must be able to stop its
// command (signal, grace, SIGKILL) well before it could expire.
export const MIN_LEASE_TTL_MS = 5000;
// The longest: Node's timers that renew and fence a lease fire at once past 2^31 - 1 ms
// (24.8 days). (A DBA's take_lease has no such bound: nothing renews it.)
const MAX_LEASE_TTL_MS = 24 * 86_400_000;
const DEFAULT_LEASE_TTL_MS = 30_000;

function parseLeaseTtl(text: string | undefined, lock: LockBackendName): number | null {
  const leased = lock === 'lease' || lock === 'redis';
  if (text !== undefined && !leased) throw new UsageError("--lease-ttl applies to the lease lock backend only (-l lease, and -l redis's lease)");
  if (!leased) return null;
  const ms = text === undefined ? DEFAULT_LEASE_TTL_MS : parseDuration(text, '--lease-ttl');
  if (ms < MIN_LEASE_TTL_MS) throw new UsageError(`--lease-ttl: '${text}' is shorter than the minimum, 5s`);
  if (ms > MAX_LEASE_TTL_MS) throw new UsageError(`--lease-ttl: '${text}' is longer than the maximum, 24d`);
  return ms;
}

// --max-running: how many slots the job's lock has (see lock/slots.ts).
function parseMaxRunning(text: string | undefined, lock: LockBackendName): number {
  if (text === undefined) return 1;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > MAX_SLOTS) throw new UsageError(`--max-running: '${text}' is not a whole number from 1 to ${MAX_SLOTS}`);
  const n = Number(text);
  if (n > 1 && lock === 'none') throw new UsageError('--max-running counts the copies that hold a slot of the lock; -l none has no lock, so every copy runs already');
  return n;
}

// Quotes an argument the way a POSIX shell would need it, for the run log's `command`.
export function quote(arg: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

// --lock-key names an advisory lock, which only the postgres lock takes. A lease is a row of
// its schema's run log: an application's pg_advisory_lock(N), or a job of another schema
// given the same key, would not keep it out, so it refuses the key rather than promise that.
function lockKeyRefusal(lock: string): string {
  if (lock === 'lease') {
    return "--lock-key shares a PostgreSQL advisory lock, which -l lease does not take (a lease is a row of its schema's run log, unseen by pg_advisory_lock and by other schemas): use -l postgres --lock-key N, or leave --lock-key out";
  }
  return `--lock-key applies to the postgres lock backend only${lock === 'mysql' ? ' (the mysql lock is named after the job: give -n)' : ''}`;
}
