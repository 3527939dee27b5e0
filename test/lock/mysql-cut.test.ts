import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { fixture, isAlive, lines, start, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// The network between cronguard and its MySQL server, cut or gone silent while a job holds
// its lock: the heartbeat notices, the command is stopped, 75.

const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

interface Proxy {
  readonly url: string;
  // Stops forwarding either way, connections left open: a network that went silent.
  freeze(): void;
  // Closes every connection: the client sees its connection reset.
  cut(): void;
}

// A TCP forwarder to the test server.
async function proxy(): Promise<Proxy> {
  const target = new URL(mysqlUrl());
  let frozen = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 3306), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('data', (chunk) => frozen || upstream.write(chunk));
    upstream.on('data', (chunk) => frozen || client.write(chunk));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(mysqlUrl());
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    freeze: () => {
      frozen = true;
    },
    cut: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
  };
}

describe('mysql lock over a failing network', () => {
  for (const fault of ['cut', 'freeze'] as const) {
    it(`a connection ${fault === 'cut' ? 'cut' : 'gone silent'} mid-run: the command is stopped, 75`, async () => {
      const box = mysqlSandbox();
      const job = box.job(fault);
      const through = await proxy();
      const pids = box.path('pids');
      const run = start(['--no-log', '-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], { ...box.env, CRONGUARD_DATABASE_URL: through.url });
      await waitFor(() => lines(pids).length === 3, 'the command to start');
      const [held] = await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [mysqlLockName(box.database, job)]);
      expect(held?.id).not.toBeNull();
      through[fault]();
      const result = await run.done;
      expect(result.code).toBe(75);
      expect(result.stderr).toMatch(fault === 'cut' ? /lock lost: .*; command terminated/ : /lock lost: the server stopped answering; command terminated/);
      for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    });
  }
});
