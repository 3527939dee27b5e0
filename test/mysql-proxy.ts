import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach } from 'vitest';
import { mysqlUrl } from './mysql-helpers.js';

// A TCP forwarder to the tests' MySQL server, for the network's faults between cronguard and
// its database (PostgreSQL's tests have theirs in pg-helpers.ts).
export interface MysqlProxy {
  readonly url: string;
  // Stops forwarding either way, connections left open: a network that went silent.
  freeze(): void;
  thaw(): void;
  // Closes every connection: the client sees its connection reset.
  cut(): void;
  // Silent for good, and when the client gives up on its connection, the server's side stays
  // open and silent (the server never hears that the client went away).
  partition(): void;
  // From the first packet of a client holding `text` on, what clients send waits in the proxy
  // (as a pooler that paused holds statements) until resume() passes it on, in order.
  holdFrom(text: string): void;
  // Whether such a packet came and waits.
  holding(): boolean;
  resume(): void;
}

const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

export async function mysqlProxy(): Promise<MysqlProxy> {
  const target = new URL(mysqlUrl());
  let frozen = false;
  let parted = false;
  let holdText: string | null = null;
  const held: (() => void)[] = [];
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 3306), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('data', (chunk) => {
      if (frozen) return;
      if (holdText !== null && (held.length > 0 || chunk.includes(holdText))) held.push(() => upstream.write(chunk));
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk) => frozen || client.write(chunk));
    client.on('close', () => parted || upstream.destroy());
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
    thaw: () => {
      frozen = false;
    },
    cut: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
    partition: () => {
      frozen = true;
      parted = true;
    },
    holdFrom: (text) => {
      holdText = text;
    },
    holding: () => held.length > 0,
    resume: () => {
      holdText = null;
      for (const pass of held.splice(0)) pass();
    },
  };
}
