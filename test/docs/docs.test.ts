import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { SETTING_ENV } from '../../src/cli/settings.js';
import { cronguard, ROOT, sandbox } from '../helpers.js';

// README.md and docs/: a front page and pages that answer one question each, whose examples
// cannot rot unseen (issue 38). Every block is run by a test or marked as an illustration in
// the page's source; every cronguard line in a block names options and subcommands that
// exist; every link lands on a file and a heading; every option of --help is documented.

const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const text = (page: string) => readFileSync(join(ROOT, page), 'utf8');

interface Block {
  readonly page: string;
  readonly line: number;
  readonly lang: string;
  readonly marker: string | null;
  readonly body: string;
}

// Fenced blocks (list items indent theirs), each with the HTML comment just above it.
function blocks(page: string): Block[] {
  const lines = text(page).split('\n');
  const found: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !(lines[end] as string).trimStart().startsWith('```')) end++;
    let above = i - 1;
    while (above >= 0 && (lines[above] as string).trim() === '') above--;
    const comment = /^\s*<!-- (.*) -->\s*$/.exec(lines[above] ?? '');
    found.push({ page, line: i + 1, lang: open[2] as string, marker: comment ? (comment[1] as string) : null, body: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return found;
}

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

function anchors(page: string): Set<string> {
  const found = new Set<string>();
  let fenced = false;
  for (const line of text(page).split('\n')) {
    if (line.trimStart().startsWith('```')) fenced = !fenced;
    const heading = /^#+ (.*)$/.exec(line);
    if (heading && !fenced) found.add(slug(heading[1] as string));
  }
  return found;
}

// Shell words, enough for the examples: quotes group, a # outside them ends the line.
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/'[^']*'|"(?:\\.|[^"])*"|#.*$|\S+/g)) {
    if (m[0].startsWith('#')) break;
    out.push(m[0]);
  }
  return out;
}

// Each cronguard invocation in a crontab or shell block: the words after `cronguard`.
function invocations(block: Block): string[][] {
  if (!['crontab', 'sh', ''].includes(block.lang)) return [];
  const found: string[][] = [];
  for (const line of block.body.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    const all = words(line);
    const at = all.findIndex((w) => /^(?:\S*\/)?cronguard$/.test(w));
    // Not the group or user of that name, nor a man page or a package.
    const before = all[at - 1] ?? '';
    if (at >= 0 && !before.startsWith('-') && !/^(man|npm|apt|which|chgrp|chown|groupadd|useradd|usermod|gpasswd)$/.test(before)) found.push(all.slice(at + 1));
  }
  return found;
}

let runHelp = '';
let subcommands: string[] = [];
const subHelp = new Map<string, string>();

beforeAll(async () => {
  const env = sandbox().env;
  runHelp = (await cronguard(['--help'], env)).stdout;
  subcommands = [...(runHelp.slice(runHelp.indexOf('Subcommands (')).match(/^ {2}[a-z]+/gm) ?? []).map((s) => s.trim()), 'enable'];
  for (const name of subcommands) subHelp.set(name, (await cronguard(['help', name], env)).stdout);
});

// The option words of one invocation that its --help does not know (a value that starts
// with a dash is not an option; none of the examples has one).
function unknownOptions(args: readonly string[]): string[] {
  const sub = subcommands.includes(args[0] ?? '') ? (args[0] as string) : null;
  const help = sub ? (subHelp.get(sub) as string) : runHelp;
  const options = sub ? args.slice(1) : args;
  const end = options.indexOf('--');
  return options
    .slice(0, end < 0 ? undefined : end)
    .filter((w) => /^--?[a-zA-Z]/.test(w))
    .map((w) => w.replace(/=.*$/, ''))
    .filter((w) => !new RegExp(`(^|[\\s,])${w.replace(/[-]/g, '\\-')}([\\s,=]|$)`, 'm').test(help));
}

