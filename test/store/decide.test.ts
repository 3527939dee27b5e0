import { describe, expect, it } from 'vitest';
import type { AdmitOptions, ScheduledRule } from '../../src/store/admission.js';
import { decide, type Findings, readsLastStart } from '../../src/store/decide.js';
import { claimedRequest } from '../../src/store/requests.js';

// The rule itself, without a store: what each finding makes of an invocation. The stores'
// reading and writing around it are held to one table by admission-table.test.ts.

const RULES: AdmitOptions = {
  oneRunPerTick: false, isGone: () => false, minIntervalMs: null, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null,
};
const NOTHING: Findings = { paused: null, due: [], lastStart: null, schedule: null, saidAt: null };
const NOW = Date.parse('2026-12-05T12:00:00.000Z');
const MINUTE = 60_000;
const ago = (ms: number) => new Date(NOW - ms).toISOString();
const pause = { reason: 'maintenance', since: ago(MINUTE), by: 'ops@h', until: null, fleet: false };
const plain = claimedRequest(1, null);
const withArgs = (id: number) => claimedRequest(id, [`--id=${id}`]);

// A schedule that is due only when the last start is older than an hour.
const hourly: ScheduledRule = {
  zone: 'UTC',
  early: true,
  inLoop: () => hourly,
  verdict: (spec, _said, lastMs, nowMs) =>
    spec === null
      ? { due: false, refusal: { admitted: false, reason: 'unscheduled', problem: null, warn: true } }
      : lastMs === null || nowMs - lastMs >= 60 * MINUTE
        ? { due: true }
        : { due: false, refusal: { admitted: false, reason: 'schedule', schedule: spec } },
};

describe('decide', () => {
  const cases: [string, Partial<Findings>, Partial<AdmitOptions>, unknown][] = [
    ['nothing in the way', {}, {}, { admitted: true, requests: [] }],
    ['a pause holds, requests or not', { paused: pause, due: [plain] }, {}, { admitted: false, reason: 'disabled', paused: pause }],
    ['a pause holds by hand too', { paused: pause }, { manual: true }, { admitted: false, reason: 'disabled', paused: pause }],
    ['--on-request with nothing due', {}, { onRequest: true }, { admitted: false, reason: 'idle' }],
    ['--on-request with a request', { due: [plain] }, { onRequest: true }, { admitted: true, requests: [plain] }],
    ['within the interval', { lastStart: ago(MINUTE) }, { minIntervalMs: 10 * MINUTE }, { admitted: false, reason: 'interval', lastStartedAt: ago(MINUTE) }],
    ['past the interval', { lastStart: ago(20 * MINUTE) }, { minIntervalMs: 10 * MINUTE }, { admitted: true, requests: [] }],
    ['within the interval, by hand', { lastStart: ago(MINUTE) }, { minIntervalMs: 10 * MINUTE, manual: true }, { admitted: true, requests: [] }],
    ['within the interval, a request', { lastStart: ago(MINUTE), due: [plain] }, { minIntervalMs: 10 * MINUTE }, { admitted: true, requests: [plain] }],
    ['a loop spaced from the last run', { lastStart: ago(MINUTE) }, { spacingMs: 5 * MINUTE }, { admitted: false, reason: 'interval', lastStartedAt: ago(MINUTE) }],
    ['--on-request with an interval that passed', { lastStart: ago(20 * MINUTE) }, { onRequest: true, minIntervalMs: 10 * MINUTE }, { admitted: true, requests: [] }],
    ['requests: all without args and the oldest with', { due: [withArgs(1), plain, withArgs(3)] }, {}, { admitted: true, requests: [withArgs(1), plain] }],
    ['--batch: all of them, up to its bound', { due: [withArgs(1), plain, withArgs(3)] }, { batch: true, batchMax: 2 }, { admitted: true, requests: [withArgs(1), plain] }],
    ['a schedule not due', { schedule: '0 * * * *', lastStart: ago(MINUTE) }, { scheduled: hourly }, { admitted: false, reason: 'schedule', schedule: '0 * * * *' }],
    ['a schedule due', { schedule: '0 * * * *', lastStart: ago(2 * 60 * MINUTE) }, { scheduled: hourly }, { admitted: true, requests: [] }],
    ['no schedule: said, once a day', {}, { scheduled: hourly }, { admitted: false, reason: 'unscheduled', problem: null, warn: true }],
    ['a schedule not due, a request', { schedule: '0 * * * *', lastStart: ago(MINUTE), due: [plain] }, { scheduled: hourly }, { admitted: true, requests: [plain] }],
    ['a schedule, by hand', { schedule: '0 * * * *', lastStart: ago(MINUTE) }, { scheduled: hourly, manual: true }, { admitted: true, requests: [] }],
  ];
  for (const [name, found, rules, verdict] of cases) {
    it(name, () => expect(decide({ ...NOTHING, ...found }, NOW, { ...RULES, ...rules })).toEqual(verdict));
  }

  it('reads the last start only where a rule needs it', () => {
    expect(readsLastStart(RULES)).toBe(false);
    expect(readsLastStart({ ...RULES, minIntervalMs: MINUTE })).toBe(true);
    expect(readsLastStart({ ...RULES, spacingMs: MINUTE })).toBe(true);
    expect(readsLastStart({ ...RULES, scheduled: hourly })).toBe(true);
    expect(readsLastStart({ ...RULES, minIntervalMs: MINUTE, manual: true })).toBe(false);
  });
});
