import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, fixture, lines, runFile, runs, sandbox } from '../helpers.js';

// Bytes that are not UTF-8 (here "café.csv" in Latin-1) cannot be handed to cronguard by
// Node's spawn, which takes text: a shell makes them, then runs cronguard with them.
const LATIN1 = `"$(printf 'caf\\351.csv')"`;
function viaShell(script: string, env: NodeJS.ProcessEnv) {
  return runFile('/bin/sh', ['-c', script, 'sh', process.execPath, BINARY], env);
}

describe('arguments and environment that are not UTF-8', () => {
  it("refuses the command's own argument that is not UTF-8 (64, one line) and runs nothing", async () => {
    const box = sandbox();
    const result = await viaShell(`exec "$1" "$2" -- ${fixture('args.sh')} ${box.path('log')} ${LATIN1}`, box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toBe(
      "cronguard: argument 4 ('caf\\xe9.csv') is not valid UTF-8, and cronguard passes what it is given on unchanged or not at all; nothing ran (with -c, printf can make the bytes; see man cronguard)\n",
    );
    expect(lines(box.path('log'))).toEqual([]);
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('refuses a request whose arguments are not UTF-8, and records nothing', async () => {
    const box = sandbox();
    const result = await viaShell(`exec "$1" "$2" request job -- ${LATIN1}`, box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: argument 4 \('caf\\xe9\.csv'\) is not valid UTF-8[^\n]*\n$/);
    expect(await cronguard(['requests', '--json'], box.env)).toMatchObject({ stdout: '[]\n' });
  });

  it('refuses to run a command whose environment holds a value that is not UTF-8 (64, one line)', async () => {
    const box = sandbox();
    const result = await viaShell(`FILE=${LATIN1} exec "$1" "$2" -- touch ${box.path('ran')}`, box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toBe(
      'cronguard: the environment variable FILE is not valid UTF-8, and cronguard passes what it is given on unchanged or not at all; nothing ran (unset it for cronguard: env -u FILE cronguard ...)\n',
    );
    expect(lines(box.path('ran'))).toEqual([]);
  });

  it('passes UTF-8, U+FFFD itself included, on byte for byte; the -c recipe makes other bytes', async () => {
    const box = sandbox();
    const out = box.path('out');
    const utf8 = await cronguard(['--', 'sh', '-c', `printf %s "$1" | od -An -tx1 > ${out}`, 'sh', 'café \uFFFD'], { ...box.env, FILE: 'é' });
    expect(utf8).toMatchObject({ code: 0, stderr: '' });
    expect(lines(out).join(' ').trim().split(/\s+/)).toEqual(['63', '61', '66', 'c3', 'a9', '20', 'ef', 'bf', 'bd']);
    const recipe = await cronguard(['-c', `printf %s "$(printf 'caf\\351.csv')" | od -An -tx1 > ${out}`], box.env);
    expect(recipe).toMatchObject({ code: 0, stderr: '' });
    expect(lines(out).join(' ').trim().split(/\s+/)).toEqual(['63', '61', '66', 'e9', '2e', '63', '73', '76']);
  });
});
