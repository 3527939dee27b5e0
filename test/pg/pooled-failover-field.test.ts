import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRow } from '../../src/store/types.js';
import { cronguard, sandbox, spooled } from '../helpers.js';
import { hasPgbouncer, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';
import { demotePrimary, dropPair, makePair, missingTools, PRIMARY, promoteStandby, query, STANDBY, urlOf } from '../standby-clusters.js';

// Debian's PgBouncer in front of a real streaming pair whose roles change in place (issue 35,
// items 4 and 5). PgBouncer passes on to every client the in_hot_standby its first server
// login reported: after a promotion in place its clients hear "standby" from a primary, after
// a demotion in place "primary" from a standby. Neither may decide a run: the promoted
// server runs jobs again, and the demoted one refuses them (69) rather than take a lock
// alone on a standby beside the primary's run. Both pool modes, with and without
// ignore_startup_parameters. The tests run in order.
const missing = missingTools() ?? (hasPgbouncer ? null : 'Debian\'s pgbouncer is not installed');
const schema = `t_${randomBytes(6).toString('hex')}`;
const MODES = [
  { poolMode: 'session' },
  { poolMode: 'transaction', ignoreStartupParameters: 'extra_float_digits,options' },
] as const;
// In front of the standby, and of the primary.
const toStandby: Pgbouncer[] = [];
const toPrimary: Pgbouncer[] = [];

function box(url: string) {
  const b = sandbox();
  return { ...b, env: { ...b.env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: schema } };
}

const rows = (port: number, job: string) => query<RunRow>(port, `SELECT * FROM "${schema}".runs WHERE job = $1 ORDER BY id`, [job]);
const label = (p: Pgbouncer, i: number) => `${MODES[i]?.poolMode} pooling${i === 1 ? ', ignore_startup_parameters' : ''} (${p.url})`;

describe.skipIf(missing !== null)(`PgBouncer in front of servers whose roles change in place${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    await makePair();
    expect((await cronguard(['migrate'], box(urlOf(PRIMARY.port)).env)).code).toBe(0);
    for (const mode of MODES) {
      toStandby.push(await startPgbouncer({ ...mode, target: urlOf(STANDBY.port) }));
      toPrimary.push(await startPgbouncer({ ...mode, target: urlOf(PRIMARY.port) }));
    }
  }, 300_000);
  afterAll(async () => {
    await Promise.all([...toStandby, ...toPrimary].map((p) => p.stop()));
    dropPair();
  }, 120_000);

  it('a standby promoted in place behind the pooler runs jobs again, though the pooler still reports a standby', async () => {
    for (const [i, pooler] of toStandby.entries()) {
      const b = box(pooler.url);
      const job = `promoted-${i}-${schema}`;
      // Its first login is to the standby: what the pooler will repeat.
      const refused = await cronguard(['-n', job, '--', 'touch', b.path('ran')], b.env);
      expect(refused, label(pooler, i)).toMatchObject({ code: 69, stdout: '' });
      expect(refused.stderr).toMatch(/^cronguard: PostgreSQL at postgres@127\.0\.0\.1:\d+\/test is a read-only standby \(in recovery\)/);
      expect(refused.stderr.trim().split('\n')).toHaveLength(1);
      expect(existsSync(b.path('ran'))).toBe(false);
    }
    await promoteStandby();
    for (const [i, pooler] of toStandby.entries()) {
      for (const lock of ['postgres', 'lease']) {
        const b = box(pooler.url);
        const job = `promoted-${i}-${lock}-${schema}`;
        const ran = await cronguard(['-l', lock, '-n', job, '--', 'touch', b.path('ran')], b.env);
        expect(ran, `${lock} through ${label(pooler, i)}`).toMatchObject({ code: 0, stderr: '' });
        expect(existsSync(b.path('ran'))).toBe(true);
        expect((await rows(STANDBY.port, job)).map((r) => r.status)).toEqual(['succeeded']);
      }
    }
  });

  it('a primary demoted in place behind the pooler refuses the run (69, one line): no lock taken alone on a standby', async () => {
    // The poolers' first logins are to the primary, which they will keep reporting.
    for (const [i, pooler] of toPrimary.entries()) {
      const b = box(pooler.url);
      expect(await cronguard(['-n', `before-${i}-${schema}`, '--', 'true'], b.env), label(pooler, i)).toMatchObject({ code: 0, stderr: '' });
    }
    await demotePrimary();
    // What the pooler reports decides the line (it may have learnt of the standby meanwhile).
    const line = new RegExp(
      `^cronguard: PostgreSQL at postgres@127\\.0\\.0\\.1:\\d+/test is (${[
        'read-only \\(cannot execute [A-Z ]+ in a read-only transaction\\): a standby, though it or a pooler in front of it reported a primary; nothing ran\\. Point the URL at the primary',
        'a read-only standby \\(in recovery\\): point the URL at the primary, or list the hosts with target_session_attrs=read-write',
      ].join('|')})\n$`,
    );
    for (const [i, pooler] of toPrimary.entries()) {
      // The advisory lock in the admission, and taken alone (no run log); the lease.
      for (const lock of [['-l', 'postgres'], ['-l', 'postgres', '--no-log'], ['-l', 'lease']]) {
        const b = box(pooler.url);
        const job = `demoted-${i}-${lock.length}${lock[1]}-${schema}`;
        const refused = await cronguard([...lock, '-n', job, '--', 'touch', b.path('ran')], b.env);
        expect(refused, `${lock.join(' ')} through ${label(pooler, i)}`).toMatchObject({ code: 69, stdout: '' });
        expect(refused.stderr).toMatch(line);
        expect(existsSync(b.path('ran'))).toBe(false);
        expect(spooled(b.stateDir)).toEqual([]);
      }
    }
  });
});
