import type { Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { contextStorage } from 'hono/context-storage';
import { PermissionError, UnavailableError, UsageError } from '../errors.js';
import { redact } from '../util/redact.js';
import { CLIENT_JS, CSS } from './assets.js';
import { guard, type TokenAuth } from './auth.js';
import type { ServeContext } from './context.js';
import { Csrf } from './csrf.js';
import { hostCheck } from './hosts.js';
import type { ListenAddress } from './listen.js';
import { loginRoutes } from './login.js';
import { clientInfo, clientOf, type TrustedProxies } from './proxy.js';
import { apiRoutes } from './routes-api.js';
import { pageRoutes } from './routes-pages.js';
import { stopRoutes } from './routes-stop.js';
import { sseRoutes } from './sse.js';
import { type StoreAccess, StoreDown } from './store-access.js';
import { Throttle } from './throttle.js';
import { errorPage } from './views/layout.js';
import { Watcher } from './watcher.js';

export interface ServeOptions {
  readonly store: StoreAccess;
  readonly auth: TokenAuth | null;
  readonly quiet: boolean;
  readonly address: ListenAddress;
  // --trust-proxy and --allowed-hosts (see proxy.ts, hosts.ts).
  readonly trusted: TrustedProxies | null;
  readonly allowedHosts: readonly string[];
}

// The largest request body: a form or a request's arguments, never more.
const MAX_BODY = 1024 * 1024;

export interface Running {
  // The address it listens on, as a URL (the port the system chose for port 0).
  readonly url: string;
  close(): Promise<void>;
}

// Scripts and styles only from this server, no framing, no form posting elsewhere: an
// escaping mistake could not load anything from outside.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export function buildApp(options: ServeOptions, stopping: AbortSignal): Hono {
  const { store, auth } = options;
  const csrf = new Csrf();
  const ctx: ServeContext = { store, csrf, watcher: new Watcher(store), stopping };
  const throttle = new Throttle();
  const app = new Hono();
  app.use(clientInfo(options.trusted));
  if (!options.quiet) app.use(requestLog);
  app.use(headers);
  // A token (or its cookie) is what a rebinding page cannot have; without one, or where the
  // operator named the hosts, the Host must name this server.
  if (!auth || options.allowedHosts.length > 0) app.use(hostCheck(options.allowedHosts));
  app.use(bodyLimit({ maxSize: MAX_BODY, onError: (c) => c.text('request body too large', 413) }));
  // The pages' frame asks whether the browser is logged in (a "log out" link).
  if (auth) app.use(contextStorage());
  app.use(guard(auth, csrf, store.readOnly, throttle));
  const cached = { 'cache-control': 'public, max-age=31536000, immutable' };
  app.get('/assets/app.js', (c) => c.body(CLIENT_JS, 200, { ...cached, 'content-type': 'text/javascript; charset=utf-8' }));
  app.get('/assets/style.css', (c) => c.body(CSS, 200, { ...cached, 'content-type': 'text/css; charset=utf-8' }));
  loginRoutes(app, auth, csrf, throttle);
  pageRoutes(app, ctx);
  stopRoutes(app, ctx);
  apiRoutes(app, ctx);
  sseRoutes(app, ctx);
  app.notFound((c) => (c.req.path.startsWith('/api/') ? c.json({ error: 'no such endpoint' }, 404) : c.html(errorPage('Not found', 'There is no such page.'), 404)));
  app.onError((error, c) => {
    const api = c.req.path.startsWith('/api/') || c.req.path === '/metrics';
    if (error instanceof StoreDown) {
      const message = `The run log cannot be read right now: ${redact(error.message)}`;
      if (api) return c.json({ error: message }, 503);
      return c.html(errorPage('Run log unavailable', message, 'This server keeps running; reload the page once the database is back.'), 503);
    }
    process.stderr.write(redact(`cronguard serve: internal error (this is a bug; please report it): ${error.stack ?? error.message}\n`));
    return api ? c.json({ error: 'internal error' }, 500) : c.html(errorPage('Internal error', 'Something went wrong in cronguard; the server log says what.'), 500);
  });
  return app;
}

// One line per request on stderr: time, client (behind a trusted proxy, the proxy's
// client), method, path, status, milliseconds.
const requestLog: MiddlewareHandler = async (c, next) => {
  const started = performance.now();
  await next();
  const client = clientOf(c).address ?? '-';
  const url = new URL(c.req.url);
  const line = `${new Date().toISOString()} ${client} ${c.req.method} ${url.pathname}${url.search} ${c.res.status} ${(performance.now() - started).toFixed(1)}ms`;
  process.stderr.write(`${redact(line.replace(/[\x00-\x1f\x7f]/g, '?'))}\n`);
};

// Security headers on every answer, and how long the server took (Server-Timing, which a
// browser's developer tools and the bench read).
const headers: MiddlewareHandler = async (c, next) => {
  const started = performance.now();
  await next();
  c.res.headers.append('server-timing', `app;dur=${(performance.now() - started).toFixed(1)}`);
  c.res.headers.set('content-security-policy', CSP);
  c.res.headers.set('x-content-type-options', 'nosniff');
  c.res.headers.set('referrer-policy', 'same-origin');
  if (!c.res.headers.has('cache-control')) c.res.headers.set('cache-control', 'no-store');
};

// Listens, with the contract's exit codes for what stops it: an address in use or not of
// this machine (69), a port below 1024 without the right (77), a host name that does not
// resolve (64).
export async function listen(app: Hono, address: ListenAddress, stop: AbortController): Promise<Running> {
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  const shown = address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') reject(new UnavailableError(`--listen ${shown}: the address is already in use`));
      else if (error.code === 'EACCES') reject(new PermissionError(`--listen ${shown}: permission denied (ports below 1024 need privileges)`));
      else if (error.code === 'EADDRNOTAVAIL') reject(new UnavailableError(`--listen ${shown}: not an address of this machine`));
      else if (error.code === 'ENOTFOUND' || error.code === 'EAI_AGAIN') reject(new UsageError(`--listen ${shown}: unknown host`));
      else reject(new UnavailableError(`--listen ${shown}: ${error.message}`));
    });
    server.listen(address.port, address.host, () => resolve());
  });
  // Errors after start (a socket the system refused) are worth a line, never a crash.
  server.on('error', (error) => process.stderr.write(`cronguard serve: ${error.message}\n`));
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return {
    url: `http://${host}:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        stop.abort();
        server.close(() => resolve());
        // Event streams and idle keep-alive connections would hold close() for ever.
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 1000).unref();
      }),
  };
}
