import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { serve } from './serve-helpers.js';

const MIB = 1024 * 1024;
const OUTPUT = 12 * MIB;

// The most memory the server process ever held (its peak resident set), in bytes.
function peakRss(pid: number): number {
  const kib = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib) * 1024;
}

// Runs with large output (as --capture allows): a page or an API list of them reads none of
// it, and a run's page reads only the tail it shows, cut in SQL. Before, every view of the
// job page read all three outputs whole (+36 MiB and more each time).
describe.each(STORES)('serve: large outputs (%s)', (kind) => {
  it('lists never read output; a run page reads only the last 1 MiB', async () => {
    const box = storeBox(kind);
    const job = box.job('big');
    const print = `head -c ${OUTPUT} /dev/zero | tr '\\0' x; echo; echo the-end`;
    for (let i = 0; i < 3; i++) expect((await cronguard(['-q', '--capture', String(OUTPUT + 100), '-n', job, '--', 'sh', '-c', print], box.env)).code).toBe(0);
    const [run] = await box.runs();
    expect(run?.output?.length).toBeGreaterThan(OUTPUT);
    const server = await serve(['-q'], box.env);
    const pid = server.started.child.pid as number;
    expect((await server.get('/')).status).toBe(200);
    const before = peakRss(pid);

    for (let i = 0; i < 3; i++) expect((await server.get(`/jobs/${job}`)).status).toBe(200);
    const listed = await server.get(`/api/jobs/${job}/runs?limit=1000`);
    const body = await listed.text();
    expect(body.length).toBeLessThan(10_000);
    const rows = JSON.parse(body) as Record<string, unknown>[];
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).not.toHaveProperty('output');

    // Measured: 2.5 MiB (PostgreSQL) and 16.5 MiB (SQLite, whose page cache, 16 MiB in
    // better-sqlite3, fills as it walks past the outputs' pages); before, every view held all
    // three outputs at once (36 MiB, and their JSON as much again).
    const lists = peakRss(pid);
    expect(lists - before).toBeLessThan(24 * MIB);
    const page = await (await server.get(`/runs/${run?.id}`)).text();
    expect(page).toContain('Showing the last 1024 KiB');
    expect(page).toContain('the-end');
    expect(page.length).toBeLessThan(1.2 * MIB);
    // The page itself: 5.4 MiB more with PostgreSQL (it sends 1 MiB, as MySQL does); SQLite,
    // in process, holds the output in C while it cuts it (15 MiB), never as a string in the server.
    expect(peakRss(pid) - lists).toBeLessThan(kind === 'sqlite' ? OUTPUT + 8 * MIB : 12 * MIB);
    // A run's own URL still has all of it.
    const whole = (await (await server.get(`/api/runs/${run?.id}`)).json()) as { output: string };
    expect(whole.output.length).toBe(run?.output?.length);
  });

  // The cut falls inside an escape sequence that turns the rest red: the page shows red text
  // from its first line, not the sequence's tail ("31m") in the default colour.
  it('a run page whose last 1 MiB starts inside an escape sequence shows it whole, in its colour', async () => {
    const box = storeBox(kind);
    const job = box.job('cut-escape');
    const print = `printf 'before\\033[1;31m'; head -c ${MIB - 3} /dev/zero | tr '\\0' y`;
    expect((await cronguard(['-q', '--capture', String(2 * MIB), '-n', job, '--', 'sh', '-c', print], box.env)).code).toBe(0);
    const [run] = await box.runs();
    expect(run?.output?.length).toBe(MIB + 10);
    const server = await serve(['-q'], box.env);
    const page = await (await server.get(`/runs/${run?.id}`)).text();
    expect(page).toContain('Showing the last 1024 KiB');
    const shown = /<pre class="output" id="output">([\s\S]*?)<\/pre>/.exec(page)?.[1] ?? '';
    expect(shown.slice(0, 40)).toMatch(/^<span class="fg1 b">y+/);
    expect(shown).not.toContain('31m');
    expect(shown).not.toContain('before');
    expect(shown.replace(/<[^>]*>/g, '')).toHaveLength(MIB - 3);
  });
});
