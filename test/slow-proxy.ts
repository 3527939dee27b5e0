import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach } from 'vitest';

// A database `ms` away: a TCP forwarder that hands every answer of the server on `ms` later,
// in order (a far region, a pooler or a server slow to answer yet answering in time).
const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

// `url`'s host and port are the server's; returns the same URL through the forwarder.
export async function slowProxy(url: string, ms: number, defaultPort: number): Promise<string> {
  const target = new URL(url);
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || defaultPort), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream);
    upstream.on('data', (chunk) => setTimeout(() => client.write(chunk), ms));
    upstream.on('end', () => setTimeout(() => client.end(), ms));
    client.on('close', () => upstream.destroy());
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const through = new URL(url);
  through.port = String((server.address() as { port: number }).port);
  return through.toString();
}
