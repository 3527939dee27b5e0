import type { RunConfig } from '../cli/config.js';
import { maskedValues, maskSecrets } from '../util/redact.js';

// What the run log, the live file, the page and pings show for the command under
// --record-command off.
export const RECORD_OFF = '(command not recorded)';

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
