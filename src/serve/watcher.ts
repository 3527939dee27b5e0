import { type SlottedJobStatus, withSlots } from '../store/slot-holders.js';
import type { StoreAccess } from './store-access.js';

// Every job changed (the log went away or came back).
export const EVERYTHING = '*';
const MIN_INTERVAL_MS = 500;
const MAX_INTERVAL_MS = 5000;

export type Changes = ReadonlySet<string>;

// Watches the run log for the pages' live updates: while any page listens, reads every
// job's status about twice a second and tells the listeners which jobs changed. One reader
// for all the open pages, so ten browsers cost what one does; it waits at least five times
// as long as a read took, so a large log is not read back to back.
export class Watcher {
  private readonly listeners = new Set<(changes: Changes) => void>();
  // Null until the first read after the first listener came: what later reads compare with.
  private seen: Map<string, string> | null = null;
  private primed: Promise<void> = Promise.resolve();
  private prime = () => {};
  private down = false;
  private timer: NodeJS.Timeout | null = null;
  // A read is scheduled or under way: at most one loop, however listeners come and go.
  private running = false;
  // What the last read found, and its number (the id of the change events sent after it):
  // a page that refreshes itself for such an event is rendered from it, so ten open pages
  // cost one read of every job per change, not ten through the server's one connection.
  private latest: { readonly generation: number; readonly jobs: SlottedJobStatus[] } | null = null;
  private generation = 0;

  constructor(private readonly store: StoreAccess) {}

  // Calls `listener` with every change from now on; `ready` resolves once the state that
  // later changes are measured against has been read, so a page that fetches itself after
  // `ready` misses none.
  subscribe(listener: (changes: Changes) => void): { ready: Promise<void>; unsubscribe: () => void } {
    this.listeners.add(listener);
    if (!this.running) {
      this.running = true;
      this.seen = null;
      this.primed = new Promise((resolve) => (this.prime = resolve));
      this.schedule(0);
    }
    const unsubscribe = () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.timer) {
        clearTimeout(this.timer);
        this.timer = null;
        this.running = false;
        this.latest = null;
      }
    };
    return { ready: this.primed, unsubscribe };
  }

  // The number of the last read, for the change events sent now (0: none yet).
  get current(): number {
    return this.latest?.generation ?? 0;
  }

  // Every job's status as a read no older than change event `id` found it (the id a page
  // that refreshes itself for that event sends), or null: read afresh.
  jobsFor(id: string | undefined): SlottedJobStatus[] | null {
    const latest = this.latest;
    return latest && id !== undefined && /^\d{1,15}$/.test(id) && Number(id) > 0 && latest.generation >= Number(id) ? latest.jobs : null;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, ms);
  }

  private async poll(): Promise<void> {
    const started = Date.now();
    const changes = new Set<string>();
    try {
      const jobs = await this.store.read(async (s) => withSlots(s, await s.jobStatus(null)), []);
      if (this.down) changes.add(EVERYTHING);
      this.down = false;
      const next = new Map(jobs.map((j) => [j.job, digest(j)]));
      const seen = this.seen ?? next;
      for (const [job, d] of next) if (seen.get(job) !== d) changes.add(job);
      for (const job of seen.keys()) if (!next.has(job)) changes.add(job);
      this.seen = next;
      this.latest = { generation: ++this.generation, jobs };
    } catch {
      // Whatever failed, the pages fetch themselves again and say what it was (see server.ts).
      if (!this.down) changes.add(EVERYTHING);
      this.down = true;
      this.latest = null;
    }
    this.prime();
    if (changes.size > 0) for (const listener of this.listeners) listener(changes);
    // A read that took long because the log was unreachable (a connection that timed out)
    // must not put the next one off for minutes: the pages would not see it come back.
    if (this.listeners.size > 0) this.schedule(Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, 5 * (Date.now() - started))));
    else {
      this.running = false;
      this.latest = null;
    }
  }
}

// What a page shows of a job that can change without a new run id; with --max-running,
// who holds its slots.
function digest(j: SlottedJobStatus): string {
  return JSON.stringify([j.state, j.running_run_id, j.last_run_id, j.last_status, j.pending_requests, j.disabled_reason, j.disabled_since, j.slots?.running.map((h) => h.run_id)]);
}
