// The floor of the MySQL mode for any Node wrapper: start, load the driver cronguard uses
// (mysql2), connect and wait for the server's handshake to finish (the least any client must
// do before it can take GET_LOCK), spawn the command, wait for it, say goodbye.
const { spawn } = require('node:child_process');
const mysql = require('mysql2');

const url = new URL(process.argv[2]);
const connection = mysql.createConnection({
  host: url.hostname,
  port: Number(url.port || 3306),
  user: decodeURIComponent(url.username) || 'root',
  password: decodeURIComponent(url.password) || undefined,
});
connection.on('error', (error) => {
  console.error(`mysql-floor: ${error.message}`);
  process.exit(2);
});
connection.connect((error) => {
  if (error) {
    console.error(`mysql-floor: ${error.message}`);
    process.exit(2);
  }
  spawn('true', { stdio: 'inherit' }).on('exit', () => connection.end());
});
