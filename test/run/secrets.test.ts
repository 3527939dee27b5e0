import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { asNobody, BINARY, collected, cronguard, ROOT, runFile, runs, type Sandbox, sandbox, start, waitFor } from '../helpers.js';
import { serve } from '../serve/serve-helpers.js';

// The secret of these tests: long enough to be masked (see MIN_MASKED_LENGTH).
const SECRET = 'tok-9f8e7d6c5b4a';
const PLACEHOLDER = '(command not recorded)';

const servers: { close(): void }[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

// A Healthchecks stand-in that keeps every request's path and body.
async function pingServer() {
  const received: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(`${req.url} ${Buffer.concat(chunks).toString('utf8')}`);
      res.writeHead(200).end('OK');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/check`, received };
}

function envFile(box: Sandbox, text: string, mode = 0o600): string {
  const file = box.path('job.env');
  writeFileSync(file, text, { mode });
  return file;
}

// Every file under the state directory, byte for byte: the run log, its journal, live files.
function stateBytes(dir: string): string {
  let all = '';
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const path = join(dir, name);
    if (statSync(path).isFile()) all += readFileSync(path, 'latin1');
  }
  return all;
}

// What every reader shows of job `t`, run 1: the subcommands' text and JSON, and the web
// page's HTML and API.
async function everyView(box: Sandbox): Promise<string[]> {
  const texts: string[] = [];
  for (const args of [['history'], ['history', '--json'], ['logs', '1'], ['logs', 't'], ['status', 't'], ['status', '--json'], ['metrics']]) {
    const result = await cronguard(args, box.env);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
    texts.push(`${args.join(' ')}: ${result.stdout}${result.stderr}`);
  }
  const server = await serve(['-q'], box.env);
  for (const path of ['/', '/jobs/t', '/runs/1', '/api/jobs', '/api/jobs/t/runs', '/api/runs/1', '/metrics']) {
    const response = await server.get(path);
    expect(response.status, path).toBe(200);
    texts.push(`${path}: ${await response.text()}`);
  }
  return texts;
}

// A command that shows the secret (`value`, shell syntax) on both streams, says it has
// started, waits on a FIFO the test opens when it has looked at the running processes, then
// shows it again: split across two writes, and on a last line without a newline.
function holdingCommand(box: Sandbox, value: string): { script: string; started: string; fifo: string } {
  const started = box.path('started');
  const fifo = box.path('fifo');
  execFileSync('mkfifo', [fifo]);
  const script = `S=${value}; echo "out $S"; echo "err $S" >&2; : > ${started}; read x < ${fifo}; printf 'split %.4s' "$S"; sleep 0.2; printf '%s\\nlast %s' "\${S#????}" "$S"; exit 3`;
  return { script, started, fifo };
}

// Runs the holding command under cronguard, looks at cronguard's own argv and environment
// and follows it with logs -f while it runs, then lets it finish. Returns everything seen.
async function runHeld(box: Sandbox, args: readonly string[], command: { script: string; started: string; fifo: string }) {
  const run = start([...args, '-n', 't', '-c', command.script], box.env);
  await waitFor(() => statSync(command.started, { throwIfNoEntry: false }) !== undefined, 'the command to start');
  const pid = run.child.pid as number;
  const own = [readFileSync(`/proc/${pid}/cmdline`, 'utf8'), readFileSync(`/proc/${pid}/environ`, 'utf8')];
  await waitFor(() => runs(box.stateDir)[0]?.child_pid != null, 'the child pid to be recorded');
  const row = runs(box.stateDir)[0];
  const childEnviron = readFileSync(`/proc/${row?.child_pid}/environ`, 'utf8');
  const follower = start(['logs', '-f', 't'], box.env);
  const followed = collected(follower);
  await waitFor(() => followed.stdout().includes('err '), 'logs -f to show the output so far');
  writeFileSync(command.fifo, 'go\n');
  const ran = await run.done;
  await follower.done;
  return { ran, own, childEnviron, followed: followed.stdout() + followed.stderr() };
}

describe('a secret kept in the env file', () => {
  it('reaches the command and nothing else: not ps, the run log, logs -f, the page, metrics or pings', async () => {
    const box = sandbox();
    const file = envFile(box, `# the job's credentials\nexport API_TOKEN="${SECRET}"\nVERBOSE=1\n`);
    const ping = await pingServer();
    const held = holdingCommand(box, '"$API_TOKEN"');
    const { ran, own, childEnviron, followed } = await runHeld(box, ['--env-file', file, '--ping-url', ping.url], held);

    expect(ran.code).toBe(3);
    // The command had it, and showed it: everywhere it shows as ***.
    expect(childEnviron).toContain(`API_TOKEN=${SECRET}\0`);
    expect(childEnviron).toContain('VERBOSE=1\0');
    expect(ran.stdout).toBe('out ***\nsplit ***\nlast ***');
    expect(ran.stderr).toMatch(/^err \*\*\*\ncronguard: t: failed with exit 3 after .* \(run 1; cronguard logs 1\)\n$/);
    expect(followed).toContain('split ***\n');
    const row = runs(box.stateDir)[0];
    expect(row?.output).toBe('out ***\nerr ***\nsplit ***\nlast ***');
    expect(ping.received.map((r) => r.split(' ')[0])).toEqual([expect.stringMatching(/^\/check\/start\?rid=/), expect.stringMatching(/^\/check\/fail\?rid=/)]);
    expect(ping.received[1]).toContain('last ***');
    const seen = [ran.stdout, ran.stderr, ...own, followed, ...ping.received, stateBytes(box.stateDir), ...(await everyView(box))];
    for (const text of seen) expect(text).not.toContain(SECRET);
    // Nor any part of it a cut could leave.
    for (const text of seen) expect(text).not.toMatch(/9f8e7d6c|tok-9f8e7/);
  });

  it('is refused, with one line and nothing run, unless it is a private regular file of the user or root', async () => {
    const box = sandbox();
    const ran = box.path('ran');
    const refused = async (file: string, code: number, line: RegExp) => {
      const result = await cronguard(['--env-file', file, '-n', 't', '--', 'touch', ran], box.env);
      expect(result.stderr).toMatch(line);
      expect(result.stderr.split('\n')).toHaveLength(2);
      expect(result.code).toBe(code);
      expect(statSync(ran, { throwIfNoEntry: false })).toBeUndefined();
      expect(runs(box.stateDir)).toEqual([]);
    };
    const file = envFile(box, `TOKEN=${SECRET}\n`, 0o640);
    await refused(file, 77, /^cronguard: env file .*job\.env is readable by other users \(mode 640\); chmod 600 it\n$/);
    writeFileSync(file, `TOKEN=${SECRET}\n`, { mode: 0o644 });
    execFileSync('chmod', ['644', file]);
    await refused(file, 77, /^cronguard: env file .*job\.env is readable by other users \(mode 644\); chmod 600 it\n$/);
    execFileSync('chmod', ['620', file]);
    await refused(file, 77, /^cronguard: env file .*job\.env is writable by other users \(mode 620\); chmod 600 it\n$/);
    execFileSync('chmod', ['600', file]);
    if (process.geteuid?.() === 0) {
      execFileSync('chown', ['nobody', file]);
      await refused(file, 77, /^cronguard: env file .*job\.env belongs to another user \(uid 65534\); it must be yours or root's\n$/);
      execFileSync('chown', ['root', file]);
      // Root's private file, to another user: they cannot read it.
      const denied = await start(['--env-file', file, '-n', 't', '--', 'touch', ran], box.env, asNobody).done;
      expect(denied.stderr).toMatch(/^cronguard: env file: permission denied on .*job\.env\n$/);
      expect(denied.code).toBe(77);
      expect(statSync(ran, { throwIfNoEntry: false })).toBeUndefined();
    }
    execFileSync('ln', ['-s', file, box.path('link.env')]);
    await refused(box.path('link.env'), 64, /^cronguard: env file: .*link\.env is a symbolic link; give the file itself \(see cronguard --help\)\n$/);
    await refused(box.path('missing.env'), 64, /^cronguard: env file: cannot read .*missing\.env \(it does not exist\) \(see cronguard --help\)\n$/);
    mkdirSync(box.path('dir.env'), { mode: 0o700 });
    await refused(box.path('dir.env'), 64, /^cronguard: env file: .*dir\.env is not a regular file \(see cronguard --help\)\n$/);
    execFileSync('mkfifo', ['-m', '600', box.path('fifo.env')]);
    await refused(box.path('fifo.env'), 64, /^cronguard: env file: .*fifo\.env is not a regular file \(see cronguard --help\)\n$/);
    // A malformed line is named by its number, never quoted: it may hold a secret.
    const bad: [string, RegExp][] = [
      [`A=1\n${SECRET}\n`, /job\.env:2: expected KEY=VALUE/],
      [`1TOKEN=${SECRET}\n`, /job\.env:1: the key is not a variable name \(letters, digits and _, not starting with a digit\)/],
      [`\n\nTOKEN="${SECRET}\nmore\n`, /job\.env:3: the value's opening " is never closed/],
      [`TOKEN='${SECRET}' trailing\n`, /job\.env:1: unexpected text after the closing ' \(put a comment after ' #'\)/],
    ];
    for (const [text, line] of bad) {
      writeFileSync(file, text);
      await refused(file, 64, new RegExp(`^cronguard: .*${line.source} \\(see cronguard --help\\)\\n$`));
      const result = await cronguard(['--env-file', file, '--', 'true'], box.env);
      expect(result.stderr).not.toContain(SECRET);
    }
  });

  it('reaches cronguard through the launcher, not node: node 20 would take a missing --env-file for its own (exit 9)', async () => {
    const box = sandbox();
    const result = await runFile(join(ROOT, 'bin', 'cronguard'), ['--env-file', box.path('missing.env'), '--', 'true'], box.env);
    expect(result).toMatchObject({ code: 64, stderr: expect.stringMatching(/^cronguard: env file: cannot read .*missing\.env \(it does not exist\) \(see cronguard --help\)\n$/) });
  });

  it('is read as dotenv: quotes, escapes, comments, export; over cronguard\'s own environment, under its own variables', async () => {
    const box = sandbox();
    const bin = box.path('bin');
    mkdirSync(bin);
    // Into a file of its own: on the way through cronguard, the values are masked.
    const shownFile = box.path('shown');
    writeFileSync(join(bin, 'show-env'), `#!/bin/sh\nfor v in PLAIN SINGLE DOUBLE MULTI HASH EMPTY FROM_CALLER CRONGUARD_PID; do eval "printf '%s=[%s]\\\\n' $v \\"\\$$v\\""; done > ${shownFile}\n`, { mode: 0o755 });
    const file = envFile(
      box,
      [
        '# comment',
        '',
        '  export PLAIN =  plain value   # a comment',
        "SINGLE='lit\\n $HOME #x'",
        'DOUBLE="a\\"b\\\\c\\td"  # after',
        'MULTI="first',
        'second"',
        'HASH=ab#cd',
        'EMPTY=',
        'FROM_CALLER=from-file',
        'CRONGUARD_PID=1',
        `PATH=${bin}:/usr/bin:/bin`,
        '',
      ].join('\r\n'),
    );
    // PATH from the file finds the program: the command's environment, not cronguard's.
    const result = await cronguard(['--env-file', file, '--', 'show-env'], { ...box.env, FROM_CALLER: 'from-caller' });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const shown = readFileSync(shownFile, 'utf8').replace(/CRONGUARD_PID=\[\d+\]/, 'CRONGUARD_PID=[N]');
    expect(shown).toBe(
      'PLAIN=[plain value]\nSINGLE=[lit\\n $HOME #x]\nDOUBLE=[a"b\\c\td]\nMULTI=[first\nsecond]\nHASH=[ab#cd]\nEMPTY=[]\nFROM_CALLER=[from-file]\nCRONGUARD_PID=[N]\n',
    );
    expect(shown).not.toContain('CRONGUARD_PID=[1]');
  });

  it('masks values of six characters or more, not 1, true or prod', async () => {
    const box = sandbox();
    const file = envFile(box, 'DEBUG=1\nFLAG=true\nSTAGE=prod\nKEY=abcdef\n');
    const result = await cronguard(['--env-file', file, '-n', 't', '-c', 'echo "$DEBUG $FLAG $STAGE $KEY"'], box.env);
    expect(result.stdout).toBe('1 true prod ***\n');
    expect(runs(box.stateDir)[0]?.output).toBe('1 true prod ***\n');
  });

  it('comes from the configuration file too (env_file), a flag overriding it', async () => {
    const box = sandbox();
    const file = envFile(box, `TOKEN=${SECRET}\n`);
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), `env_file = ${file}\n`, { mode: 0o600 });
    const result = await cronguard(['-n', 't', '-c', 'echo "[$TOKEN]"'], box.env);
    expect(result.stdout).toBe('[***]\n');
    const other = box.path('other.env');
    writeFileSync(other, 'TOKEN=from-the-flag\n', { mode: 0o600 });
    const flagged = await cronguard(['--env-file', other, '-n', 't', '-c', 'echo "[$TOKEN]" | tr - _'], box.env);
    expect(flagged.stdout).toBe('[from_the_flag]\n');
  });
});

