import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { scheduledRule } from '../../src/schedule/rule.js';
import type { Admission, AdmitOptions } from '../../src/store/admission.js';
import type { RunStore } from '../../src/store/run-store.js';
import type { NewRun } from '../../src/store/types.js';
import { openStore, STORES, type StoreBox, storeBox } from '../stores.js';

// One admission rule, three implementations (PostgreSQL's admit() in SQL, MySQL's and
// SQLite's in TypeScript): the same table of cases, the same expected verdicts, against
// each store. A case sets up what the log holds through the store's own interface (and
// the SQL docs/requests.md gives a web application), then asks for one admission (issue 37, item 4).

const RULES: AdmitOptions = {
  oneRunPerTick: false, isGone: () => false, minIntervalMs: null, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null,
};
const HOUR = 3_600_000;

// The start of this minute: the tick of a run started now.
const thisTick = () => new Date(Math.floor(Date.now() / 60_000) * 60_000);

function newRun(job: string, over: Partial<NewRun> = {}): NewRun {
  const now = new Date();
  return {
    job, trigger: 'cron', attempt: 1, host: 'host-a', pid: 4242, username: 'alice', command: 'true', startedAt: now, invokedAt: now,
    tick: null, lockBackend: 'flock', lockKey: `/run/lock/${job}`, slot: 0, maxRunning: 1, runKey: `key-${randomBytes(8).toString('hex')}`, wrapperStart: 'boot:1', ...over,
  };
}

interface Given {
  readonly store: RunStore;
  readonly box: StoreBox;
  readonly job: string;
  // A run admitted, its command started, and ended (succeeded) just now, under these rules.
  ran(over?: Partial<NewRun>, rules?: Partial<AdmitOptions>): Promise<void>;
  // A run that ended long ago, written into the log (an admission stamps its own time).
  ranBefore(ms: number): Promise<void>;
  // A request, as a web application makes it; `inMs`: not before then.
  request(args?: string[], inMs?: number): Promise<void>;
}

interface Case {
  readonly name: string;
  readonly given?: (g: Given) => Promise<void>;
  readonly rules?: Partial<AdmitOptions>;
  readonly run?: () => Partial<NewRun>;
  // 'run [ARGS of each claimed request]' or 'refused REASON'.
  readonly verdict: string;
  // Where the embedded log differs, by design, and why.
  readonly sqlite?: { readonly verdict: string; readonly why: string };
}

const pause = { reason: 'maintenance', since: new Date().toISOString(), by: 'ops@h' };

