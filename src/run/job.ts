import { hostname, userInfo } from 'node:os';
import { isatty } from 'node:tty';
import type { RunConfig } from '../cli/config.js';
import { openLockBackend } from '../lock/index.js';
import type { Messages } from '../util/stderr.js';
import { judge } from './outcome.js';
import { RunRecorder } from './recorder.js';
import { resolveCommand } from './resolve.js';
import { supervise } from './supervisor.js';

// One invocation of `cronguard run`: lock, record, supervise, record, release. Returns the
// exit code; throws only typed errors for problems found before anything ran.
export async function runJob(config: RunConfig, say: Messages): Promise<number> {
  const file = resolveCommand(config.argv[0] as string, process.env.PATH);
  const backend = await openLockBackend(config);
  const lock = await backend.acquire({ waitMs: config.waitMs });
  if (!lock) {
    say.verbose(
      `${config.name}: lock held by another instance (${backend.name} ${config.lock === 'flock' ? config.lockPath : config.lockDir}); skipping with exit ${config.conflictExitCode}`,
    );
    const recorder = await RunRecorder.open(config.stateDir, say);
    await recorder.overlap(config.name);
    await recorder.close();
    return config.conflictExitCode;
  }
  say.verbose(`${config.name}: holding ${lock.description}`);
  const recorder = await RunRecorder.open(config.stateDir, say);
  try {
    await recorder.start(
      {
        job: config.name,
        trigger: isatty(0) ? 'manual' : 'cron',
        attempt: 1,
        host: hostname(),
        pid: process.pid,
        username: currentUser(),
        command: config.display,
        startedAt: new Date(),
      },
      isAlive,
    );
    const child = supervise({ ...config, file, inheritFd: lock.inheritFd });
    lock.onLost((reason) => child.terminate(reason));
    if (child.pid !== null) await recorder.childStarted(child.pid);
    const verdict = judge(await child.result, config.timeoutMs, new Date());
    await recorder.finish(verdict.outcome);
    if (verdict.message) say.warn(`${config.name}: ${verdict.message}`);
    say.verbose(`${config.name}: ${verdict.outcome.status}, exit ${verdict.exitCode}`);
    return verdict.exitCode;
  } finally {
    await recorder.close();
    await lock.release();
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function currentUser(): string | null {
  try {
    return userInfo().username;
  } catch {
    return process.env.LOGNAME ?? process.env.USER ?? String(process.geteuid?.() ?? '');
  }
}
