import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { BINARY, CI_VARS, waitFor } from './helpers.js';

// A real terminal for the output a person reads: tmux runs cronguard in a pane of a given
// size, and the test reads the screen back (with colours, as escape codes, when asked). Each
// terminal has a tmux server of its own (-L): test files run side by side, and a shared
// server exits with its last session just as another file's session is being made in it.
const sessions: string[] = [];
afterEach(() => {
  for (const name of sessions.splice(0)) {
    try {
      execFileSync('tmux', ['-L', name, 'kill-server'], { stdio: 'ignore' });
    } catch {
      // Already gone.
    }
    // The server leaves its socket behind.
    rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.()}`, name), { force: true });
  }
});

export const HAVE_TMUX = ['/usr/bin/tmux', '/usr/local/bin/tmux'].some(existsSync);

// Runs `cronguard ARGS` in a fresh WIDTHxHEIGHT terminal and returns the screen once the
// command has finished (the pane stays open to be read).
export async function onScreen(args: readonly string[], env: NodeJS.ProcessEnv, width = 80, height = 40, colours = false): Promise<string> {
  const name = `cg-${randomBytes(4).toString('hex')}`;
  sessions.push(name);
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  // The tmux server hands its own environment (the test runner's, perhaps a CI job's) to
  // the shell, which must be a person's.
  const command = `unset ${CI_VARS.join(' ')}; ${[process.execPath, BINARY, ...args].map(quote).join(' ')}; echo __done__; sleep 600`;
  const vars = Object.entries(env)
    .filter(([k, v]) => v !== undefined && !CI_VARS.includes(k))
    .flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  execFileSync('tmux', ['-L', name, '-u', 'new-session', '-d', '-s', name, '-x', String(width), '-y', String(height), ...vars, command], { env: { ...env, TERM: 'xterm-256color' } });
  let screen = '';
  await waitFor(() => {
    screen = execFileSync('tmux', ['-L', name, 'capture-pane', '-p', ...(colours ? ['-e'] : []), '-t', name], { encoding: 'utf8' });
    return screen.includes('__done__');
  }, 'the command to finish in tmux');
  return screen.slice(0, screen.indexOf('__done__')).replace(/\s+$/, '\n');
}

// The first screen a person sees of `cronguard ARGS | less` in a WIDTHxHEIGHT terminal: what
// a long output shows before anyone scrolls.
export async function firstPage(args: readonly string[], env: NodeJS.ProcessEnv, width = 80, height = 24): Promise<string> {
  const name = `cg-${randomBytes(4).toString('hex')}`;
  sessions.push(name);
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = `${[process.execPath, BINARY, ...args].map(quote).join(' ')} | less`;
  execFileSync('tmux', ['-L', name, '-u', 'new-session', '-d', '-s', name, '-x', String(width), '-y', String(height), '-e', 'LESS=', command], {
    env: { ...env, TERM: 'xterm-256color' },
  });
  let screen = '';
  // less draws the page, then its prompt (':') on the last line.
  await waitFor(() => {
    screen = execFileSync('tmux', ['-L', name, 'capture-pane', '-p', '-t', name], { encoding: 'utf8' });
    return /\n:\s*$/.test(screen);
  }, 'less to show the first page');
  return screen.replace(/\n:\s*$/, '\n');
}
