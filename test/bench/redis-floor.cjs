// The floor of the Redis mode for any Node wrapper: start, connect to the server and have it
// answer one command (the least any client must do before it can take a key), spawn the
// command, wait for it, say goodbye. The command is written by hand, so that no client's
// loading is counted.
const { connect } = require('node:net');
const { spawn } = require('node:child_process');

const url = new URL(process.argv[2]);
const socket = connect(Number(url.port || 6379), url.hostname);
socket.on('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
socket.on('error', (error) => {
  console.error(`redis-floor: ${error.message}`);
  process.exit(2);
});
socket.once('data', (reply) => {
  if (!reply.toString().startsWith('+PONG')) {
    console.error(`redis-floor: the server answered ${JSON.stringify(reply.toString())}`);
    process.exit(2);
  }
  spawn('true', { stdio: 'inherit' }).on('exit', () => socket.end('*1\r\n$4\r\nQUIT\r\n'));
});
