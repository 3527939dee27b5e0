import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { createSecureContext, TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, ROOT, runFile, sandbox } from '../helpers.js';

// ssl-mode against a server that offers TLS (the machine's MariaDB does not): a stand-in that
// speaks just enough of the protocol for a run under the mysql lock (--no-log), upgrading to
// TLS as MySQL does, with a certificate of a CA made for the test and a name the test picks.

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

// Capabilities: 4.1 protocol, TLS, transactions, secure auth, plugin auth, multi-results.
const CAPABILITIES = 0x1 | 0x4 | 0x8 | 0x200 | 0x800 | 0x2000 | 0x8000 | 0x20000 | 0x80000 | 0x200000;
const u16 = (n: number) => Buffer.from([n & 0xff, (n >> 8) & 0xff]);
const lenenc = (text: string) => Buffer.concat([Buffer.from([Buffer.byteLength(text)]), Buffer.from(text)]);
const OK = Buffer.concat([Buffer.from([0, 0, 0]), u16(2), u16(0)]);
const EOF = Buffer.concat([Buffer.from([0xfe]), u16(0), u16(2)]);

function packet(sequence: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUIntLE(payload.length, 0, 3);
  head[3] = sequence;
  return Buffer.concat([head, payload]);
}

function greeting(): Buffer {
  return Buffer.concat([
    Buffer.from([0x0a]),
    Buffer.from('8.0.36-tls-stand-in\0'),
    Buffer.from([1, 0, 0, 0]),
    Buffer.from('abcdefgh\0'),
    u16(CAPABILITIES & 0xffff),
    Buffer.from([255]),
    u16(2),
    u16(CAPABILITIES >>> 16),
    Buffer.from([21]),
    Buffer.alloc(10),
    Buffer.from('ijklmnopqrst\0'),
    Buffer.from('mysql_native_password\0'),
  ]);
}

// Each SELECT gets one row: its last alias, 1 (GET_LOCK ... AS got and the like).
function answer(sql: string): Buffer[] {
  if (!/^\s*SELECT\b/i.test(sql)) return [OK];
  const name = /\bAS\s+`?(\w+)`?\s*$/i.exec(sql)?.[1] ?? 'value';
  const column = Buffer.concat([lenenc('def'), lenenc(''), lenenc(''), lenenc(''), lenenc(name), lenenc(name), Buffer.from([0x0c]), u16(63), Buffer.from([21, 0, 0, 0, 0x08]), u16(0), Buffer.from([0, 0, 0])]);
  return [Buffer.from([1]), column, EOF, lenenc('1'), EOF];
}

// Reads packets off `socket`; the first one, if it is an SSLRequest (32 bytes), upgrades it.
function serve(socket: Socket | TLSSocket, tls: { key: string; cert: string }, upgraded: () => void): void {
  let pending = Buffer.alloc(0);
  let loggedIn = false;
  socket.on('error', () => {});
  const onData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const length = pending.readUIntLE(0, 3);
      if (pending.length < 4 + length) return;
      const sequence = pending[3] as number;
      const payload = pending.subarray(4, 4 + length);
      pending = pending.subarray(4 + length);
      if (!loggedIn && length === 32 && !(socket instanceof TLSSocket)) {
        // The client's TLS hello may come in the same read as its request: the TLS socket
        // reads a stream fed with what is left and all that follows.
        socket.off('data', onData);
        const raw = new Duplex({
          read() {},
          write: (chunk, _encoding, done) => void socket.write(chunk, done),
          final: (done) => void socket.end(done),
        });
        if (pending.length > 0) raw.push(pending);
        socket.on('data', (more: Buffer) => raw.push(more));
        socket.on('end', () => raw.push(null));
        const secure = new TLSSocket(raw, { isServer: true, secureContext: createSecureContext(tls) });
        secure.on('secure', upgraded);
        return serve(secure, tls, upgraded);
      }
      if (!loggedIn) {
        loggedIn = true;
        socket.write(packet(sequence + 1, OK));
        continue;
      }
      if (payload[0] === 0x01) return void socket.end();
      const replies = payload[0] === 0x03 ? answer(payload.subarray(1).toString()) : [OK];
      socket.write(Buffer.concat(replies.map((reply, i) => packet(i + 1, reply))));
    }
  };
  socket.on('data', onData);
}

