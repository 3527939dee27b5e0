import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Finished, ROOT, runFile as run, sandbox } from './helpers.js';
import { TestHost } from './lock/users.js';

// install.sh builds in its own directory, so it runs on a copy of the project: rebuilding
// this dist/ would take the binary away from the tests running alongside.
function projectCopy(dir: string): string {
  const copy = join(dir, 'project');
  mkdirSync(copy);
  for (const entry of readdirSync(ROOT)) {
    if (['node_modules', 'dist', 'test', '.git'].includes(entry)) continue;
    cpSync(join(ROOT, entry), join(copy, entry), { recursive: true });
  }
  // Hard links are quick, and install.sh only reads node_modules when it is complete (else
  // `npm ci` replaces it, which unlinks rather than writes).
  const modules = [join(ROOT, 'node_modules'), join(copy, 'node_modules')];
  try {
    execFileSync('cp', ['-al', ...modules]);
  } catch {
    execFileSync('cp', ['-R', ...modules]);
  }
  return copy;
}

// Every path under root, directories with a trailing slash.
function tree(root: string, under = ''): string[] {
  return readdirSync(join(root, under))
    .sort()
    .flatMap((name) => {
      const path = join(under, name);
      return statSync(join(root, path)).isDirectory() ? [`${path}/`, ...tree(root, path)] : [path];
    });
}

async function install(project: string, env: NodeJS.ProcessEnv): Promise<void> {
  const result = await run(join(project, 'install.sh'), [], env);
  expect(result.code, result.stderr).toBe(0);
}

const uninstall = (project: string, env: NodeJS.ProcessEnv) => run(join(project, 'install.sh'), ['--uninstall'], env);
const said = (result: Finished) => result.stderr.split('\n').filter(Boolean);
// cronguard(1), a page per subcommand, cronguard.conf(5): said in one line when removed.
const MAN_PAGES = readdirSync(join(ROOT, 'man')).length;

describe('install.sh given arguments it does not know', () => {
  it.each([
    [['--prefix=/opt'], 'install.sh: unknown argument: --prefix=/opt (use --uninstall or nothing)'],
    [['--uninstall', '--force'], 'install.sh: unknown arguments: --force (--uninstall takes only --purge)'],
    [['--uninstall', '--purge', 'now'], 'install.sh: unknown arguments: --purge now (--uninstall takes only --purge)'],
    [['--purge'], 'install.sh: unknown argument: --purge (use --uninstall or nothing)'],
  ])('%j: one line, exit 1, nothing installed or removed', async (args, line) => {
    const box = sandbox();
    const root = box.path('root');
    mkdirSync(join(root, 'opt/cg/bin'), { recursive: true });
    writeFileSync(join(root, 'opt/cg/bin/cronguard'), 'installed before\n');
    const result = await run(join(ROOT, 'install.sh'), args, { ...process.env, DESTDIR: root, PREFIX: '/opt/cg' });
    expect(result).toMatchObject({ code: 1, stdout: '', stderr: `${line}\n` });
    expect(tree(root)).toEqual(['opt/', 'opt/cg/', 'opt/cg/bin/', 'opt/cg/bin/cronguard']);
    expect(readFileSync(join(root, 'opt/cg/bin/cronguard'), 'utf8')).toBe('installed before\n');
  });
});

