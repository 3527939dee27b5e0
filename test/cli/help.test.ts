import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { firstPage, HAVE_TMUX } from '../tmux.js';

const SUBCOMMANDS = ['status', 'history', 'logs', 'check', 'metrics', 'prune', 'request', 'requests', 'disable', 'enable', 'schedule', 'locks', 'migrate', 'serve', 'stop'];

describe('help and usage', () => {
  it.each([[['help']], [['--help']], [['run', '--help']], [['help', 'run']]])('%j prints the usage on stdout, exit 0', async (args) => {
    const result = await cronguard(args, sandbox().env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^Usage: cronguard \[run\] \[options\]/);
  });

  it('--help lists every subcommand', async () => {
    const { stdout } = await cronguard(['--help'], sandbox().env);
    const listed = stdout.slice(stdout.indexOf('Subcommands (')).match(/^ {2}[a-z]+/gm)?.map((s) => s.trim()) ?? [];
    expect(new Set([...listed, 'enable'])).toEqual(new Set(SUBCOMMANDS));
  });

  it('its first 80x24 screen holds the options most crontab lines need and every subcommand', async () => {
    const { stdout } = await cronguard(['--help'], sandbox().env);
    const screen = stdout.split('\n').slice(0, 24).join('\n');
    for (const option of ['--name', '--timeout', '--quiet', '--wait', '--db', '--min-interval', '--every']) expect(screen).toContain(option);
    const names = screen.slice(screen.indexOf('Subcommands:')).split(/\s+/);
    expect(SUBCOMMANDS.filter((name) => !names.includes(name))).toEqual([]);
    // Then every option, by group, each group under its heading.
    for (const heading of ['The lock:', 'Timing and retries:', 'Output and outcome:', 'The run log:', 'Alerts and monitoring:', 'A fleet (PostgreSQL, MySQL/MariaDB):']) {
      expect(stdout.slice(screen.length)).toContain(`\n${heading}\n`);
    }
  });

  it.skipIf(!HAVE_TMUX)('cronguard --help | less in an 80x24 terminal (tmux) shows those options and every subcommand first', async () => {
    const page = await firstPage(['--help'], sandbox().env);
    expect(page.split('\n').length).toBeLessThanOrEqual(24);
    expect(page).toMatch(/^Usage: cronguard \[run\]/);
    for (const option of ['--name', '--timeout', '--quiet', '--wait', '--db']) expect(page).toContain(option);
    const names = page.slice(page.indexOf('Subcommands:')).split(/\s+/);
    expect(SUBCOMMANDS.filter((name) => !names.includes(name))).toEqual([]);
  });

  it.each(SUBCOMMANDS)('`cronguard help %s` is that subcommand\'s own --help', async (name) => {
    const viaHelp = await cronguard(['help', name], sandbox().env);
    const direct = await cronguard([name, '--help'], sandbox().env);
    expect(viaHelp).toMatchObject({ code: 0, stderr: '' });
    expect(viaHelp.stdout).toMatch(new RegExp(`^Usage: cronguard ${name} `));
    expect(viaHelp.stdout).toBe(direct.stdout);
  });

  it('refuses help for something that is not a subcommand', async () => {
    const result = await cronguard(['help', 'frobnicate'], sandbox().env);
    expect(result).toMatchObject({ code: 64, stdout: '', stderr: "cronguard: help: no subcommand 'frobnicate' (see cronguard --help)\n" });
    // Nor is a name every object inherits: once an internal error (70).
    expect(await cronguard(['help', 'constructor'], sandbox().env)).toMatchObject({ code: 64, stderr: "cronguard: help: no subcommand 'constructor' (see cronguard --help)\n" });
    const box = sandbox();
    // `cronguard constructor` is a run of a command of that name, which does not exist.
    const run = await cronguard(['constructor'], box.env);
    expect(run.code).toBe(127);
    expect(run.stderr).toMatch(/command not found: constructor/);
    expect(run.stderr).not.toMatch(/internal error|\n\s+at /);
  });

  it.each([[[]], ...SUBCOMMANDS.map((s) => [[s, '--help']])])('%j fits 80 columns', async (args) => {
    const result = await cronguard(args.length ? args : ['--help'], sandbox().env);
    const wide = `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.length > 80);
    expect(wide).toEqual([]);
  });

  it('refuses an all-digit job name, which would read as a run id', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', '2024', '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: job name '2024' is all digits, which reads as a run id; add a letter/);
  });
});
