import type { Settings } from '../cli/settings.js';
import { UsageError } from '../errors.js';
import { TokenAuth } from '../serve/auth.js';
import { DEFAULT_LISTEN, isLoopback, parseListen, readToken } from '../serve/listen.js';
import { buildApp, listen } from '../serve/server.js';
import { StoreAccess } from '../serve/store-access.js';
import { messages } from '../util/io.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

const HELP = `
Runs in the foreground until TERM or INT, one line per request on stderr (none
with -q). Pages: / (every job), /jobs/NAME, /runs/ID. JSON: /api/jobs,
/api/jobs/NAME/runs, /api/runs/ID, /api/requests/ID, and
POST /api/jobs/NAME/requests {"args": [...], "by": "..."}; /metrics as
cronguard metrics.

An address other than loopback needs --token-file (a bearer token for the API,
a login form for the pages) or --read-only. A running job's live output shows
when the server shares the job's state directory and host.
`;

interface Flags {
  listen: string;
  tokenFile?: string;
  readOnly?: boolean;
  quiet?: boolean;
}

const SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

// `cronguard serve`: the web page and JSON API over the run log, until a signal stops it.
export async function serve(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('serve', 'a web page and JSON API over the run log'))
    .option('--listen <address>', 'ADDRESS:PORT to listen on', DEFAULT_LISTEN)
    .option('--token-file <file>', 'a token for the API (bearer) and the login form; needed off loopback')
    .option('--read-only', 'no Run now, Pause or Resume: every POST is refused, nothing is written')
    .option('-q, --quiet', 'no line per request on stderr')
    .addHelpText('after', HELP);
  parse(program, args);
  const flags = program.opts<Flags>();
  const address = parseListen(flags.listen);
  const readOnly = flags.readOnly === true;
  if (!isLoopback(address.host) && !flags.tokenFile && !readOnly) {
    throw new UsageError(`--listen ${flags.listen} is reachable from other machines: give --token-file FILE, or --read-only`);
  }
  const say = messages(true, 'cronguard serve');
  const auth = flags.tokenFile === undefined ? null : new TokenAuth(readToken(flags.tokenFile, say.warn));
  const store = new StoreAccess(new StoreChoice(program.opts(), settings), readOnly);
  const stop = new AbortController();
  const app = buildApp({ store, auth, quiet: flags.quiet === true, address }, stop.signal);
  const running = await listen(app, address, stop);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    for (const s of SIGNALS) process.once(s, () => resolve(s));
    say.warn(`listening on ${running.url}${readOnly ? ' (read-only)' : ''}${auth ? ' (token required)' : ''}; TERM or ^C stops it`);
  });
  await running.close();
  await store.close();
  if (!flags.quiet) say.warn(`stopped by ${signal}`);
  return 0;
}
