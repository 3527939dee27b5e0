import { afterEach } from 'vitest';
import type { RunRow } from '../../src/store/types.js';
import { collected, runs, type Started, start, waitFor } from '../helpers.js';

// A real `cronguard serve` process on a port the system chose, stopped after each test.
export interface Served {
  readonly url: string;
  readonly started: Started;
  stderr(): string;
  // fetch against the server, keeping the cookies it sets as a browser would.
  get(path: string, init?: RequestInit): Promise<Response>;
  post(path: string, form: Record<string, string>, init?: RequestInit): Promise<Response>;
  // The CSRF field of the forms on a page.
  csrf(path: string): Promise<string>;
  stop(): Promise<number | null>;
}

const running: Served[] = [];
afterEach(async () => {
  for (const served of running.splice(0)) await served.stop();
});

// The server waits up to a minute for the log's answers: the default 5 s, made for a database
// that stopped answering, is not a bound a busy test machine always keeps (load 20-40 gave a
// page the 503 of an outage). The outage tests give --answer-within themselves.
export async function serve(args: readonly string[], env: NodeJS.ProcessEnv): Promise<Served> {
  const answer = args.includes('--answer-within') ? [] : ['--answer-within', '60s'];
  const started = start(['serve', '--listen', '127.0.0.1:0', ...answer, ...args], env);
  const output = collected(started);
  let exited = false;
  void started.done.then(() => (exited = true));
  const listening = /listening on (http:\/\/[^\s;]+?)\/?[\s;]/;
  try {
    await waitFor(() => exited || listening.test(output.stderr()), 'the server to listen');
  } finally {
    // A server that never said where it listens is not left running after the test.
    if (!listening.test(output.stderr())) started.child.kill('SIGKILL');
  }
  const url = listening.exec(output.stderr())?.[1];
  if (!url) throw new Error(`serve did not start: ${output.stderr()}`);
  const cookies = new Map<string, string>();
  const get = async (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (cookies.size > 0) headers.set('cookie', [...cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const response = await fetch(`${url}${path}`, { redirect: 'manual', ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = (pair as string).indexOf('=');
      cookies.set((pair as string).slice(0, eq), (pair as string).slice(eq + 1));
    }
    return response;
  };
  const served: Served = {
    url,
    started,
    stderr: output.stderr,
    get,
    post: (path, form, init = {}) => get(path, { method: 'POST', body: new URLSearchParams(form), ...init }),
    csrf: async (path) => {
      const page = await (await get(path)).text();
      const token = /name="csrf" value="([0-9a-f]+)"/.exec(page)?.[1];
      if (!token) throw new Error(`no form on ${path}`);
      return token;
    },
    stop: async () => {
      if (!exited) started.child.kill('SIGTERM');
      return (await started.done).code;
    },
  };
  running.push(served);
  return served;
}

export interface ServerEvent {
  readonly event: string;
  readonly data: string;
}

// Reads a server-sent event stream: `until` waits for the events seen so far to satisfy a
// condition (or the stream to end) and returns them all.
// `lastId`: the id the last event that had one gave (what a browser's lastEventId says).
export function eventStream(response: Response): {
  until(enough: (events: ServerEvent[]) => boolean): Promise<ServerEvent[]>;
  lastId(): string | undefined;
  close(): Promise<void>;
} {
  const seen: ServerEvent[] = [];
  let lastId: string | undefined;
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let ended = false;
  return {
    async until(enough) {
      while (!enough(seen) && !ended) {
        const { value, done } = await reader.read();
        ended = done;
        buffer += decoder.decode(value, { stream: !done });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          lastId = /^id: (.*)$/m.exec(block)?.[1] ?? lastId;
          const data = [...block.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join('\n');
          if (event) seen.push({ event, data });
        }
      }
      return seen;
    },
    lastId: () => lastId,
    close: () => reader.cancel().catch(() => {}),
  };
}

// All the events of a stream until `enough`, then the stream is closed.
export async function events(response: Response, enough: (events: ServerEvent[]) => boolean): Promise<ServerEvent[]> {
  const stream = eventStream(response);
  try {
    return await stream.until(enough);
  } finally {
    await stream.close();
  }
}

// The runs of an embedded log that a job may be creating right now (no tables yet: none).
export function runsSoFar(stateDir: string): RunRow[] {
  try {
    return runs(stateDir);
  } catch {
    return [];
  }
}
