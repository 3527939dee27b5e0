import { fixture, start } from './helpers.js';

// A "host" of a fleet, for the tests: a UTS namespace of its own whose hostname is `name`
// (a user namespace too when the tests do not run as root), the run log and the database
// shared. The prefix that runs a command there.
export function hostPrefix(name: string): string[] {
  const unshare = process.geteuid?.() === 0 ? ['unshare', '-u'] : ['unshare', '-r', '-u'];
  return [...unshare, 'sh', '-c', 'hostname "$0" && exec "$@"', name];
}

// The binary run on host `name` with a clock of its own, started at `clock` (clock.cjs).
export function onHost(name: string, clock: string, args: string[], env: NodeJS.ProcessEnv) {
  const clocked = { ...env, NODE_OPTIONS: `--require ${fixture('clock.cjs')}`, CRONGUARD_TEST_CLOCK: clock };
  return start(args, clocked, hostPrefix(name));
}
