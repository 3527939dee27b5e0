// A stand-in MySQL server for the code cache's training (train.mjs): just enough of the wire
// protocol for one run under the mysql lock (`--no-log`) to take its ordinary path (connect,
// the session's SET, GET_LOCK, RELEASE_LOCK, quit), so that the cache holds the code such a
// run compiles: mysql2's client, handshake and result parsing, the dialect's session and
// lock. Build and install time have no real server to train against. It trusts every login
// and answers each SELECT with one row: its last column alias, 1.
import { createServer } from 'node:net';

// Capabilities: 4.1 protocol, transactions, secure (20-byte) auth, plugin auth (lenenc
// client data), multi-results, long flags, connect attributes. Neither TLS nor
// DEPRECATE_EOF: result sets end in classic EOF packets.
const CAPABILITIES = 0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x20000 | 0x80000 | 0x100000 | 0x200000;
const LONGLONG = 0x08;
const BINARY_CHARSET = 63;
const AUTOCOMMIT = 0x0002;

function packet(sequence, payload) {
  const head = Buffer.alloc(4);
  head.writeUIntLE(payload.length, 0, 3);
  head[3] = sequence & 0xff;
  return Buffer.concat([head, payload]);
}

// A length-encoded string (all of ours are under 251 bytes).
const lenenc = (text) => Buffer.concat([Buffer.from([Buffer.byteLength(text)]), Buffer.from(text)]);
const uint16 = (n) => Buffer.from([n & 0xff, (n >> 8) & 0xff]);

function handshake(connectionId) {
  const id = Buffer.alloc(4);
  id.writeUInt32LE(connectionId);
  return Buffer.concat([
    Buffer.from([0x0a]),
    Buffer.from('8.0.36-cronguard-training\0'),
    id,
    Buffer.from('abcdefgh\0'),
    uint16(CAPABILITIES & 0xffff),
    Buffer.from([255]),
    uint16(AUTOCOMMIT),
    uint16(CAPABILITIES >>> 16),
    Buffer.from([21]),
    Buffer.alloc(10),
    Buffer.from('ijklmnopqrst\0'),
    Buffer.from('mysql_native_password\0'),
  ]);
}

const ok = () => Buffer.concat([Buffer.from([0x00, 0x00, 0x00]), uint16(AUTOCOMMIT), uint16(0)]);
const eof = () => Buffer.concat([Buffer.from([0xfe]), uint16(0), uint16(AUTOCOMMIT)]);

function column(name) {
  return Buffer.concat([
    lenenc('def'),
    lenenc(''),
    lenenc(''),
    lenenc(''),
    lenenc(name),
    lenenc(name),
    Buffer.from([0x0c]),
    uint16(BINARY_CHARSET),
    Buffer.from([21, 0, 0, 0, LONGLONG]),
    uint16(0),
    Buffer.from([0, 0, 0]),
  ]);
}

// One statement's answer, as packets numbered from 1: a SELECT's row, or OK.
function answer(sql) {
  if (!/^\s*SELECT\b/i.test(sql)) return [ok()];
  const name = /\bAS\s+`?(\w+)`?\s*$/i.exec(sql)?.[1] ?? 'value';
  return [Buffer.from([1]), column(name), eof(), lenenc('1'), eof()];
}

function serve(socket, connectionId) {
  socket.on('error', () => {});
  socket.write(packet(0, handshake(connectionId)));
  let pending = Buffer.alloc(0);
  let loggedIn = false;
  socket.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const length = pending.readUIntLE(0, 3);
      if (pending.length < 4 + length) return;
      const sequence = pending[3];
      const payload = pending.subarray(4, 4 + length);
      pending = pending.subarray(4 + length);
      if (!loggedIn) {
        loggedIn = true;
        socket.write(packet(sequence + 1, ok()));
        continue;
      }
      const command = payload[0];
      if (command === 0x01) return void socket.end();
      const replies = command === 0x03 ? answer(payload.subarray(1).toString()) : [ok()];
      socket.write(Buffer.concat(replies.map((reply, i) => packet(i + 1, reply))));
    }
  });
}

// Listens on a free loopback port; resolves to the server, whose address() gives the port.
export function fakeMysql() {
  let connections = 0;
  const server = createServer((socket) => serve(socket, ++connections));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}
