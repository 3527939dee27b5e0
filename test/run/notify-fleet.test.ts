import { existsSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// Two hosts sharing a log (each a UTS namespace of its own name): host-a fails and its
// notifier is slow; host-b succeeds meanwhile. The alerts must arrive failed, then recovered,
// the last word the job's latest state, and a recovery never without its failure delivered
// (issue 35, item 14: the state moved when each outcome was recorded, so host-b's recovery
// overtook host-a's failure, or came alone when the failure's delivery failed).
const onHost = (name: string) => [...(process.geteuid?.() === 0 ? ['unshare', '-u'] : ['unshare', '-r', '-u']), 'sh', '-c', 'hostname "$0" && exec "$@"', name];
const events = (file: string) => lines(file).filter((l) => /^(failed|recovered) /.test(l)).map((l) => l.replace(/ run=.*host=(\S+).*$/, ' $1').replace(/ job=\S+/, ''));

describe.each(STORES)('alerts of a fleet in the order of its outcomes (%s)', (kind) => {
  // The notifier says it has begun, waits for `go`, then delivers (notified.sh) or, with
  // `down` there, fails: what reaches the file is what was delivered, in the order it was.
  const notifier = (file: string, begun: string, go: string, down: string) =>
    `touch ${begun}; while [ ! -e ${go} ]; do sleep 0.05; done; [ -e ${down} ] && exit 1; ${fixture('notified.sh')} ${file}`;

  it('a success while the failure is being delivered is said after it, by its deliverer', async () => {
    const box = storeBox(kind);
    const job = box.job('flap');
    const [file, begun, go] = [box.path('notified'), box.path('begun'), box.path('go')];
    const args = (code: number) => ['-n', job, '-l', 'none', '--every-tick', '--notify', notifier(file, begun, go, box.path('down')), '--', 'sh', '-c', `exit ${code}`];
    const a = start(args(3), box.env, onHost('host-a'));
    await waitFor(() => existsSync(begun), "host-a's notifier to begin");
    const b = await start(args(0), box.env, onHost('host-b')).done;
    expect(b).toMatchObject({ code: 0, stderr: '' });
    release(go);
    expect((await a.done).code).toBe(3);
    expect(events(file)).toEqual(['failed host-a', 'recovered host-b']);
  });

  it('a failure whose delivery failed is never followed by a recovery alone; the next failure is said', async () => {
    const box = storeBox(kind);
    const job = box.job('down');
    const [file, begun, go, down] = [box.path('notified'), box.path('begun'), box.path('go'), box.path('down')];
    const args = (code: number) => ['-n', job, '-l', 'none', '--every-tick', '--notify', notifier(file, begun, go, down), '--', 'sh', '-c', `exit ${code}`];
    release(down);
    const a = start(args(3), box.env, onHost('host-a'));
    await waitFor(() => existsSync(begun), "host-a's notifier to begin");
    expect((await start(args(0), box.env, onHost('host-b')).done).code).toBe(0);
    release(go);
    expect((await a.done).code).toBe(3);
    expect(events(file)).toEqual([]);
    // The webhook is back: the next failure is said, as the first of its incident.
    rmSync(down);
    expect((await start(args(4), box.env, onHost('host-b')).done).code).toBe(4);
    expect(events(file)).toEqual(['failed host-b']);
  });
});
