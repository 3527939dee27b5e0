import type { RunConfig } from '../cli/config.js';
import { ensureLockDir } from './dir.js';
import { flockBackend } from './flock.js';
import type { Lock, LockBackend } from './types.js';

// The "none" backend: every invocation runs. Still a Lock, so the run path has one shape.
const noLock: LockBackend = {
  name: 'none',
  acquire: async () => ({
    description: 'no lock',
    inheritFd: null,
    onLost: () => {},
    release: async () => {},
  }),
};

// Picks and prepares a local backend; the lockfile backend is loaded only when used. The
// postgres backend needs a session and is wired up by the run path (src/run/wiring.ts).
export async function openLockBackend(config: RunConfig): Promise<LockBackend> {
  switch (config.lock) {
    case 'none':
      return noLock;
    case 'postgres':
      throw new Error('the postgres lock needs a session; src/run/wiring.ts builds it');
    case 'lockfile': {
      ensureLockDir(config.lockDir, config.lockDirPrivate);
      const { lockfileBackend } = await import('./lockfile.js');
      return lockfileBackend(config.lockDir, config.name);
    }
    case 'flock': {
      if (config.lockPath.startsWith(`${config.lockDir}/`)) {
        ensureLockDir(config.lockDir, config.lockDirPrivate);
      }
      return flockBackend(config.lockPath);
    }
  }
}

export type { Lock, LockBackend };
