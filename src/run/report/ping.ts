import { createHash } from 'node:crypto';
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { createRequire } from 'node:module';
import type { SecureContext } from 'node:tls';
import { VERSION } from '../../cli/options.js';
import type { PingConfig } from '../../cli/ping.js';
import { describe } from '../../errors.js';
import { formatDuration } from '../../util/duration.js';
import { withExtraCa } from '../../util/extra-ca.js';
import { type Messages, sleep } from '../../util/io.js';
import { maskSecrets } from '../../util/redact.js';
import { monotonicMs } from '../../util/time.js';

// Monitoring pings in the Healthchecks protocol. This module is imported only when
// --ping-url is given, and loads node:http or node:https only when the first ping goes
// out: the plain run path pays nothing for it.

// Each request may take this long; a ping is tried this often, waiting 0.5 s, then 1 s.
const TRY_TIMEOUT_MS = 5000;
const TRIES = 3;
const BACKOFF_MS = 500;
// The start ping's whole budget, and how long cronguard may linger after the command
// ended: waiting for a start still in flight, then the end ping with its retries.
const START_BOUND_MS = 10_000;
const END_BOUND_MS = 10_000;

// Run ids are name-based UUIDs (RFC 9562 version 5) of the run's run_key in this namespace,
// so the rid Healthchecks shows can be traced to a row of the run log, and back.
const RID_NAMESPACE = Buffer.from('0f9281b88ae443b2b0465ecd87da8cf9', 'hex');

type Transport = { request(url: URL, options: RequestOptions & { secureContext?: SecureContext }, callback: (res: IncomingMessage) => void): ClientRequest };

// Why one request failed, and whether another try could fare better.
interface Failure {
  readonly why: string;
  readonly retry: boolean;
}

// The pings of one invocation, however many runs it makes (--every): a failed ping never
// changes a run's outcome or exit code, and is worth one warning line per invocation at most.
export class Pinger {
  private warned = false;
  private transport: Transport | null = null;
  private tls: { secureContext?: SecureContext } | null = null;
  private readonly where: string;

  constructor(
    private readonly config: PingConfig,
    private readonly job: string,
    private readonly say: Messages,
  ) {
    // Warnings name the server only: the path is the check's key, and cron mail travels.
    this.where = new URL(config.url).origin;
  }

  // The pings of the run whose first attempt has this run_key.
  run(runKey: string): PingRun {
    return new PingRun(this, runUuid(runKey));
  }

  // How a run that exited so is reported: by its code (--ping-exit-code; Healthchecks reads
  // /0 as success), else as success or failure.
  end(exitCode: number, output: string | null): { readonly signal: string; readonly body: Buffer } {
    const signal = this.config.exitCode ? String(exitCode) : exitCode === 0 ? 'success' : 'fail';
    // The output was masked as it came (see supervisor/mask.ts); a message of cronguard's is masked here.
    return { signal, body: tail(output === null ? null : maskSecrets(output), this.config.bodyBytes) };
  }

  // Sends one signal, retrying network errors, timeouts, 408, 429 and 5xx until `deadline`
  // (monotonicMs).
  // Resolves to what went wrong, or null; never rejects.
  async send(signal: string, rid: string, body: Buffer, deadline: number, stop?: AbortSignal): Promise<string | null> {
    const target = signalUrl(this.config.url, signal, rid);
    let failure: Failure = { why: 'no time left', retry: false };
    let tries = 0;
    while (tries < TRIES && monotonicMs() < deadline) {
      tries += 1;
      const result = await this.request(target, body, Math.min(TRY_TIMEOUT_MS, deadline - monotonicMs()));
      if (result === null) {
        this.say.verbose(`${this.job}: ping ${signal} delivered: ${target.href}`);
        return null;
      }
      failure = result;
      this.say.verbose(`${this.job}: ping ${signal}, try ${tries} of ${TRIES}: ${failure.why} (${target.href})`);
      if (!failure.retry || tries === TRIES || stop?.aborted) break;
      await sleep(Math.min(BACKOFF_MS * 2 ** (tries - 1), deadline - monotonicMs()), stop);
      if (stop?.aborted) break;
    }
    return `${signal}: ${failure.why}${tries > 1 ? ` after ${tries} tries` : ''}`;
  }

