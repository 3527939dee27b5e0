import { join } from 'node:path';
import { runFromCodeCache } from './code-cache.js';

// dist/cronguard.cjs: what every invocation loads first. The program itself is in
// dist/lib/, split so that a run loads only the run path (subcommands, pg and the CLI
// libraries are files of their own, loaded when needed), compiled from the code cache.
runFromCodeCache(join(__dirname, 'lib'), join(__dirname, 'cache'), false);
