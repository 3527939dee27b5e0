import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

// mkdir -p with an explicit mode. Not mkdirSync({ recursive: true }): Node's version loops
// forever on some paths that cannot exist (seen with /proc/x on Node 20).
export function mkdirp(dir: string, mode: number): void {
  try {
    mkdirSync(dir, { mode });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw error;
    mkdirp(parent, mode);
    mkdirSync(dir, { mode });
  }
}
