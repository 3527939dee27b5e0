import { describe, expect, it } from 'vitest';
import { openStore, STORES, storeBox } from '../stores.js';


// The alert state behind --notify: the outcome wanted, the state delivered, and one delivery
// at a time, claimed by compare-and-set: of invocations that record the same change at once
// (hosts of a fleet, each with its own connection), exactly one delivers it, and an outcome
// that comes while it delivers is handed to it when it is done (issue 35, item 14).
describe.each(STORES)('the alert state (%s)', (kind) => {
  it('one delivery at a time; a change that comes meanwhile goes to the deliverer; a failed delivery is tried again', async () => {
    const box = storeBox(kind);
    const job = box.job('alerted');
    const first = await openStore(kind, box);
    await first.migrate();
    const stores = [first, ...(await Promise.all(Array.from({ length: 7 }, () => openStore(kind, box))))];
    const T = 60_000;
    try {
      // A success while nothing failed has nothing to say.
      expect(await first.wantAlert(job, false, 1, 'a', T)).toBeNull();
      // Eight invocations fail at once: one claims the delivery, of its own run.
      const claims = await Promise.all(stores.map((s, i) => s.wantAlert(job, true, 10 + i, `t${i}`, T)));
      const holders = claims.flatMap((c, i) => (c ? [i] : []));
      expect(holders).toHaveLength(1);
      const holder = `t${holders[0]}`;
      // A success on another host while it delivers: nothing for that host to say now...
      expect(await first.wantAlert(job, false, 20, 'b', T)).toBeNull();
      // ...the deliverer says it once its failure is delivered: the recovery, of run 20.
      expect(await first.alertSent(job, holder, true, T)).toEqual({ failing: false, runId: 20 });
      // Its delivery fails: the state stays as delivered (failing), and the next outcome alike
      // claims it again.
      expect(await first.alertSent(job, holder, null, T)).toBeNull();
      expect(await stores[1]?.wantAlert(job, false, 21, 'c', T)).toEqual({ failing: false, runId: 21 });
      expect(await stores[1]?.alertSent(job, 'c', false, T)).toBeNull();
      // Said: one more success has nothing to say; a failure does again. Its deliverer dies
      // (its claim ends at once here): the claim no longer holds the next outcome back, and the
      // dead holder's late word changes nothing.
      expect(await first.wantAlert(job, false, 22, 'd', T)).toBeNull();
      expect(await first.wantAlert(job, true, 23, 'e', -1000)).toEqual({ failing: true, runId: 23 });
      expect(await first.wantAlert(job, true, 25, 'g', T)).toEqual({ failing: true, runId: 25 });
      expect(await first.alertSent(job, 'e', true, T)).toBeNull();
      expect(await first.wantAlert(job, true, 26, 'h', T)).toBeNull();
      expect(await first.alertSent(job, 'g', true, T)).toBeNull();
      expect(await first.wantAlert(job, true, 27, 'i', T)).toBeNull();
      expect((await first.jobStatus(job)).map((s) => s.job)).toEqual([job]);
    } finally {
      for (const store of stores) await store.close();
    }
  });
});
