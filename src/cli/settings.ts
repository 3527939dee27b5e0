import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../errors.js';
import { addSecretsOf } from '../util/redact.js';

type Env = Readonly<Record<string, string | undefined>>;

// The settings that have an environment variable, and so a key in the configuration files.
export const SETTING_ENV = {
  database_url: 'CRONGUARD_DATABASE_URL',
  schema: 'CRONGUARD_SCHEMA',
  lock_dir: 'CRONGUARD_LOCK_DIR',
  state_dir: 'CRONGUARD_STATE_DIR',
} as const;

export type SettingKey = keyof typeof SETTING_ENV;

// A resolved value and where it came from (a flag, a variable, `file:line`), for -v.
export interface Setting {
  readonly value: string;
  readonly from: string;
}

export const SYSTEM_CONFIG = '/etc/cronguard.conf';

// What every invocation knows before it parses its own flags: the environment and the two
// configuration files, with precedence flag > environment > user file > system file.
export class Settings {
  private constructor(
    private readonly env: Env,
    private readonly files: readonly ReadonlyMap<SettingKey, Setting>[],
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

  // An empty value in a file means "not set", so a user file can unset what /etc sets.
  get(key: SettingKey, flag?: { readonly value: string | undefined; readonly name: string }): Setting | undefined {
    if (flag?.value !== undefined) return { value: flag.value, from: flag.name };
    const variable = SETTING_ENV[key];
    const fromEnv = this.env[variable];
    if (fromEnv) return { value: fromEnv, from: `$${variable}` };
    for (const file of this.files) {
      const setting = file.get(key);
      if (setting) return setting.value === '' ? undefined : setting;
    }
    return undefined;
  }
}

// Reads `key = value` lines; keys are the variables' names, with or without CRONGUARD_, in
// any case. A file that does not exist is simply not there, unless it was named explicitly.
function readConfig(file: string, required: boolean, notes: string[], warnings: string[]): Map<SettingKey, Setting> {
  const settings = new Map<SettingKey, Setting>();
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (required) throw new UsageError(`cannot read the configuration file ${file} named by $CRONGUARD_CONFIG (${code})`);
    // A root-only /etc/cronguard.conf is not an error for other users.
    if (code === 'EACCES') notes.push(`configuration file ${file} is not readable by this user; skipped`);
    return settings;
  }
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${file}:${index + 1}`;
    addSecretsOf(line.replace(/^[^=]*?(\w+:\/\/)/, '$1'));
    const match = /^([A-Za-z_]+)\s*=\s*(.*)$/.exec(line);
    if (!match) throw new UsageError(`${where}: expected 'key = value', got '${line.slice(0, 60)}'`);
    const key = (match[1] as string).toLowerCase().replace(/^cronguard_/, '');
    if (!(key in SETTING_ENV)) {
      throw new UsageError(`${where}: unknown setting '${match[1]}' (known: ${Object.keys(SETTING_ENV).join(', ')})`);
    }
    const value = unquote(match[2] as string);
    if (key === 'database_url') addSecretsOf(value);
    settings.set(key as SettingKey, { value, from: where });
  });
  const url = settings.get('database_url')?.value ?? '';
  if (hasPassword(url) && readableByOthers(file)) {
    warnings.push(`${file} holds a database password and is readable by other users; chmod 600 it, or use ~/.pgpass`);
  }
  return settings;
}

function unquote(value: string): string {
  const m = /^(["'])(.*)\1$/.exec(value);
  return m ? (m[2] as string) : value;
}

function hasPassword(url: string): boolean {
  return /^[a-z]+:\/\/[^@]*:.*@/i.test(url) || /[?&]password=/i.test(url);
}

function readableByOthers(file: string): boolean {
  try {
    return (statSync(file).mode & 0o004) !== 0;
  } catch {
    return false;
  }
}
