import { unwatchFile, watchFile } from 'node:fs';
import { CronguardError } from '../errors.js';
import { readToken } from './listen.js';

// How often the token file is looked at: a rotated token takes effect within this.
const CHECK_EVERY_MS = 1000;

// The token of --token-file, read again whenever the file changes (a new inode, size or
// time: rewritten in place or renamed over) and on SIGHUP, so rotating it needs no
// restart. Sessions are HMACs of the token, so the old token's sessions end with it. A
// file that stops holding a token (deleted, emptied half-way through a rewrite) refuses
// every token until it holds one again: failing open would keep a revoked token working.
export class TokenFile {
  private token: string | null;
  private readonly changed = () => this.reload('it changed');

  constructor(
    private readonly file: string,
    private readonly warn: (line: string) => void,
  ) {
    this.token = readToken(file, warn);
    watchFile(file, { interval: CHECK_EVERY_MS, persistent: false }, this.changed);
  }

  current(): string | null {
    return this.token;
  }

  reload(why: string): void {
    try {
      const token = readToken(this.file, this.warn);
      if (token !== this.token) this.warn(`--token-file ${this.file}: ${why}, a new token is in force; sessions of the old one have ended`);
      else if (why === 'SIGHUP') this.warn(`--token-file ${this.file}: read again on SIGHUP, the token is unchanged`);
      this.token = token;
    } catch (error) {
      if (!(error instanceof CronguardError)) throw error;
      if (this.token !== null || why === 'SIGHUP') this.warn(`${error.message}; every token and session is refused until it holds one`);
      this.token = null;
    }
  }

  close(): void {
    unwatchFile(this.file, this.changed);
  }
}
