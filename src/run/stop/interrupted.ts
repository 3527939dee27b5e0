import { constants } from 'node:os';
import { CronguardError } from '../../errors.js';

// cronguard got a signal while nothing of the job was running (waiting for the lock, for a
// retry, for the next run of a loop): it stops there, one line, exit 128+N.
export class Interrupted extends CronguardError {
  constructor(
    name: string,
    readonly signal: NodeJS.Signals,
    when: string,
  ) {
    super(`${name}: stopped by ${signal} ${when}`, 128 + ((constants.signals as Record<string, number>)[signal] ?? 0));
  }
}
