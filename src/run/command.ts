import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../cli/config.js';
import { CommandNotFoundError, CronguardError, NotExecutableError } from '../errors.js';
import type { NewRun } from '../store/types.js';
import type { Messages } from '../util/io.js';
import { summaryLine } from './attempts.js';
import { openRecorder } from './gate/open.js';
import { recordedText } from './recorded.js';
import type { Notifier } from './report/notify.js';
import type { Pinger } from './report/ping.js';
import type { Syslog } from './report/syslog.js';

// What hears of a run besides the run log: each null when not configured.
export interface Monitors {
  readonly pinger: Pinger | null;
  readonly notifier: Notifier | null;
  readonly syslog: Syslog | null;
}

// The program to run, found before any lock is taken. One that cannot start still leaves a
// `failed` row, so a misconfigured job shows up in history and to `check`, and a failure
// ping, notification and syslog line (an end without a start: nothing started), so
// monitors hear of it at once. `path`: the command's PATH (--env-file may set it).
export async function startable(config: RunConfig, run: NewRun, say: Messages, monitors: Monitors, path: string | undefined): Promise<string> {
  const { pinger, notifier, syslog } = monitors;
  try {
    return resolveCommand(config.argv[0] as string, path);
  } catch (error) {
    if (!(error instanceof CommandNotFoundError || error instanceof NotExecutableError)) throw error;
    const recorder = await openRecorder(config, say);
    const recorded = recordedText(config, error.message);
    const outcome = { status: 'failed', finishedAt: new Date(), durationMs: 0, exitCode: error.exitCode, signal: null, output: null, outputTruncated: false, error: recorded } as const;
    // It took no lock, so it claims no tick.
    await recorder.unstartable({ ...run, tick: null }, outcome);
    await notifier?.ended(recorder, recorder.runId, outcome);
    await recorder.close();
    const warning = await pinger?.run(run.runKey).finish(error.exitCode, recorded);
    if (warning) say.warn(warning);
    const syslogWarning = await syslog?.end({ ...run, runId: recorder.runId }, outcome);
    if (syslogWarning) say.warn(syslogWarning);
    throw new CronguardError(summaryLine(config.name, error.message, recorder.runId), error.exitCode);
  }
}

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
