import type { RunConfig } from '../cli/config.js';
import { addMaskedValue, addPattern, maskedValues, maskSecrets } from '../util/redact.js';

// What the run log, the live file, the page and pings show for the command under
// --record-command off.
export const RECORD_OFF = '(command not recorded)';

// Before anything is recorded, said or started: --redact's patterns and --env-file's values
// join what redact() masks, and the file's variables are returned, for the command alone
// (never cronguard's own environment, so not in /proc/<its pid>/environ). The file's reader
// loads only with --env-file.
export async function loadSecrets(config: RunConfig): Promise<Readonly<Record<string, string>> | null> {
  for (const pattern of config.redact) addPattern(pattern);
  if (config.envFile === null) return null;
  const vars = (await import('../cli/env-file.js')).readEnvFile(config.envFile);
  for (const value of Object.values(vars)) addMaskedValue(value);
  return Object.freeze(vars);
}

// The command line as the run log records it: masked, or not at all. It is quoted for a
// shell (cli/config.ts quote()), where a value holding a ' shows as '\'' in its place: that
// form of an env file's value is masked too (it was recorded whole).
export function recordedCommand(config: RunConfig, command: string): string {
  if (!config.recordCommand) return RECORD_OFF;
  let out = command;
  for (const value of maskedValues()) if (value.includes("'")) out = out.split(value.replaceAll("'", "'\\''")).join('***');
  return maskSecrets(out);
}

// A message about the command (it could not start) as the run log and a ping get it: masked,
// and without the program's name under --record-command off.
export function recordedText(config: RunConfig, text: string): string {
  return maskSecrets(config.recordCommand ? text : text.split(config.argv[0] as string).join(RECORD_OFF));
}
