// The bench's Redis mode (bench.mjs): a redis-server of the bench's own on a free port, in a
// scratch directory, stopped at the end; cronguard's -l redis run with the embedded log, and
// its floor (redis-floor.cjs: node, connect, one answer, spawn).
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });

export async function redisMode({ root, launcher, work }) {
  const binary = spawnSync('sh', ['-c', 'command -v redis-server']).stdout.toString().trim();
  if (!binary) return { cases: [], note: '\nredis mode skipped: no redis-server on PATH', stop: async () => {} };
  const port = await freePort();
  const server = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', work], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  const floor = ['node', join(root, 'test/bench/redis-floor.cjs'), url];
  // Until it answers (a fresh server takes a moment to listen).
  for (let i = 0; i < 100 && spawnSync(floor[0], floor.slice(1), { stdio: 'ignore' }).status !== 0; i++) spawnSync('sleep', ['0.05']);
  const cases = [
    { label: 'cronguard -n b --lock-url redis://... -- true (redis lock, embedded log)', argv: [launcher, '-n', 'b', '--lock-url', url, '--', 'true'], goal: 1.15, floor: 'redis' },
    { label: 'node: connect to Redis, spawn true (redis floor)', argv: floor, id: 'redis' },
  ];
  return {
    cases,
    note: '',
    async stop() {
      server.kill();
      await new Promise((resolve) => (server.exitCode === null ? server.on('exit', resolve) : resolve()));
    },
  };
}
