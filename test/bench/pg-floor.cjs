// The floor of the postgres mode for any Node wrapper: start, connect to the server and wait
// until its new backend is ready (the least any client must do before it can lock), spawn
// the command, wait for it, say goodbye. The startup message is written by hand, so that no
// driver's loading is counted; only a server that trusts the user is supported.
const { connect } = require('node:net');
const { spawn } = require('node:child_process');

const url = new URL(process.argv[2]);
const fields = ['user', decodeURIComponent(url.username) || 'postgres', 'database', url.pathname.slice(1) || 'postgres'];
const body = Buffer.from(`${fields.join('\0')}\0\0`);
const startup = Buffer.alloc(8 + body.length);
startup.writeInt32BE(startup.length, 0);
startup.writeInt32BE(196608, 4);
body.copy(startup, 8);

const socket = connect(Number(url.port || 5432), url.hostname);
socket.on('connect', () => socket.write(startup));
socket.on('error', (error) => {
  console.error(`pg-floor: ${error.message}`);
  process.exit(2);
});
let received = Buffer.alloc(0);
let started = false;
socket.on('data', (chunk) => {
  received = Buffer.concat([received, chunk]);
  // Messages: a type byte and a length. R with a non-zero code asks for a password.
  for (let at = 0; at + 5 <= received.length; at += 1 + received.readInt32BE(at + 1)) {
    const type = String.fromCharCode(received[at]);
    if (type === 'E' || (type === 'R' && received.readInt32BE(at + 5) !== 0)) {
      console.error('pg-floor: the server refused the connection or asked for a password');
      process.exit(2);
    }
    if (type === 'Z' && !started) {
      started = true;
      spawn('true', { stdio: 'inherit' }).on('exit', () => socket.end(Buffer.from([0x58, 0, 0, 0, 4])));
    }
  }
});
