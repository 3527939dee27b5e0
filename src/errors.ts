
// Errors a user can act on. Each carries the exit code the contract promises, so the CLI
// boundary maps any of them to one stderr line and an exit status without a stack trace.

// sysexits(3) codes, as util-linux flock uses them.
export const EXIT = {
  ok: 0,
  // A subcommand found nothing to show, as grep finds no line.
  notFound: 1,
  timeout: 124,
  notExecutable: 126,
  commandNotFound: 127,
  usage: 64,
  unavailable: 69,
  internal: 70,
  cantCreate: 73,
  lockLost: 75,
  permission: 77,
} as const;

export class CronguardError extends Error {
  // The subcommand that failed (`cronguard history`), so its one line names it; undefined
  // for the run command.
  command: string | undefined;

  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = new.target.name;
  }

  within(command: string): this {
    this.command ??= command;
    return this;
  }
}

export class UsageError extends CronguardError {
  constructor(message: string, command?: string) {
    super(message, EXIT.usage);
    this.command = command;
  }
}

// Not a failure: a subcommand printed its --help. Carries exit 0 through the boundary.
export class HelpShown extends CronguardError {
  constructor() {
    super('', EXIT.ok);
  }
}

// A subcommand looked for something (a run, a job) that the log does not have.
export class NotFoundError extends CronguardError {
  constructor(message: string) {
    super(message, EXIT.notFound);
  }
}

export class UnavailableError extends CronguardError {
  constructor(message: string) {
    super(message, EXIT.unavailable);
  }
}

export class CantCreateError extends CronguardError {
  constructor(message: string) {
    super(message, EXIT.cantCreate);
  }
}

export class PermissionError extends CronguardError {
  constructor(message: string) {
    super(message, EXIT.permission);
  }
}

export class CommandNotFoundError extends CronguardError {
  constructor(command: string) {
    super(`command not found: ${command}`, EXIT.commandNotFound);
  }
}

export class NotExecutableError extends CronguardError {
  constructor(command: string, why: string) {
    super(`cannot execute ${command}: ${why}`, EXIT.notExecutable);
  }
}

// Turns a failed file-system call on a lock or state path into the matching typed error:
// permission problems are 77, everything else that stops creation is 73.
export function fileError(what: string, path: string, error: unknown): CronguardError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') {
    return new PermissionError(`permission denied on ${what} ${path}`);
  }
  if (code === 'ELOOP') {
    return new CantCreateError(`${what} ${path} is a symbolic link; refusing to follow it`);
  }
  const reason = code === 'ENOENT' ? 'its directory does not exist' : describe(error);
  return new CantCreateError(`cannot create ${what} ${path}: ${reason}`);
}

// A short, human reason for a system error, without Node's "ENOENT: ..., open 'x'" noise.
export function describe(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  if (e && typeof e.code === 'string' && typeof e.syscall === 'string') {
    return `${e.code} (${e.syscall})`;
  }
  return e instanceof Error ? e.message : String(error);
}
