import { resolve } from 'node:path';
import { UsageError } from '../errors.js';
import { addMaskedValue, addPattern } from '../util/redact.js';
import type { Setting } from '../util/setting.js';
import { boundedPattern } from './redact-pattern.js';
import type { RunConfig } from './run-config.js';

// The run's secrecy settings: --env-file, --redact (with the configuration's redact lines)
// and --record-command, checked here so that a mistake is one line (64) and nothing runs.
export function secrecy(envFile: Setting | undefined, redact: readonly Setting[], recordCommand: string | undefined) {
  if (recordCommand !== undefined && recordCommand !== 'on' && recordCommand !== 'off') {
    throw new UsageError(`--record-command: '${recordCommand}' is not on or off`);
  }
  return {
    // Made absolute once, as the other paths are, for -v and its messages.
    envFile: envFile === undefined ? null : resolve(envFile.value),
    redact: Object.freeze(redact.map(compile)),
    recordCommand: recordCommand !== 'off',
  };
}

// A pattern in JavaScript's syntax, matching anywhere (global). One that matches the empty
// string would mask nothing and put *** between every two characters: refused.
function compile({ value, from }: Setting): RegExp {
  const where = /^(--|\$)/.test(from) ? from : `${from}: redact`;
  let pattern: RegExp;
  try {
    pattern = new RegExp(value, 'g');
  } catch (error) {
    const why = (error as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
    throw new UsageError(`${where}: '${value}' is not a valid regular expression (${why})`);
  }
  if (new RegExp(pattern.source).test('')) throw new UsageError(`${where}: '${value}' matches the empty string; give a pattern that matches only what to mask`);
  // Matched in bounded time, or refused: see cli/redact-pattern.ts.
  const bounded = boundedPattern(value);
  if (bounded === null) {
    throw new UsageError(
      `${where}: '${value}' could take exponential time on a long line (a back-reference, or a repeated group holding a quantifier or '|', with a lookaround or a repeat count over 16); rewrite it without that`,
    );
  }
  return bounded;
}

// Before anything is recorded, said or started: --redact's patterns and --env-file's values
// join what redact() masks, and the file's variables are returned, for the command alone
// (never cronguard's own environment, so not in /proc/<its pid>/environ). The file's reader
// loads only with --env-file.
export async function loadSecrets(config: RunConfig): Promise<Readonly<Record<string, string>> | null> {
  for (const pattern of config.redact) addPattern(pattern);
  if (config.envFile === null) return null;
  const vars = (await import('./env-file.js')).readEnvFile(config.envFile);
  for (const value of Object.values(vars)) addMaskedValue(value);
  return Object.freeze(vars);
}
