// A stand-in PostgreSQL server for the code cache's training (build.mjs): just enough of the
// wire protocol for one run under the postgres lock and log to take its ordinary path (connect,
// admission, child pid, outcome and unlock), so that the cache holds the code a PostgreSQL run
// compiles: pg's client and protocol, the store's. Build and install time have no real server
// to train against. It trusts every login and answers each statement by what it asks for.
import { createServer } from 'node:net';

const JSONB = 3802;
const INT4 = 23;
const BOOL = 16;
const TEXT = 25;
const TIMESTAMPTZ = 1184;

function message(type, ...parts) {
  const body = Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(`${p}\0`) : p)));
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const int16 = (n) => Buffer.from([n >> 8, n & 0xff]);
function int32(n) {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

// One row of `columns` ([name, type oid, text value or null for NULL]), as a statement's
// description and its data.
function oneRow(columns) {
  const fields = columns.flatMap(([name, oid]) => [name, int32(0), int16(0), int32(oid), int16(-1 & 0xffff), int32(-1), int16(0)]);
  const values = columns.flatMap(([, , value]) => (value === null ? [int32(-1)] : [int32(Buffer.byteLength(value)), Buffer.from(value)]));
  return [message('T', int16(columns.length), ...fields), message('D', int16(columns.length), ...values)];
}

// The schema's state (SCHEMA_STATE in store/postgres/sql.ts): there, current, and the role may do anything.
const STATE = ['present', 'usable', 'owner', 'may_create', 'versioned', 'may_delete'];

// The admission's row (sql.ts `admit`): admitted, at the schema's current version, with the
// advisory lock now held by this session's backend, as a first run's on a real server.
const AT = '2026-01-01 00:00:00+00';
function admitted(version) {
  const verdict = JSON.stringify({ admitted: true, id: 1, requests: [], running: [], version });
  return oneRow([
    ['r', JSONB, verdict],
    ['orphaned', JSONB, '[]'],
    ['backend', INT4, '1'],
    ['holding', BOOL, 't'],
    ['epoch', TEXT, null],
    ['started_at', TIMESTAMPTZ, AT],
    ['backend_start', TEXT, AT],
    ['system_identifier', TEXT, '7000000000000000001'],
  ]);
}

// What a statement returns: admit()'s verdict, the outcome statement's unlock, the schema's
// state and version, and nothing for the rest.
function resultOf(sql, version) {
  if (/AS may_delete/.test(sql)) return [...oneRow(STATE.map((name) => [name, BOOL, 't'])), message('C', 'SELECT 1')];
  if (/max\(version\)/.test(sql)) return [...oneRow([['v', INT4, String(version)]]), message('C', 'SELECT 1')];
  if (/\.admit\(/.test(sql)) return [...admitted(version), message('C', 'SELECT 1')];
  if (/\bunlocked\b/.test(sql)) return [...oneRow([['unlocked', BOOL, 't']]), message('C', 'UPDATE 1')];
  return [message('n'), message('C', 'UPDATE 1')];
}

function serve(socket, version) {
  let pending = Buffer.alloc(0);
  let started = false;
  let sql = '';
  const reply = (...messages) => socket.write(Buffer.concat(messages));
  socket.on('error', () => {});
  socket.on('data', (data) => {
    pending = Buffer.concat([pending, data]);
    for (;;) {
      if (!started) {
        if (pending.length < 8) return;
        const length = pending.readInt32BE(0);
        if (pending.length < length) return;
        const code = pending.readInt32BE(4);
        pending = pending.subarray(length);
        // 80877103: SSLRequest, refused; anything else is the startup message.
        if (code === 80877103) socket.write('N');
        else {
          started = true;
          reply(message('R', int32(0)), message('S', 'server_version', '16.0'), message('S', 'client_encoding', 'UTF8'), message('K', int32(1), int32(1)), message('Z', 'I'));
        }
        continue;
      }
      if (pending.length < 5) return;
      const length = pending.readInt32BE(1);
      if (pending.length < length + 1) return;
      const type = String.fromCharCode(pending[0] ?? 0);
      const body = pending.subarray(5, length + 1);
      pending = pending.subarray(length + 1);
      if (type === 'X') return socket.end();
      if (type === 'Q') reply(...resultOf(body.toString(), version), message('Z', 'I'));
      if (type === 'P') {
        sql = body.subarray(body.indexOf(0) + 1, body.indexOf(0, body.indexOf(0) + 1)).toString();
        reply(message('1'));
      }
      if (type === 'B') reply(message('2'));
      if (type === 'E') reply(...resultOf(sql, version));
      if (type === 'S') reply(message('Z', 'I'));
    }
  });
}

// Listens on a free loopback port; resolves to the server, whose address() gives the port.
export function fakePostgres(version) {
  const server = createServer((socket) => serve(socket, version));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}
