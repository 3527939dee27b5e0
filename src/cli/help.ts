import { RUN_OPTIONS } from './options.js';

declare const CRONGUARD_VERSION: string;

export const VERSION = typeof CRONGUARD_VERSION === 'string' ? CRONGUARD_VERSION : '0.0.0-dev';

// --help for the run command, generated from the same table the parser uses.
export function runHelp(): string {
  const rows = RUN_OPTIONS.map((o) => {
    const flags = `${o.short ? `-${o.short}, ` : '    '}--${o.long}${o.value ? ` ${o.value}` : ''}`;
    return `  ${flags.padEnd(34)} ${o.help}`;
  });
  return `Usage: cronguard [run] [options] [--] <command> [args...]
       cronguard [run] [options] -c '<shell string>'
       cronguard <subcommand> [options]

Runs a command under a named lock, records every run, and skips silently when another
instance holds the lock. Options after the command belong to the command.

Options:
${rows.join('\n')}

Subcommands:
  history [NAME] [--limit N] [--status S] [--json]   recent runs, newest first
  logs RUN_ID|NAME                                   captured output of a run
  locks [--json]                                     locks held right now and by whom
  migrate                                            create or upgrade the run-log schema

DURATION: 500ms, 10s, 5m, 2h, 1d, combinations like 1h30m; a bare number is seconds.
Exit status: the command's own; 128+N if killed by signal N; 124 on timeout; 0 (or -E N)
when skipped; 64 usage error; 69 unavailable; 73 cannot create; 77 permission denied;
126/127 not executable / not found. See cronguard(1).
`;
}
