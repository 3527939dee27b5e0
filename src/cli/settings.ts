import { type Stats, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { PermissionError, UsageError } from '../errors.js';
import { addSecretsOf } from '../util/redact.js';
import { readRegularFile } from '../util/safe-path.js';
import type { Setting } from '../util/setting.js';

type Env = Readonly<Record<string, string | undefined>>;

// The settings that have an environment variable, and so a key in the configuration files.
export const SETTING_ENV = {
  database_url: 'CRONGUARD_DATABASE_URL',
  lock_url: 'CRONGUARD_LOCK_URL',
  schema: 'CRONGUARD_SCHEMA',
  lock_dir: 'CRONGUARD_LOCK_DIR',
  state_dir: 'CRONGUARD_STATE_DIR',
  retention: 'CRONGUARD_RETENTION',
  metrics_dir: 'CRONGUARD_METRICS_DIR',
  notify: 'CRONGUARD_NOTIFY',
  notify_url: 'CRONGUARD_NOTIFY_URL',
  env_file: 'CRONGUARD_ENV_FILE',
  // May stand on several lines: every line's pattern masks (see all()).
  redact: 'CRONGUARD_REDACT',
  syslog: 'CRONGUARD_SYSLOG',
  syslog_socket: 'CRONGUARD_SYSLOG_SOCKET',
} as const;

export type SettingKey = keyof typeof SETTING_ENV;

export const SYSTEM_CONFIG = '/etc/cronguard.conf';

// What every invocation knows before it parses its own flags: the environment and the two
// configuration files, with precedence flag > environment > user file > system file.
export class Settings {
  private constructor(
    private readonly env: Env,
    private readonly files: readonly ReadonlyMap<SettingKey, readonly Setting[]>[],
    readonly notes: readonly string[],
    readonly warnings: readonly string[],
  ) {}

  static load(env: Env, systemFile = SYSTEM_CONFIG): Settings {
    const notes: string[] = [];
    const warnings: string[] = [];
    const named = env.CRONGUARD_CONFIG || undefined;
    const userFile = named ?? join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config'), 'cronguard', 'config');
    const files = [readConfig(userFile, named !== undefined, notes, warnings), readConfig(systemFile, false, notes, warnings)];
    return new Settings(env, files, notes, warnings);
  }

  // An empty value means "not set", so a user file, or an empty variable, can unset what
  // a lower level sets.
  get(key: SettingKey, flag?: { readonly value: string | undefined; readonly name: string }): Setting | undefined {
    if (flag?.value !== undefined) return { value: flag.value, from: flag.name };
    const variable = SETTING_ENV[key];
    const fromEnv = this.env[variable];
    if (fromEnv !== undefined) return fromEnv === '' ? undefined : { value: fromEnv, from: `$${variable}` };
    for (const file of this.files) {
      // A key given twice in one file: its last line counts.
      const setting = file.get(key)?.at(-1);
      if (setting) return setting.value === '' ? undefined : setting;
    }
    return undefined;
  }

  // Every value of a setting that adds up rather than overrides (redact): the flags', the
  // variable's and each line of both files, none hiding another. A mask set for the whole
  // system cannot be taken off by a user's file or a flag; empty values are skipped.
  all(key: SettingKey, flags: readonly string[], flagName: string): Setting[] {
    const found: Setting[] = flags.map((value) => ({ value, from: flagName }));
    const variable = SETTING_ENV[key];
    const fromEnv = this.env[variable];
    if (fromEnv) found.push({ value: fromEnv, from: `$${variable}` });
    for (const file of this.files) found.push(...(file.get(key) ?? []));
    return found.filter((s) => s.value !== '');
  }
}

// Reads `key = value` lines; keys are the variables' names, with or without CRONGUARD_, in
// any case; '#' at the start of a line or after a blank starts a comment. A file that does
// not exist is simply not there, unless it was named explicitly.
function readConfig(file: string, required: boolean, notes: string[], warnings: string[]): Map<SettingKey, Setting[]> {
  const settings = new Map<SettingKey, Setting[]>();
  let text: string;
  try {
    text = readRegularFile(file, 'configuration file', 1024 * 1024, { noFollow: true, trust: (stat) => trusted(file, stat) });
  } catch (error) {
    const message = (error as Error).message;
    // A root-only /etc/cronguard.conf is not an error for other users. Anything else that
    // stands where a configuration file should (a link, a FIFO, a huge file, one someone
    // else may change) stops the invocation: without its settings a job could run against
    // the wrong database, or beside another host's run.
    if (required || !(/\(it does not exist\)$/.test(message) || /permission denied on /.test(message))) throw error;
    if (!/does not exist/.test(message)) notes.push(`${message}; skipped`);
    return settings;
  }
  text.split('\n').forEach((raw, index) => {
    const line = raw.replace(/^\uFEFF/, '').trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${file}:${index + 1}`;
    addSecretsOf(line.replace(/^[^=]*?(\w+:\/\/)/, '$1'));
    const match = /^([A-Za-z_]+)\s*=\s*(.*)$/.exec(line);
    if (!match) throw new UsageError(`${where}: expected 'key = value'`);
    const key = (match[1] as string).toLowerCase().replace(/^cronguard_/, '');
    if (!Object.hasOwn(SETTING_ENV, key)) {
      throw new UsageError(`${where}: unknown setting '${match[1]}' (known: ${Object.keys(SETTING_ENV).join(', ')})`);
    }
    const value = settingValue(match[2] as string);
    if (key === 'database_url' || key === 'lock_url' || key === 'notify_url') addSecretsOf(value);
    const lines = settings.get(key as SettingKey) ?? [];
    lines.push({ value, from: where });
    settings.set(key as SettingKey, lines);
  });
  const url = settings.get('database_url')?.at(-1)?.value ?? '';
  if (hasPassword(url) && readableByOthers(file)) {
    warnings.push(`${file} holds a database password and is readable by other users; chmod 600 it, or use ~/.pgpass`);
  }
  if (hasPassword(settings.get('lock_url')?.at(-1)?.value ?? '') && readableByOthers(file)) {
    warnings.push(`${file} holds the lock URL's password and is readable by other users; chmod 600 it`);
  }
  return settings;
}

// Settings decide where jobs lock, log and take their arguments from: a file another user
// could have written (theirs, or writable by anyone) is refused, as ssh and sudo refuse one.
function trusted(file: string, stat: Stats): void {
  const uid = process.geteuid?.() ?? 0;
  if (stat.uid !== uid && stat.uid !== 0) {
    throw new PermissionError(`configuration file ${file} belongs to another user (uid ${stat.uid}); cronguard takes settings only from your own files or root's`);
  }
  if (stat.mode & 0o002) {
    throw new PermissionError(`configuration file ${file} is writable by any user (mode ${(stat.mode & 0o777).toString(8)}); chmod o-w it`);
  }
}

// A value without its trailing comment; a value in one pair of quotes is taken as quoted.
// `notify` holds a shell command, which may begin and end with quotes of its own ("$A" "$B"
// is two quoted words, not one quoted value) and hold a quoted ' # ': so a comment starts
// where sh would start one, at a '#' after a blank outside quotes, and paths and URLs, which
// hold no quotes, read as before.
function settingValue(text: string): string {
  const quoted = /^(["'])((?:(?!\1).)*)\1\s*(#.*)?$/.exec(text);
  if (quoted) return quoted[2] as string;
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote !== null) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"') i++;
    } else if (c === '\\') i++;
    else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) return text.slice(0, i).trim();
  }
  return text.trim();
}

function hasPassword(url: string): boolean {
  let decoded = url;
  try {
    decoded = decodeURIComponent(url);
  } catch {
    // Malformed %-escapes: look at it as written.
  }
  return /^[a-z]+:\/\/[^@]*:.*@/i.test(url) || /[?&]password=/i.test(decoded);
}

function readableByOthers(file: string): boolean {
  try {
    return (statSync(file).mode & 0o004) !== 0;
  } catch {
    return false;
  }
}