  // The one warning line for the first run whose pings failed; later ones show with -v.
  warning(failures: readonly (string | null)[]): string | null {
    const failed = failures.filter((f) => f !== null);
    if (failed.length === 0 || this.warned) return null;
    this.warned = true;
    return `${this.job}: ping to ${this.where} failed (${failed.join('; ')}); the run's outcome is unaffected`;
  }

  private request(target: URL, body: Buffer, timeoutMs: number): Promise<Failure | null> {
    return new Promise((resolve) => {
      let req: ClientRequest | undefined;
      let settled = false;
      const settle = (result: Failure | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const timer = setTimeout(() => {
        settle({ why: `no answer within ${formatDuration(timeoutMs)}`, retry: true });
        req?.destroy();
      }, timeoutMs);
      const headers = { 'user-agent': `cronguard/${VERSION}`, 'content-type': 'text/plain; charset=utf-8', 'content-length': String(body.length) };
      try {
        // By require, not import(): from the CommonJS bundle, import() would start the ESM
        // loader too. The start ping gets here after the command was spawned.
        this.transport ??= createRequire(import.meta.url)(target.protocol === 'https:' ? 'node:https' : 'node:http') as Transport;
        // A fresh connection per ping: pings are minutes apart, and nothing pooled may
        // outlive the run.
        // https checks the server against the default roots, NODE_EXTRA_CA_CERTS included.
        this.tls ??= target.protocol === 'https:' ? withExtraCa({}) : {};
        req = this.transport.request(target, { method: 'POST', agent: false, headers, ...this.tls }, (res) => {
          const status = res.statusCode ?? 0;
          const result = status >= 200 && status < 300 ? null : { why: `HTTP ${status}`, retry: status === 408 || status === 429 || status >= 500 };
          // The status is the answer; a body that breaks off after it changes nothing.
          res.on('error', () => settle(result));
          res.resume();
          settle(result);
        });
      } catch (error) {
        // Nothing went out, and no retry would change what Node refused.
        settle({ why: describe(error), retry: false });
        return;
      }
      req.on('error', (error) => settle({ why: describe(error), retry: true }));
      req.end(body);
    });
  }
}

// One run's start and end. The start goes out without delaying anything; the end waits for
// it, so the two arrive in order, and then for its own delivery, within END_BOUND_MS.
export class PingRun {
  private starting: Promise<string | null> = Promise.resolve(null);
  private readonly ended = new AbortController();

  constructor(
    private readonly pinger: Pinger,
    readonly rid: string,
  ) {}

  start(): void {
    this.starting = this.pinger.send('start', this.rid, Buffer.alloc(0), monotonicMs() + START_BOUND_MS, this.ended.signal);
  }

  // Reports the run's end: its exit code and the tail of its output. Returns the warning
  // line to print, if this is the invocation's first failed ping.
  async finish(exitCode: number, output: string | null): Promise<string | null> {
    const deadline = monotonicMs() + END_BOUND_MS;
    // A start still being tried gets no further tries, only the one in flight.
    this.ended.abort();
    const start = await this.starting;
    const { signal, body } = this.pinger.end(exitCode, output);
    const end = await this.pinger.send(signal, this.rid, body, deadline);
    return this.pinger.warning([start, end]);
  }
}

// The URL of one signal: the check's URL with /start, /fail or /<code> after its path (no
// `//start` after a trailing slash), its own query kept, and the run id added to it.
export function signalUrl(base: string, signal: string, rid: string): URL {
  const url = new URL(base);
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = signal === 'success' ? path || '/' : `${path}/${signal}`;
  url.search = `${url.search === '' ? '?' : `${url.search}&`}rid=${rid}`;
  return url;
}

export function runUuid(runKey: string): string {
  const hash = createHash('sha1').update(RID_NAMESPACE).update(runKey).digest();
  hash[6] = ((hash[6] as number) & 0x0f) | 0x50;
  hash[8] = ((hash[8] as number) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// The last `limit` bytes of the output, never starting inside a UTF-8 character.
export function tail(output: string | null, limit: number): Buffer {
  const bytes = Buffer.from(output ?? '', 'utf8');
  if (bytes.length <= limit) return bytes;
  let start = bytes.length - limit;
  while (start < bytes.length && ((bytes[start] as number) & 0xc0) === 0x80) start++;
  return bytes.subarray(start);
}
