import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, waitFor } from '../helpers.js';
import { pgSandbox } from '../pg-helpers.js';
import { eventStream, serve } from './serve-helpers.js';

const JOBS = 20;
const WARM = 1000;
const LOADS = 4000;
const MIB = 1024 * 1024;

interface Held {
  heapUsed: number;
  external: number;
  rss: number;
  young: number;
}

// A server left serving for a while: thousands of page loads, five pages open on the live
// stream, a job changing all along. What it still holds after a full collection (its heap's
// live objects and the memory of its Buffers) is the same after the first thousand loads
// (caches and pools at working size) and at the end; a server keeping what it read (every
// query result, as item 1 found: 118 to 225 MB in 80 s) holds more with each load.
// Resident memory is not the measure: V8 sizes its young generation by itself, up to
// 2 x 16 MiB on Node 20 and 22 but 2 x 64 MiB on Node 24 (V8 13.6), which a busy server
// fills after its first thousand loads and keeps (150 to 225 MiB here, with nothing more
// held); it is logged for the record.
describe('serve: a soak of page loads with pages open and jobs changing', () => {
  it('holds no more after thousands of loads than after the first thousand', async () => {
    const box = pgSandbox();
    const jobs = Array.from({ length: JOBS }, (_, i) => box.job(`soak${i}`));
    for (const job of jobs) await cronguard(['-n', job, '--', 'sh', '-c', 'echo some output'], box.env);
    const file = box.path('held.jsonl');
    const server = await serve(['-q'], { ...box.env, NODE_OPTIONS: `--require ${fixture('heap.cjs')}`, CRONGUARD_TEST_HEAP_FILE: file });
    const pid = server.started.child.pid as number;
    const taken: Held[] = [];
    // The server collects and writes what it holds; the line it writes is the barrier.
    const held = async (): Promise<Held> => {
      process.kill(pid, 'SIGUSR2');
      // Whole lines only.
      const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1) : []);
      await waitFor(() => lines().length > taken.length, 'the server to say what it holds');
      taken.push(JSON.parse(lines()[taken.length] as string) as Held);
      return taken[taken.length - 1] as Held;
    };
    const streams = await Promise.all(Array.from({ length: 5 }, async () => eventStream(await server.get('/events'))));
    let loading = true;
    // One job changing all along (pause, resume), each change a refresh of the open pages.
    const changing = (async () => {
      for (let i = 0; loading; i++) await cronguard([i % 2 ? 'enable' : 'disable', jobs[0] as string], box.env);
    })();
    const paths = [`/jobs/${jobs[1]}`, '/', '/api/jobs', `/api/jobs/${jobs[2]}/runs`, '/runs/1', '/metrics'];
    let next = 0;
    let warm: Promise<Held> | undefined;
    const worker = async () => {
      for (let i = next++; i < LOADS; i = next++) {
        if (i === WARM) warm = held();
        const answer = await server.get(i % 50 === 0 ? `/?refresh=${i}` : (paths[i % paths.length] as string), i % 50 === 0 ? { headers: { 'x-cronguard-refresh': String(i) } } : {});
        await answer.arrayBuffer();
        expect([200, 404]).toContain(answer.status);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    const before = await (warm as Promise<Held>);
    const after = await held();
    loading = false;
    await changing;
    await Promise.all(streams.map((s) => s.close()));
    const mib = (n: number) => (n / MIB).toFixed(1);
    console.log(
      `soak (${process.version}): held ${mib(before.heapUsed + before.external)} MiB after ${WARM} loads, ${mib(after.heapUsed + after.external)} MiB after ${LOADS}; ` +
        `resident ${mib(before.rss)} / ${mib(after.rss)} MiB, young generation ${mib(before.young)} / ${mib(after.young)} MiB`,
    );
    // Measured: within 1.5 MiB on Node 20, 22 and 24 (the warm figure includes the pages then
    // being served); the bound leaves room for those, not for a result kept per load.
    expect(after.heapUsed + after.external - (before.heapUsed + before.external)).toBeLessThan(8 * MIB);
    // A soak ends after its count of loads, not a time: 63 s on Node 20 in CI, over 120 s
    // (the suite's limit) on Node 22 in the same CI. The limit only catches a hang.
  }, 600_000);
});