// A CA and a server certificate for `name`, made with openssl in `dir`.
function certificates(dir: string, name: string): { ca: string; key: string; cert: string } {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=cronguard test CA');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${name}`);
  writeFileSync(`${dir}/san.ext`, `subjectAltName = DNS:${name}\n`);
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'san.ext');
  return { ca: `${dir}/ca.pem`, key: readFileSync(`${dir}/server.key`, 'utf8'), cert: readFileSync(`${dir}/server.pem`, 'utf8') };
}

// The stand-in, with a certificate for `name` from a CA of the test's; `upgrades()` counts
// the connections that went over to TLS.
async function tlsServer(dir: string, name: string): Promise<{ port: number; ca: string; upgrades(): number }> {
  const { ca, key, cert } = certificates(dir, name);
  let upgrades = 0;
  const server = createServer((socket) => {
    socket.write(packet(0, greeting()));
    serve(socket, { key, cert }, () => upgrades++);
  });
  servers.push(server);
  // Every address of this host (localhost may be looked up as ::1 or 127.0.0.1).
  await new Promise<void>((resolve) => server.listen(0, resolve));
  return { port: (server.address() as { port: number }).port, ca, upgrades: () => upgrades };
}

describe('MySQL over TLS (ssl-mode)', () => {
  it('verifies what ssl-mode asks: the chain with verify_ca, also the host name with verify_identity; required checks nothing', async () => {
    const box = sandbox();
    const { port, ca, upgrades } = await tlsServer(box.dir, 'db.test.invalid');
    // The host name is looked up as `localhost`, so the certificate's name never matches it.
    const run = (params: string) => cronguard(['--db', `mysql://root@localhost:${port}/?${params}`, '--no-log', '-n', 'tls', '--', 'true'], box.env);
    expect(await run('ssl-mode=required')).toMatchObject({ code: 0, stderr: '' });
    expect(upgrades()).toBe(1);
    expect(await run(`ssl-mode=verify_ca&ssl-ca=${ca}`)).toMatchObject({ code: 0, stderr: '' });
    const unknownCa = await run('ssl-mode=verify_ca');
    expect(unknownCa.code).toBe(69);
    expect(unknownCa.stderr).toMatch(/^cronguard: MySQL at root@localhost:\d+: its TLS certificate was refused \(.*certificate.*\); check the URL's ssl-ca and host\n$/);
    const wrongName = await run(`ssl-mode=verify_identity&ssl-ca=${ca}`);
    expect(wrongName.code).toBe(69);
    expect(wrongName.stderr).toMatch(/^cronguard: MySQL at root@localhost:\d+: its TLS certificate was refused \(.*altnames.*\); check the URL's ssl-ca and host\n$/);
    expect(wrongName.stderr.trim().split('\n')).toHaveLength(1);
    // Without TLS asked for on the loopback: a plain connection, no upgrade.
    const before = upgrades();
    expect(await run('ssl-mode=disabled')).toMatchObject({ code: 0, stderr: '' });
    expect(upgrades()).toBe(before);
  });

  it('trusts a CA that NODE_EXTRA_CA_CERTS names, though the launcher defers that file past Node start-up', async () => {
    const box = sandbox();
    const { port, ca } = await tlsServer(box.dir, 'localhost');
    const args = ['--db', `mysql://root@localhost:${port}/?ssl-mode=verify_identity`, '--no-log', '-n', 'extra', '--', 'true'];
    expect(await runFile(`${ROOT}/bin/cronguard`, args, { ...box.env, NODE_EXTRA_CA_CERTS: ca })).toMatchObject({ code: 0, stderr: '' });
    const without = await runFile(`${ROOT}/bin/cronguard`, args, box.env);
    expect(without.code).toBe(69);
    expect(without.stderr).toMatch(/its TLS certificate was refused/);
  });
});
