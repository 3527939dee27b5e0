import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';
import { CommandNotFoundError, NotExecutableError } from '../errors.js';

// cron's own PATH, used when the environment has none.
const DEFAULT_PATH = '/usr/bin:/bin';

// Finds the program the way execvp(3) would, so a missing or non-executable command is
// reported (127 / 126) before any lock is taken or any run is recorded.
export function resolveCommand(command: string, path: string | undefined): string {
  if (command.includes('/')) {
    const why = unusable(command);
    if (why === 'missing') throw new CommandNotFoundError(command);
    if (why) throw new NotExecutableError(command, why);
    return command;
  }
  let refused: string | null = null;
  for (const dir of (path ?? DEFAULT_PATH).split(':')) {
    const candidate = join(dir || '.', command);
    const why = unusable(candidate);
    if (!why) return candidate;
    if (why !== 'missing') refused ??= why;
  }
  if (refused) throw new NotExecutableError(command, refused);
  throw new CommandNotFoundError(command);
}

function unusable(file: string): string | null {
  try {
    if (statSync(file).isDirectory()) return 'it is a directory';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : 'permission denied';
  }
  try {
    accessSync(file, constants.X_OK);
    return null;
  } catch {
    return 'permission denied';
  }
}
