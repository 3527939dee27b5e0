// cronguard's own voice: one line per message on stderr, never stdout, which belongs to
// the command (and to cron's mail).
export interface Messages {
  warn(line: string): void;
  verbose(line: string): void;
}

export function messages(verbose: boolean, prefix = 'cronguard'): Messages {
  const write = (line: string) => process.stderr.write(`${prefix}: ${line}\n`);
  return {
    warn: write,
    verbose: verbose ? write : () => {},
  };
}
