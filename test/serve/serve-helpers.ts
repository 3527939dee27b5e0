import { afterEach } from 'vitest';
import { collected, type Started, start, waitFor } from '../helpers.js';

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

export async function serve(args: readonly string[], env: NodeJS.ProcessEnv): Promise<Served> {
  const started = start(['serve', '--listen', '127.0.0.1:0', ...args], env);
  const output = collected(started);
  let exited = false;
  void started.done.then(() => (exited = true));
  const listening = /listening on (http:\/\/[^\s;]+?)\/?[\s;]/;
  await waitFor(() => exited || listening.test(output.stderr()), 'the server to listen');
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

// The events of a server-sent event stream until `until` says enough (or the stream ends).
export async function events(response: Response, until: (events: { event: string; data: string }[]) => boolean): Promise<{ event: string; data: string }[]> {
  const seen: { event: string; data: string }[] = [];
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    while (!until(seen)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf('\n\n');
      for (; end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = [...block.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join('\n');
        if (event) seen.push({ event, data });
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return seen;
}
