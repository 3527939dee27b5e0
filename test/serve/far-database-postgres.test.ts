import { connect, createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { databaseUrl, pgSandbox } from '../pg-helpers.js';
import { serve } from './serve-helpers.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

// A database `ms` away: every answer arrives that much later, in order (a far region).
async function farDatabase(ms: number): Promise<string> {
  const target = new URL(databaseUrl());
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream);
    upstream.on('data', (d) => setTimeout(() => client.write(d), ms));
    upstream.on('end', () => setTimeout(() => client.end(), ms));
  });
  closers.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl());
  url.port = String((server.address() as { port: number }).port);
  return url.toString();
}

// The 5 s answer deadline is for a database that stops answering, not for one that answers
// every statement in turn: pages waiting their turn on the server's one connection behind
// the others' statements are not a lost connection (which would fail every one of them).
describe('serve: a far database and many pages at once', () => {
  it('thirty pages at once, each statement answered in 300 ms: all of them 200, none a 503', async () => {
    const box = pgSandbox();
    const job = box.job('far');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve([], { ...box.env, CRONGUARD_DATABASE_URL: await farDatabase(300) });
    expect((await server.get('/api/jobs')).status).toBe(200);
    // 30 statements one after another take 9 s or more, beyond the deadline, within the
    // 30 s statement timeout.
    const answers = await Promise.all(Array.from({ length: 30 }, async () => {
      const answer = await fetch(`${server.url}/api/jobs`);
      return `${answer.status} ${answer.status === 200 ? '' : await answer.text()}`.trim();
    }));
    expect(answers).toEqual(Array(30).fill('200'));
    expect(server.stderr()).not.toMatch(/internal error/);
  }, 120_000);
});
