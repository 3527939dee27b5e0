import { setFlagsFromString } from 'node:v8';

// V8 flags every invocation sets first, before any of cronguard's code is compiled.
//
// --enable-experimental-regexp-engine: the 'l' flag, V8's linear-time engine, for --redact's
// patterns (see cli/redact-pattern.ts). It is set on every run, not only with --redact: a
// flag set later changes the flag hash that V8 checks a code cache against, and the cache
// (made at build time, under these same flags, by train.cjs) was then rejected for every
// file loaded after it (measured: 2 of 3 under --redact). Setting it costs nothing.
export function setEngineFlags(): void {
  setFlagsFromString('--enable-experimental-regexp-engine');
}
