import { execFileSync } from 'node:child_process';

// End-to-end tests spawn the built binary, so build it from the current source first.
export default function setup(): void {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
}
