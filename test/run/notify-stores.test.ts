import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// The alert state lives in the run log (jobs.alerted_at), moved by compare-and-set: every
// store notifies once per incident, and invocations that share a log (hosts of a fleet)
// notify once between them, however close together their runs end.

const events = (file: string) => lines(file).filter((l) => /^(failed|recovered) /.test(l));

describe.each(STORES)('notifications once per incident (%s)', (kind) => {
  it('fail, fail, succeed, succeed, fail: failed, recovered, failed', async () => {
    const box = storeBox(kind);
    const job = box.job('streak');
    const file = box.path('notified');
    for (const command of ['false', 'false', 'true', 'true', 'false']) {
      await cronguard(['-n', job, '--every-tick', '--notify', `${fixture('notified.sh')} ${file}`, '--', command], box.env);
    }
    const ids = (await box.runs()).map((r) => Number(r.id));
    expect(events(file)).toEqual([
      expect.stringMatching(new RegExp(`^failed job=${job} run=${ids[0]} exit=1 `)),
      expect.stringMatching(new RegExp(`^recovered job=${job} run=${ids[2]} exit=0 `)),
      expect.stringMatching(new RegExp(`^failed job=${job} run=${ids[4]} exit=1 `)),
    ]);
  });

  it('two invocations sharing the log that fail together notify once; succeeding together, once again', async () => {
    const box = storeBox(kind);
    const job = box.job('fleet');
    const file = box.path('notified');
    for (const [round, code] of [[1, 3], [2, 0]] as const) {
      const held = box.path(`held-${round}`);
      const go = box.path(`go-${round}`);
      // No lock, every tick: both run at once, as on two hosts, and end as one.
      const args = ['-n', job, '-l', 'none', '--every-tick', '--notify', `${fixture('notified.sh')} ${file}`, '--', 'sh', '-c', `"$0" "$1" "$2"; exit ${code}`, fixture('hold.sh'), held, go];
      const both = [start(args, box.env), start(args, box.env)];
      await waitFor(() => lines(held).length === 2, 'both runs to start');
      release(go);
      expect((await Promise.all(both.map((b) => b.done))).map((r) => r.code)).toEqual([code, code]);
    }
    expect(events(file)).toEqual([expect.stringMatching(new RegExp(`^failed job=${job} `)), expect.stringMatching(new RegExp(`^recovered job=${job} `))]);
    expect((await box.runs()).map((r) => r.status).sort()).toEqual(['failed', 'failed', 'succeeded', 'succeeded']);
  });
});