const CASES: readonly Case[] = [
  { name: 'a first run', verdict: 'run []' },
  { name: 'a paused job', given: (g) => g.store.setPaused(g.job, pause, 'ops@h', pause.since), verdict: 'refused disabled' },
  { name: 'a paused fleet', given: async (g) => void (await g.store.setFleetPause(pause, 'ops@h', pause.since)), verdict: 'refused disabled' },
  { name: 'a paused job, run from a terminal', given: (g) => g.store.setPaused(g.job, pause, 'ops@h', pause.since), rules: { manual: true }, verdict: 'refused disabled' },
  { name: 'within the minimum interval', given: (g) => g.ran(), rules: { minIntervalMs: HOUR }, verdict: 'refused interval' },
  { name: 'within the minimum interval, from a terminal', given: (g) => g.ran(), rules: { minIntervalMs: HOUR, manual: true }, verdict: 'run []' },
  { name: 'past the minimum interval', given: (g) => g.ranBefore(2 * HOUR), rules: { minIntervalMs: HOUR }, verdict: 'run []' },
  {
    name: 'within the minimum interval, with a request',
    given: async (g) => {
      await g.ran();
      await g.request();
    },
    rules: { minIntervalMs: HOUR },
    verdict: 'run [[]]',
  },
  { name: "a loop's first run within its period", given: (g) => g.ran(), rules: { spacingMs: HOUR }, verdict: 'refused interval' },
  { name: 'on request, nothing requested', rules: { onRequest: true }, verdict: 'refused idle' },
  { name: 'on request, a request not due yet', given: (g) => g.request([], HOUR), rules: { onRequest: true }, verdict: 'refused idle' },
  {
    name: 'on request, two requests without arguments: both served',
    given: async (g) => {
      await g.request();
      await g.request();
    },
    rules: { onRequest: true },
    verdict: 'run [[],[]]',
  },
  {
    name: 'on request, two with arguments: the oldest served',
    given: async (g) => {
      await g.request(['a']);
      await g.request(['b']);
    },
    rules: { onRequest: true },
    verdict: 'run [["a"]]',
  },
  {
    name: 'on request, a batch of at most two of three',
    given: async (g) => {
      await g.request(['a']);
      await g.request(['b']);
      await g.request(['c']);
    },
    rules: { onRequest: true, batch: true, batchMax: 2 },
    verdict: 'run [["a"],["b"]]',
  },
  {
    name: 'on request, with a minimum interval past: a run with no request',
    given: (g) => g.ranBefore(2 * HOUR),
    rules: { onRequest: true, minIntervalMs: HOUR },
    verdict: 'run []',
  },
  {
    name: 'a paused job with a request',
    given: async (g) => {
      await g.request();
      await g.store.setPaused(g.job, pause, 'ops@h', pause.since);
    },
    rules: { onRequest: true },
    verdict: 'refused disabled',
  },
  {
    name: 'the tick another host ran',
    given: (g) => g.ran({ host: 'host-b', tick: thisTick() }, { oneRunPerTick: true, manual: false }),
    rules: { oneRunPerTick: true },
    run: () => ({ tick: thisTick() }),
    verdict: 'refused tick',
    sqlite: { verdict: 'run []', why: 'the embedded log belongs to one host, and the rule is about the runs of other hosts' },
  },
  {
    name: 'the tick another host ran, from a terminal',
    given: (g) => g.ran({ host: 'host-b', tick: thisTick() }, { oneRunPerTick: true, manual: false }),
    // A run from a terminal belongs to no tick.
    rules: { oneRunPerTick: true, manual: true },
    run: () => ({ tick: null, trigger: 'manual' }),
    verdict: 'run []',
  },
  { name: 'scheduled, with no schedule', rules: { scheduled: scheduledRule() }, verdict: 'refused unscheduled' },
  {
    name: 'scheduled, run at its fire this minute',
    given: (g) => g.box.setSchedule(g.job, '* * * * *'),
    rules: { scheduled: scheduledRule() },
    verdict: 'run []',
  },
  {
    name: 'scheduled, having run this minute already',
    given: async (g) => {
      await g.box.setSchedule(g.job, '* * * * *');
      await g.ran();
    },
    rules: { scheduled: scheduledRule() },
    verdict: 'refused schedule',
  },
  {
    name: 'scheduled and not due, with a request',
    given: async (g) => {
      await g.box.setSchedule(g.job, '* * * * *');
      await g.ran();
      await g.request(['now']);
    },
    rules: { scheduled: scheduledRule() },
    verdict: 'run [["now"]]',
  },
];

function said(admission: Admission): string {
  return admission.admitted ? `run ${JSON.stringify(admission.requests.map((r) => r.args))}` : `refused ${admission.reason}`;
}

const opened: RunStore[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

describe.each(STORES)('the admission rule (%s)', (kind) => {
  it.each(CASES)('$name: $verdict', async (c) => {
    const box = storeBox(kind);
    const job = box.job('admitted');
    const store = await openStore(kind, box);
    opened.push(store);
    await store.migrate();
    const given: Given = {
      store,
      box,
      job,
      ran: async (over = {}, rules = {}) => {
        const admission = await store.admit(newRun(job, over), { ...RULES, manual: true, ...rules });
        if (!admission.admitted) throw new Error(`set-up run refused: ${admission.reason}`);
        await store.setChildPid(admission.runId, 4243, 'true');
        await store.finishRun(admission.runId, { status: 'succeeded', finishedAt: new Date(), durationMs: 10, exitCode: 0, signal: null, output: null, outputTruncated: false, error: null }, true);
      },
      ranBefore: (ms) => box.insertRuns([{ job, status: 'succeeded', startedAt: new Date(Date.now() - ms), durationMs: 10 }]),
      request: async (args = [], inMs = 0) => {
        await store.addRequest({ job, args, notBefore: new Date(Date.now() + inMs), requestedBy: 'web' });
      },
    };
    await c.given?.(given);
    const admission = await store.admit(newRun(job, c.run?.()), { ...RULES, ...c.rules });
    expect(said(admission)).toBe(kind === 'sqlite' && c.sqlite ? c.sqlite.verdict : c.verdict);
  });
});
