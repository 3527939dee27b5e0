import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClaimedRequest } from '../store/requests.js';
import { printable } from '../util/printable.js';
import { maskSecrets } from '../util/redact.js';

// A batch's results by argument (--batch): cronguard sets CRONGUARD_RESULTS to an empty file
// it made for the attempt, and the command may write a line per argument, tab-separated:
// `ARG<TAB>ok` or `ARG<TAB>failed[<TAB>REASON]`. ARG names a request by its arguments as the
// command got them, joined by single spaces, or by its id as `#ID` (CRONGUARD_REQUEST_IDS
// lists them, in the order their arguments come). A request the file does not mention
// follows the exit code; a file with no line that names one keeps today's meaning, the whole
// batch one outcome.

// What is read of it: a line per request, of a few hundred bytes, is far below; a runaway
// command writing gigabytes into it costs cronguard no more than this.
const MAX_BYTES = 1024 * 1024;
// The part of a REASON a request's `error` keeps.
const REASON_CHARS = 300;

export interface RequestResult {
  readonly ok: boolean;
  // Why it failed, masked, escaped and cut, as its request's error; null without one.
  readonly reason: string | null;
}

export interface Results {
  // Per request the file named, by id.
  readonly byId: ReadonlyMap<number, RequestResult>;
  // Lines that named no request of the attempt (or were not of the form), for one warning.
  readonly stray: readonly string[];
}

export class ResultsFile {
  private constructor(
    private readonly dir: string,
    readonly path: string,
  ) {}

  // A file of this user's alone, in a directory of its own (0700, made here with a name
  // nobody could guess), so no other user can put one there or swap it for a link.
  static create(): ResultsFile {
    const dir = mkdtempSync(join(tmpdir(), 'cronguard-results-'));
    const path = join(dir, 'results');
    closeSync(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
    return new ResultsFile(dir, path);
  }

  // The environment the command gets: the file, and the ids of the requests it serves.
  env(requests: readonly ClaimedRequest[]): Record<string, string> {
    return { CRONGUARD_RESULTS: this.path, CRONGUARD_REQUEST_IDS: requests.map((r) => r.id).join(' ') };
  }

  // What the command wrote, for `requests` (the attempt's).
  read(requests: readonly ClaimedRequest[]): Results {
    const byId = new Map<number, RequestResult>();
    const stray: string[] = [];
    for (const line of this.text().split('\n')) {
      if (line.trim() === '') continue;
      const [arg = '', verdict = '', ...reason] = line.replace(/\r$/, '').split('\t');
      const named = requests.filter((r) => arg === `#${r.id}` || arg === r.args.join(' '));
      if (named.length === 0 || (verdict !== 'ok' && verdict !== 'failed')) {
        stray.push(line);
        continue;
      }
      const said = reason.join('\t').trim();
      const result = { ok: verdict === 'ok', reason: verdict === 'failed' && said !== '' ? shown(said) : null };
      for (const r of named) byId.set(r.id, result);
    }
    return { byId, stray };
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private text(): string {
    let fd: number;
    try {
      fd = openSync(this.path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch {
      // Removed or replaced by the command: it said nothing cronguard can read.
      return '';
    }
    try {
      const buffer = Buffer.alloc(MAX_BYTES);
      let length = 0;
      for (let n = 1; n > 0 && length < MAX_BYTES; length += n) n = readSync(fd, buffer, length, MAX_BYTES - length, null);
      // A line cut by the bound is no line.
      const text = buffer.subarray(0, length).toString('utf8');
      return length < MAX_BYTES ? text : text.slice(0, text.lastIndexOf('\n') + 1);
    } finally {
      closeSync(fd);
    }
  }
}

// A REASON as a request's error shows it: masked first (a secret holding a tab or cut in
// two would no longer match), then escaped and cut.
function shown(reason: string): string {
  const text = printable(maskSecrets(reason));
  return text.length > REASON_CHARS ? `${text.slice(0, REASON_CHARS)}...` : text;
}
