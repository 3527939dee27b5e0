import { createRequire } from 'node:module';
import type { SecureContext, SecureContextOptions } from 'node:tls';
import { readRegularFile } from './safe-path.js';

// Node reads and parses the file named by NODE_EXTRA_CA_CERTS at every start, before any
// code runs: with a system's whole CA bundle there, tens of milliseconds of every run, while
// a run uses TLS only for a verified PostgreSQL connection or an https ping, if ever. So the
// launcher hands the variable over under this name instead; cronguard puts it back at once
// (its command and every process it starts see the environment they were given) and adds
// those certificates itself to the TLS connections that verify a server.
export const DEFERRED_EXTRA_CA = 'CRONGUARD_DEFERRED_EXTRA_CA_CERTS';

let deferredFile: string | null = null;

// A system's whole CA bundle is a few hundred KiB.
const MAX_BYTES = 16 * 1024 * 1024;

export function restoreExtraCaCerts(env: NodeJS.ProcessEnv = process.env): void {
  const file = env[DEFERRED_EXTRA_CA];
  if (file === undefined) return;
  delete env[DEFERRED_EXTRA_CA];
  env.NODE_EXTRA_CA_CERTS = file;
  deferredFile = file;
}

type WithContext<T> = T & { secureContext?: SecureContext };

// The file is read and parsed once per process, as Node would at start: a run may open a
// connection for its lock, another for its log, and a second try of each (sslmode prefer).
// One context per client certificate; the file that could not be read, warned about once.
let pem: string | null | undefined;
const contexts = new Map<string, SecureContext>();

// TLS options for a connection that checks the server against Node's default roots, with
// the deferred certificates added to those roots, as Node adds them, in whatever store this
// Node was built to use. Options that name their own roots (`ca`) are left as they are. A
// file that cannot be read is skipped with a warning (shown with -v), as Node skips it; so
// is anything but a regular file: a FIFO put in its place would block the whole wrapper,
// command supervision included, in the middle of a run.
export function withExtraCa<T extends SecureContextOptions>(options: T): WithContext<T> {
  if (deferredFile === null || options.ca !== undefined) return options;
  if (pem === undefined) {
    try {
      pem = readRegularFile(deferredFile, 'NODE_EXTRA_CA_CERTS', MAX_BYTES);
    } catch (error) {
      pem = null;
      process.emitWarning(`ignoring extra certs: ${(error as Error).message}`);
    }
  }
  if (pem === null) return options;
  const key = `${options.cert ?? ''}\0${options.key ?? ''}`;
  let secureContext = contexts.get(key);
  if (secureContext === undefined) {
    const tls = createRequire(import.meta.url)('node:tls') as typeof import('node:tls');
    secureContext = tls.createSecureContext(options);
    (secureContext as SecureContext & { context: { addCACert(pem: string): void } }).context.addCACert(pem);
    contexts.set(key, secureContext);
  }
  return { ...options, secureContext };
}
