// Writes docs/troubleshooting.md: every one-line error cronguard throws with its message
// written out where it is thrown, grouped by exit code, from the source itself; test/docs
// fails when the page and the source disagree. `node scripts/troubleshooting.mjs` rewrites it;
// with --print it prints the page instead, for the test.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// Each typed error's exit code and what the group means, with the fix that most of its
// lines share.
const GROUPS = [
  ['UsageError', 64, 'A usage error', 'Nothing ran. The line names the option, setting or file that is wrong and what it takes; `cronguard --help` and `man cronguard` have every option.'],
  ['UnavailableError', 69, 'Something cronguard needs cannot be reached', 'Nothing ran, or (a subcommand) nothing was read. A database that is down, a URL that names the wrong host or port, a replica where the primary is needed, a native addon built for another Node.js. Fix what the line names and run again; a run recorded meanwhile waits in the spool.'],
  ['CantCreateError', 73, 'A lock or state file cannot be made', 'Nothing ran. A directory that does not exist and cannot be made, a full disk, or a symlink where a lock file should be.'],
  ['PermissionError', 77, 'Permission refused', 'Nothing ran. A lock file or directory of another user, a configuration or env file others may write, or a database role without a privilege: the line names which, and [locks](locks.md) and the fleet pages say who may share what.'],
  ['NotFoundError', 1, 'Not there', 'A subcommand was asked for something the run log does not have: a run id, a job, a request.'],
];

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

// The literal first argument at `at` (a template, or a quoted string), with each
// interpolation as an ellipsis; null when it is not written out there.
function literal(text, at) {
  const quote = text[at];
  if (quote === "'" || quote === '"') {
    let out = '';
    for (let i = at + 1; i < text.length; i++) {
      if (text[i] === '\\') out += text[++i];
      else if (text[i] === quote) return out;
      else out += text[i];
    }
    return null;
  }
  if (quote !== '`') return null;
  let out = '';
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] === '\\') out += text[++i];
    else if (text[i] === '`') return out;
    else if (text[i] === '$' && text[i + 1] === '{') {
      let depth = 0;
      for (i += 1; i < text.length; i++) {
        if (text[i] === '{') depth++;
        else if (text[i] === '}' && --depth === 0) break;
      }
      out += '…';
    } else out += text[i];
  }
  return null;
}

// Every message of each group, in source order, without repeats.
function errorLines() {
  const found = new Map(GROUPS.map(([name]) => [name, []]));
  for (const file of sources(join(ROOT, 'src')).sort()) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/new (UsageError|UnavailableError|CantCreateError|PermissionError|NotFoundError)\(\s*/g)) {
      const message = literal(text, (m.index ?? 0) + m[0].length);
      const list = found.get(m[1]);
      if (message && !list.some((l) => l.message === message)) list.push({ message, file: relative(ROOT, file) });
    }
  }
  return found;
}

function page() {
  const lines = [
    '# Troubleshooting: every error line, by exit code',
    '',
    '*cronguard printed one line and exited: what does it mean, and what do I do?*',
    '',
    '[cronguard](../README.md) · [all pages](../README.md#documentation)',
    '',
    'cronguard ends every problem of its own with one line on stderr, `cronguard: ` (or',
    '`cronguard SUBCOMMAND: `) and what is wrong, most often with what to do after a colon or',
    'a semicolon. The lines below are generated from the source (`node',
    'scripts/troubleshooting.mjs`): each one whose text is written out where it is thrown, `…`',
    'standing for what the line fills in (a path, a value, a server). Exit codes the command',
    'itself decides (its own, 124, 128+N) are in [exit codes](exit-codes.md).',
    '',
    '**75, the lock was lost**, has no line of its own here: the run ends with its summary',
    '(`lock lost (…)`), recorded `lock_lost`. The database lock\'s connection was cut, or a',
    'lease could not be renewed in time; see [guarantees](guarantees.md) and',
    '[PostgreSQL: leases](postgres-ha.md). **70** is a bug: its line says so; please report it.',
  ];
  const found = errorLines();
  for (const [name, code, title, fix] of GROUPS) {
    lines.push('', `## ${code}: ${title}`, '', fix, '');
    for (const { message } of found.get(name)) lines.push(`- ${message.replace(/([`*_|<>[\]])/g, '\\$1')}`);
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === '--print') process.stdout.write(page());
  else writeFileSync(join(ROOT, 'docs/troubleshooting.md'), page());
}
