import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { haveMariadbd, privateMariadb } from '../mariadb-server.js';
import { mysqlQuery } from '../mysql-helpers.js';

// TLS against a real MariaDB that requires it (require_secure_transport): a connection that
// gets in is encrypted. ssl-mode=VERIFY_IDENTITY checks the chain and the name, a wrong CA or
// a name the certificate does not carry is refused (69, one line), and a client that turns TLS
// off is refused its login (77). (test/lock/mysql-tls.test.ts covers every mode against a stand-in server.)
function certificates(name: string): { dir: string; ca: string; wrongCa: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-tls-'));
  chmodSync(dir, 0o755);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=cronguard test CA');
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other.key', '-out', 'other-ca.pem', '-days', '2', '-subj', '/CN=another CA');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${name}`);
  writeFileSync(join(dir, 'san.ext'), `subjectAltName = DNS:${name}\n`);
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'san.ext');
  chmodSync(join(dir, 'server.key'), 0o644);
  return { dir, ca: join(dir, 'ca.pem'), wrongCa: join(dir, 'other-ca.pem') };
}

describe.skipIf(!haveMariadbd)('MySQL over TLS, against a MariaDB that requires it', () => {
  it('connects with VERIFY_IDENTITY and the right CA; refuses a wrong CA, a wrong name and TLS turned off (69)', async () => {
    const { dir, ca, wrongCa } = certificates('localhost');
    const server = await privateMariadb([`--ssl-ca=${ca}`, `--ssl-cert=${dir}/server.pem`, `--ssl-key=${dir}/server.key`,
      '--require-secure-transport=ON']);
    const box = sandbox();
    const at = (host: string, query: string) => ({ ...box.env, CRONGUARD_DATABASE_URL: `mysql://root@${host}:${server.port}/?${query}`, CRONGUARD_SCHEMA: 'cg_tls' });

    const verified = await cronguard(['-n', 'tls', '--', 'true'], at('localhost', `ssl-mode=VERIFY_IDENTITY&ssl-ca=${ca}`));
    expect(verified).toMatchObject({ code: 0, stdout: '', stderr: '' });
    const rows = await mysqlQuery<{ status: string }>('SELECT status FROM cg_tls.runs', [], server.url.replace('/mysql', '/mysql?ssl-mode=REQUIRED'));
    expect(rows).toEqual([{ status: 'succeeded' }]);

    const refused = [
      [at('localhost', `ssl-mode=VERIFY_CA&ssl-ca=${wrongCa}`), 69],
      // The certificate names localhost, not the address.
      [at('127.0.0.1', `ssl-mode=VERIFY_IDENTITY&ssl-ca=${ca}`), 69],
      // MariaDB refuses the login of a plain connection ("access denied"): 77, with a hint.
      [at('localhost', 'ssl-mode=DISABLED'), 77],
    ] as const;
    for (const [env, code] of refused) {
      const result = await cronguard(['-n', 'tls', '--', 'touch', box.path('ran')], env);
      expect(result.code, env.CRONGUARD_DATABASE_URL).toBe(code);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^cronguard: [^\n]*MySQL[^\n]*\n$/);
    }
    expect(rows).toHaveLength(1);
  });
});