describe('README and docs/', () => {
  it('README is a front page: at most 300 lines, set-up in its first 40', () => {
    const lines = text('README.md').split('\n');
    expect(lines.length).toBeLessThanOrEqual(300);
    const top = lines.slice(0, 40).join('\n');
    expect(top).toContain('./install.sh');
    expect(top).toContain('npm test');
  });

  it.each(PAGES.filter((p) => p.startsWith('docs/')))('%s is at most about 300 lines', (page) => {
    expect(text(page).split('\n').length).toBeLessThanOrEqual(310);
  });

  it('every block is run by a test or marked as an illustration', () => {
    const unmarked = PAGES.flatMap(blocks)
      .filter((b) => b.marker !== 'illustration' && !b.marker?.startsWith('tested: '))
      .map((b) => `${b.page}:${b.line}`);
    expect(unmarked).toEqual([]);
    // A block said to be tested names a test that reads that page.
    for (const block of PAGES.flatMap(blocks).filter((b) => b.marker?.startsWith('tested: '))) {
      const test = (block.marker as string).slice('tested: '.length);
      expect(text(test), `${block.page}:${block.line} names ${test}`).toContain(block.page);
    }
  });

  it('every cronguard line of an example names options and subcommands that exist', () => {
    const wrong = PAGES.flatMap(blocks).flatMap((block) =>
      invocations(block)
        .map((args) => ({ args, unknown: unknownOptions(args) }))
        .filter((i) => i.unknown.length > 0)
        .map((i) => `${block.page}:${block.line}: cronguard ${i.args.join(' ')}: ${i.unknown.join(', ')}`),
    );
    expect(wrong).toEqual([]);
  });

  it('every link lands on a file, and every #anchor on a heading of it', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const m of text(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] as string;
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const path = file === '' ? page : relative(ROOT, resolve(dirname(join(ROOT, page)), file));
        let exists = true;
        try {
          readFileSync(join(ROOT, path));
        } catch {
          exists = false;
        }
        if (!exists) broken.push(`${page}: ${target} (no file ${path})`);
        else if (anchor !== undefined && path.endsWith('.md') && !anchors(path).has(anchor)) broken.push(`${page}: ${target} (no heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every page is linked from the README', () => {
    const readme = text('README.md');
    expect(PAGES.filter((p) => p.startsWith('docs/') && !readme.includes(`(${p})`))).toEqual([]);
  });

  it('every option of --help is documented in docs/, and in the man page of its subcommand', () => {
    // The options a help lists, each on a line of its own (not those its prose names).
    const optionsOf = (help: string) => [...new Set([...help.matchAll(/^ {2}(?:-\w, )?(--[a-z][a-z-]+)/gm)].map((m) => m[1] as string))];
    const docs = PAGES.map(text).join('\n');
    const man = (page: string) => text(`man/${page}`).replace(/\\-/g, '-');
    const missing: string[] = [];
    const runOptions = optionsOf(runHelp.slice(0, runHelp.indexOf('Subcommands (')));
    for (const option of runOptions) if (!docs.includes(option) || !man('cronguard.1').includes(option)) missing.push(`run ${option}`);
    for (const [name, help] of subHelp) {
      const page = name === 'enable' ? 'cronguard-disable.1' : `cronguard-${name}.1`;
      for (const option of optionsOf(help)) {
        // The run log's options, which every subcommand takes, are the main page's.
        const shared = ['--db', '--schema', '--state-dir', '--help'].includes(option);
        if (!docs.includes(option) || !(shared || man(page).includes(option))) missing.push(`${name} ${option}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every subcommand has a man page of its own, and cronguard.conf(5) names every setting', () => {
    const pages = readdirSync(join(ROOT, 'man'));
    expect(subcommands.filter((name) => !pages.includes(`cronguard-${name}.1`))).toEqual([]);
    const conf = text('man/cronguard.conf.5').replace(/\\-/g, '-');
    expect(Object.entries(SETTING_ENV).filter(([key, variable]) => !conf.includes(key) || !conf.includes(variable))).toEqual([]);
  });

  it('docs/troubleshooting.md has every error line the source throws, by exit code', () => {
    // node scripts/troubleshooting.mjs rewrites the page from the source.
    const page = execFileSync(process.execPath, [join(ROOT, 'scripts/troubleshooting.mjs'), '--print'], { encoding: 'utf8' });
    expect(text('docs/troubleshooting.md')).toBe(page);
  });
});