describe('--redact REGEX', () => {
  it('masks its matches in the recorded command, the output, logs -f, the page, metrics and pings', async () => {
    const box = sandbox();
    const ping = await pingServer();
    const held = holdingCommand(box, `'${SECRET}'`);
    const { ran, followed } = await runHeld(box, ['--redact', 'tok-[0-9a-f]+', '--redact', 'never-seen', '--ping-url', ping.url], held);
    expect(ran.code).toBe(3);
    expect(ran.stdout).toBe('out ***\nsplit ***\nlast ***');
    expect(ran.stderr).toMatch(/^err \*\*\*\ncronguard: t: failed with exit 3/);
    const row = runs(box.stateDir)[0];
    expect(row?.command).toMatch(/^\/bin\/sh -c 'S='\\''\*\*\*'\\''; echo "out \$S"/);
    expect(row?.output).toBe('out ***\nerr ***\nsplit ***\nlast ***');
    expect(ping.received[1]).toContain('last ***');
    // (cronguard's own argv holds the pattern's match: it was given on the command line.)
    for (const text of [ran.stdout, ran.stderr, followed, ...ping.received, stateBytes(box.stateDir), ...(await everyView(box))]) expect(text).not.toContain(SECRET);
  });

  it('masks what -q replays, a last line without its newline, output that is not UTF-8, and with --capture 0', async () => {
    const box = sandbox();
    const script = `printf 'a ${SECRET}\\n\\377 ${SECRET} \\376\\n'; printf 'no newline ${SECRET}' >&2; exit 1`;
    const quiet = await cronguard(['-q', '--redact', 'tok-\\w+', '-n', 'q', '-c', script], box.env);
    expect(Buffer.from(quiet.stdout, 'latin1').includes(Buffer.from(SECRET))).toBe(false);
    expect(quiet.stderr).toMatch(/^no newline \*\*\*\ncronguard: q: failed/);
    const raw = spawnSync(process.execPath, ['--', BINARY, '--capture', '0', '--redact', 'tok-\\w+', '-n', 'c', '-c', script], { env: box.env, cwd: box.dir }).stdout;
    expect(raw).toEqual(Buffer.from('a ***\n\xff *** \xfe\n', 'latin1'));
    expect(runs(box.stateDir).find((r) => r.job === 'q')?.output).toContain('no newline ***');
  });

  it('refuses a pattern that does not compile, or matches nothing but the empty string, before anything runs', async () => {
    const box = sandbox();
    const ran = box.path('ran');
    const cases: [string[], RegExp][] = [
      [['--redact', 'tok-('], /^cronguard: --redact: 'tok-\(' is not a valid regular expression \(Unterminated group\) \(see cronguard --help\)\n$/],
      [['--redact', 'x*'], /^cronguard: --redact: 'x\*' matches the empty string; give a pattern that matches only what to mask \(see cronguard --help\)\n$/],
      [['--record-command', 'maybe'], /^cronguard: --record-command: 'maybe' is not on or off \(see cronguard --help\)\n$/],
    ];
    for (const [args, line] of cases) {
      const result = await cronguard([...args, '--', 'touch', ran], box.env);
      expect(result.stderr).toMatch(line);
      expect(result.code).toBe(64);
    }
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), 'redact = fine\nredact = [unclosed\n', { mode: 0o600 });
    const fromFile = await cronguard(['--', 'touch', ran], box.env);
    expect(fromFile.stderr).toMatch(/^cronguard: .*config:2: redact: '\[unclosed' is not a valid regular expression \(Unterminated character class\) \(see cronguard --help\)\n$/);
    expect(fromFile.code).toBe(64);
    expect(statSync(ran, { throwIfNoEntry: false })).toBeUndefined();
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('adds up from the configuration file\'s redact lines, $CRONGUARD_REDACT and the flags', async () => {
    const box = sandbox();
    mkdirSync(join(box.dir, 'config', 'cronguard'), { recursive: true });
    writeFileSync(join(box.dir, 'config', 'cronguard', 'config'), 'redact = alpha\\d+\nredact = "beta #x"  # quoted, for its #\n', { mode: 0o600 });
    const result = await cronguard(['--redact', 'delta', '-n', 'r', '-c', 'echo alpha12 "beta #x" gamma delta'], { ...box.env, CRONGUARD_REDACT: 'gamma' });
    expect(result.stdout).toBe('*** *** *** ***\n');
    expect(runs(box.stateDir)[0]?.command).toBe("/bin/sh -c 'echo *** \"***\" *** ***'");
  });
});

describe('--record-command off', () => {
  it('keeps the command line out of the run log, the readers, the page and pings', async () => {
    const box = sandbox();
    const ping = await pingServer();
    const marker = 'argv-marker-31337';
    const result = await cronguard(['--record-command', 'off', '--ping-url', ping.url, '-n', 't', '--', 'sh', '-c', `echo ran; exit 0 # ${marker}`], box.env);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('ran\n');
    expect(runs(box.stateDir)[0]?.command).toBe(PLACEHOLDER);
    const views = await everyView(box);
    expect(views.find((v) => v.startsWith('history:'))).toContain(PLACEHOLDER);
    expect(views.find((v) => v.startsWith('/runs/1:'))).toContain(PLACEHOLDER);
    expect(views.find((v) => v.startsWith('/jobs/t:'))).toContain(PLACEHOLDER);
    for (const text of [...views, ...ping.received, stateBytes(box.stateDir)]) expect(text).not.toContain(marker);
    // A command that cannot start is recorded without its name too.
    const missing = await cronguard(['--record-command', 'off', '-n', 'm', '--', `/no/such/${marker}`], box.env);
    expect(missing.code).toBe(127);
    expect(runs(box.stateDir).find((r) => r.job === 'm')).toMatchObject({ command: PLACEHOLDER, error: `command not found: ${PLACEHOLDER}` });
    expect(stateBytes(box.stateDir)).not.toContain(marker);
  });
});
