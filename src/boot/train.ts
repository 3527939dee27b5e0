import { join } from 'node:path';
import { runFromCodeCache } from './code-cache.js';

// dist/train.cjs: runs cronguard with its arguments as dist/cronguard.cjs does, and writes
// the code cache of every file it loaded when it exits. The build and install.sh run it on
// a plain run (and a subcommand), so that the cache holds what a run compiles.
runFromCodeCache(join(__dirname, 'lib'), join(__dirname, 'cache'), true);