// Each test builds and copies the runtime dependencies, twice over for the first: minutes on
// a loaded machine.
describe('install.sh --uninstall', () => {
  it('removes what it installed and the directories it created, keeps the rest, and says so', async () => {
    const box = sandbox();
    const project = projectCopy(box.dir);
    const root = box.path('root');
    const prefix = join(root, 'opt/cg');
    const at = (path: string) => join(prefix, path);
    // Already there: a bin/ with someone else's tool in it, and an empty share/.
    mkdirSync(at('bin'), { recursive: true });
    writeFileSync(at('bin/other-tool'), '');
    mkdirSync(at('share'));
    const before = tree(root);
    const env = { ...process.env, DESTDIR: root, PREFIX: '/opt/cg' };

    // Twice: the second install must still know which directories the first one created.
    await install(project, env);
    await install(project, env);
    expect(tree(root)).toEqual(
      expect.arrayContaining(['opt/cg/bin/cronguard', 'opt/cg/lib/cronguard/dist/cronguard.cjs', 'opt/cg/share/man/man1/cronguard.1', 'opt/cg/share/man/man1/cronguard-serve.1', 'opt/cg/share/man/man5/cronguard.conf.5']),
    );
    // man finds each page: the run line's, a subcommand's, the configuration file's.
    for (const page of [['cronguard'], ['cronguard-serve'], ['cronguard-enable'], ['5', 'cronguard.conf']]) {
      expect(await run('man', ['-w', ...page], { ...box.env, MANPATH: at('share/man') }), page.join(' ')).toMatchObject({ code: 0 });
    }
    // The installed launcher hands NODE_EXTRA_CA_CERTS over as the development one does
    // (test/run/extra-ca.test.ts runs that one).
    const handOver = /^if \[ -n "\$\{NODE_EXTRA_CA_CERTS-\}" \]; then\n[\s\S]*?\nfi\n/m;
    expect(readFileSync(at('bin/cronguard'), 'utf8').match(handOver)?.[0]).toBe(readFileSync(join(ROOT, 'bin/cronguard'), 'utf8').match(handOver)?.[0] ?? 'missing');
    const staged = await run(process.execPath, [at('lib/cronguard/dist/cronguard.cjs'), '-n', 'demo', '--', 'echo', 'hi'], box.env);
    expect(staged).toMatchObject({ code: 0, stdout: 'hi\n', stderr: '' });
    // install.sh made the code cache for the files as installed.
    const verbose = await run(process.execPath, [at('lib/cronguard/dist/cronguard.cjs'), '-v', '-n', 'demo', '--', 'true'], box.env);
    expect(verbose.stderr).toMatch(/code cache: [1-9]\d* files compiled from it, 0 rejected by V8, 0 without one/);

    const removed = await uninstall(project, env);
    expect(removed).toMatchObject({ code: 0, stdout: '' });
    expect(said(removed)).toEqual([
      `install.sh: removed ${at('bin/cronguard')}`,
      `install.sh: removed ${MAN_PAGES} man pages from ${at('share/man')}`,
      `install.sh: removed ${at('lib/cronguard')}`,
      `install.sh: removed ${at('share/man/man5')}`,
      `install.sh: removed ${at('share/man/man1')}`,
      `install.sh: removed ${at('share/man')}`,
      `install.sh: removed ${at('lib')}`,
    ]);
    expect(tree(root)).toEqual(before);

    const again = await uninstall(project, env);
    expect(again).toMatchObject({ code: 0, stdout: '' });
    expect(said(again)).toEqual([`install.sh: nothing to remove in ${prefix}`]);
  }, 300_000);

  it('leaves an empty staging root when it created the whole prefix', async () => {
    const box = sandbox();
    const project = projectCopy(box.dir);
    const root = box.path('root');
    mkdirSync(root);
    const env = { ...process.env, DESTDIR: root, PREFIX: '/opt/cronguard' };
    await install(project, env);
    const removed = await uninstall(project, env);
    expect(removed).toMatchObject({ code: 0, stdout: '' });
    const at = (path: string) => join(root, path);
    expect(said(removed)).toEqual([
      `install.sh: removed ${at('opt/cronguard/bin/cronguard')}`,
      `install.sh: removed ${MAN_PAGES} man pages from ${at('opt/cronguard/share/man')}`,
      `install.sh: removed ${at('opt/cronguard/lib/cronguard')}`,
      `install.sh: removed ${at('opt/cronguard/share/man/man5')}`,
      `install.sh: removed ${at('opt/cronguard/share/man/man1')}`,
      `install.sh: removed ${at('opt/cronguard/share/man')}`,
      `install.sh: removed ${at('opt/cronguard/share')}`,
      `install.sh: removed ${at('opt/cronguard/lib')}`,
      `install.sh: removed ${at('opt/cronguard/bin')}`,
      `install.sh: removed ${at('opt/cronguard')}`,
      `install.sh: removed ${at('opt')}`,
    ]);
    expect(tree(root)).toEqual([]);
  }, 300_000);
});

