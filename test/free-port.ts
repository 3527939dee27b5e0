import { createServer } from 'node:net';

// A TCP port on 127.0.0.1 that nothing listens on now, for the servers the field tests start
// (clusters, private MariaDBs, poolers): fixed ports failed with "Port conflict" whenever
// something else, another test run included, had them. No vitest here: the bench uses it.
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// A cluster name of this process's own, so that two test runs on one machine never drop each
// other's clusters.
export const clusterName = (base: string): string => `${base}_${process.pid}`;
