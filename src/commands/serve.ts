import type { Settings } from '../cli/settings.js';
import { UsageError } from '../errors.js';
import { TokenAuth } from '../serve/auth.js';
import { parseAllowedHosts } from '../serve/hosts.js';
import { DEFAULT_LISTEN, isLoopback, parseListen } from '../serve/listen.js';
import { parseTrustProxy } from '../serve/proxy.js';
import { buildApp, listen } from '../serve/server.js';
import { ANSWER_MS, StoreAccess } from '../serve/store-access.js';
import { TokenFile } from '../serve/token-file.js';
import { parseDuration } from '../util/duration.js';
import { messages } from '../util/io.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

const HELP = `
Runs in the foreground until TERM or INT, one line per request on stderr (none
with -q). Pages: / (every job), /jobs/NAME, /runs/ID. JSON: /api/jobs,
/api/jobs/NAME/runs, /api/runs/ID, /api/requests/ID, and
POST /api/jobs/NAME/requests {"args": [...], "by": "..."}; /metrics as
cronguard metrics.

An address other than loopback needs --token-file (a bearer token for the API,
a login form for the pages) or --read-only. The token file is read again when
it changes and on HUP (which never stops the server). Without a token, only a
Host naming this machine (or in --allowed-hosts) is answered. Behind a reverse
proxy, --trust-proxy takes X-Forwarded-For, -Proto, -Host and -User from it.
A running job's live output shows when the server shares the job's state
directory and host.
`;

interface Flags {
  listen: string;
  tokenFile?: string;
  readOnly?: boolean;
  trustProxy?: string | true;
  allowedHosts?: string;
  answerWithin?: string;
  quiet?: boolean;
}

const SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

// `cronguard serve`: the web page and JSON API over the run log, until a signal stops it.
export async function serve(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('serve', 'a web page and JSON API over the run log'))
    .option('--listen <address>', 'ADDRESS:PORT to listen on', DEFAULT_LISTEN)
    .option('--token-file <file>', 'a token for the API (bearer) and the login form; needed off loopback')
    .option('--read-only', 'no Run now, Pause or Resume: every POST is refused, nothing is written')
    .option('--trust-proxy [addresses]', 'take X-Forwarded-* from these proxies (comma-separated; alone: one on this machine)')
    .option('--allowed-hosts <names>', 'host names to answer to besides this machine\'s own (comma-separated)')
    .option('--answer-within <duration>', `a page says the log cannot be read (503) when it is silent this long (default ${ANSWER_MS / 1000}s)`)
    .option('-q, --quiet', 'no line per request on stderr')
    .addHelpText('after', HELP);
  parse(program, args);
  const flags = program.opts<Flags>();
  const address = parseListen(flags.listen);
  const readOnly = flags.readOnly === true;
  if (!isLoopback(address.host) && !flags.tokenFile && !readOnly) {
    throw new UsageError(`--listen ${flags.listen} is reachable from other machines: give --token-file FILE, or --read-only`);
  }
  const trusted = parseTrustProxy(flags.trustProxy);
  const allowedHosts = parseAllowedHosts(flags.allowedHosts);
  const say = messages(true, 'cronguard serve');
  const tokenFile = flags.tokenFile === undefined ? null : new TokenFile(flags.tokenFile, say.warn);
  const auth = tokenFile === null ? null : new TokenAuth(() => tokenFile.current());
  const answerMs = flags.answerWithin === undefined ? ANSWER_MS : parseDuration(flags.answerWithin, '--answer-within');
  if (answerMs < 100) throw new UsageError(`--answer-within ${flags.answerWithin} is shorter than 100ms`);
  const store = new StoreAccess(new StoreChoice(program.opts(), settings), readOnly, answerMs);
  const stop = new AbortController();
  const app = buildApp({ store, auth, quiet: flags.quiet === true, address, trusted, allowedHosts }, stop.signal);
  const running = await listen(app, address, stop);
  // HUP reloads (the token file) and never stops: under systemd, Restart=on-failure would
  // leave a server that a HUP had stopped with 0 down.
  const reload = () => (tokenFile ? tokenFile.reload('SIGHUP') : say.warn('SIGHUP: nothing to read again (no --token-file)'));
  process.on('SIGHUP', reload);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    for (const s of SIGNALS) process.once(s, () => resolve(s));
    say.warn(`listening on ${running.url}${readOnly ? ' (read-only)' : ''}${auth ? ' (token required)' : ''}; TERM or ^C stops it`);
  });
  process.off('SIGHUP', reload);
  tokenFile?.close();
  await running.close();
  await store.close();
  if (!flags.quiet) say.warn(`stopped by ${signal}`);
  return 0;
}