// A real install as root: in a host of its own (test/lock/users.ts), whose /etc takes the
// group and the tmpfiles rule and whose /run/lock and /var/lib start empty.
describe.skipIf(process.geteuid?.() !== 0)('install.sh as root, without DESTDIR', () => {
  it('creates the cronguard group, root:cronguard 3770 directories and a tmpfiles rule; a member then shares root\'s lock', async () => {
    const box = sandbox();
    const project = projectCopy(box.dir);
    const host = new TestHost();
    try {
      const prefix = join(host.dir, 'prefix');
      // A host without /etc/tmpfiles.d: install.sh makes it, and --uninstall removes it.
      host.sh('rm -rf /etc/tmpfiles.d');
      const installed = host.sh(`cd ${project} && PREFIX=${prefix} ./install.sh 2>&1`);
      expect(installed).toContain("install.sh: as root, also for the whole system: the group cronguard, root's /run/lock/cronguard and /var/lib/cronguard shared with it, and /etc/tmpfiles.d/cronguard.conf (--uninstall removes the rule, --uninstall --purge the rest)\n");
      expect(installed).toContain('install.sh: created the group cronguard: its members share root\'s locks and run log (usermod -aG cronguard USER)');
      expect(host.sh('getent group cronguard')).toMatch(/^cronguard:x:\d+:\n$/);
      expect(host.sh('stat -c "%a %U %G" /run/lock/cronguard /var/lib/cronguard')).toBe('3770 root cronguard\n3770 root cronguard\n');
      expect(host.sh('cat /etc/tmpfiles.d/cronguard.conf')).toMatch(/\nd \/run\/lock\/cronguard 3770 root cronguard -\n$/);
      // Again: nothing new to create, nothing said of the group.
      expect(host.sh(`cd ${project} && PREFIX=${prefix} ./install.sh 2>&1`)).not.toContain('created the group');

      const alice = host.addUser('cg-alice', 61001, true);
      host.sh('usermod -aG cronguard cg-alice');
      expect(host.shAs(alice, `${prefix}/bin/cronguard -n shared -- true`)).toBe('exit 0\n');
      expect(host.sh('stat -c "%a %U %G" /run/lock/cronguard/shared.lock')).toBe('660 cg-alice cronguard\n');

      const removed = host.sh(`cd ${project} && PREFIX=${prefix} ./install.sh --uninstall 2>&1`);
      expect(removed).toContain('install.sh: removed /etc/tmpfiles.d/cronguard.conf\n');
      expect(removed).toContain('install.sh: removed /etc/tmpfiles.d\n');
      expect(host.sh('ls -d /etc/tmpfiles.d 2>&1 || true')).toContain('No such file');
      expect(removed).toContain('install.sh: kept the group cronguard, /run/lock/cronguard and /var/lib/cronguard');
      expect(host.sh('ls /var/lib/cronguard')).toContain('cronguard.db');

      // Asked for: the run log, the lock directory and the group go too.
      const purged = host.sh(`cd ${project} && PREFIX=${prefix} ./install.sh --uninstall --purge 2>&1`);
      expect(purged).toContain('install.sh: removed /var/lib/cronguard\n');
      expect(purged).toContain('install.sh: removed /run/lock/cronguard\n');
      expect(purged).toContain('install.sh: removed the group cronguard\n');
      expect(host.sh('getent group cronguard || echo none; ls /var/lib /run/lock')).not.toContain('cronguard');
    } finally {
      host.close();
    }
  }, 300_000);
});
