import type { Readable } from 'node:stream';
import { describe } from '../../errors.js';
import { abandon, handedOn, type Messages, setStderrMidLine, sleep } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';
import { YoungCollector } from '../../util/young-gc.js';
import type { ProcessGroup } from './group.js';
import type { LiveCopy } from './live.js';
import type { LineMasker } from './mask.js';
import { type StreamId, TailBuffer } from './output.js';
import type { QuietBuffer } from './quiet.js';
import { sinkOf } from './sink.js';

const POLL_MS = 100;
// Silence on the pipes for this long, with no reader holding us back, before looking at who
// still has them open: members of the command's group...
const IDLE_MS = 200;
// ...or, when the group is gone, a process that left it (setsid) and kept the output.
const IDLE_OUTSIDE_MS = 1000;
// Survivors that never fall silent (a daemon that a cron script started, logging away), in
// its group or not, are found by what they write after the command exited: data that keeps
// coming this long while the reader keeps up, or more than the command itself can have left
// in its pipes (the largest pipe an unprivileged process can make, fs.pipe-max-size, is
// 1 MiB by default)...
const WRITING_ON_MS = 1000;
const BACKLOG_BYTES = 1024 * 1024 + 64 * 1024;

interface Source {
  readonly stream: Readable;
  // --redact, --env-file: holds a line until it is whole, then masks it; null without masks.
  readonly masker: LineMasker | null;
  // Passes a (masked) chunk on.
  readonly take: (chunk: Buffer) => void;
  ended: boolean;
  // Waiting for a slow reader to take what was written.
  blocked: boolean;
}

// Passes the command's output through to cronguard's own stdout and stderr while it runs,
// keeping the tail for the run log (and all of it for -q), and copying it for `logs -f`. A slow reader slows the command
// down rather than growing our memory; one that went away (EPIPE) stops the writing, not
// the command. When the command exits, everything it wrote is drained, and handed on to
// the reader; only descendants that keep a pipe open are not waited for, and a signal to
// cronguard stops the waiting.
export class Relay {
  private readonly sources: Source[] = [];
  private readonly outs = new Set<NodeJS.WriteStream>();
  private lastData = 0;
  // Bytes read, and how often a slow reader held a pipe back: to tell, after the command
  // exited, its own last output from what its survivors write.
  private bytesRead = 0;
  private holdUps = 0;
  private readonly collector = new YoungCollector();
  // Whether cronguard's stdout and stderr are one file (as in cron's mail): asked once.
  private sharedSink: boolean | null = null;
  // The signal that ended the delivery of the output, once the command had exited.
  private interruptedBy: NodeJS.Signals | null = null;
  // Replay writes waiting for a slow reader, let go by that signal.
  private readonly waiting = new Set<() => void>();
  // Our streams that failed (a reader gone, a full disk): nothing more is written to them.
  private readonly broken = new Set<NodeJS.WriteStream>();
  // Why output was dropped other than for a reader that went away, for the run log.
  readonly failures: string[] = [];
  // Takes our listeners off cronguard's stdout and stderr, which outlive this attempt.
  private readonly releases: (() => void)[] = [];

  constructor(
    private readonly tail: TailBuffer,
    private readonly quiet: QuietBuffer | null,
    private readonly live: LiveCopy | null,
    // Says one line on stderr, as cronguard's own messages do.
    private readonly warn: (line: string) => void,
    // A new masker per stream when masking is configured (see mask.ts).
    private readonly masker: (() => LineMasker) | null = null,
  ) {}

  pipe(id: StreamId, stream: Readable | null, out: NodeJS.WriteStream): void {
    if (!stream) return;
    const take = (chunk: Buffer) => {
      this.tail.push(chunk);
      this.live?.push(chunk);
      if (this.quiet) return this.quiet.push(id, chunk);
      if (this.broken.has(out)) return;
      this.noteWritten(id, chunk);
      const flowing = out.write(chunk);
      // Node writes to a pipe synchronously on Linux: a slow reader holds us inside write(),
      // and that time is not silence from the command.
      this.lastData = monotonicMs();
      if (!flowing) {
        this.holdUps++;
        source.blocked = true;
        stream.pause();
        out.once('drain', () => {
          source.blocked = false;
          stream.resume();
        });
      }
    };
    const source: Source = { stream, ended: false, blocked: false, masker: this.masker?.() ?? null, take };
    this.sources.push(source);
    this.watch(id, out, () => {
      source.blocked = false;
      stream.resume();
    });
    stream.on('end', () => this.ended(source));
    stream.on('close', () => this.ended(source));
    stream.on('data', (chunk: Buffer) => {
      this.lastData = monotonicMs();
      this.bytesRead += chunk.length;
      this.collector.passed(chunk.length);
      const passed = source.masker ? source.masker.push(chunk) : chunk;
      if (passed) take(passed);
    });
  }

  // A stream's end passes on the last line a masker held (a line without its newline).
  private ended(source: Source): void {
    source.ended = true;
    const rest = source.masker?.end();
    if (rest) source.take(rest);
  }

  // One of our streams: its failure (a reader gone, a full disk) stops the writing to it.
  watch(id: StreamId, out: NodeJS.WriteStream, then: () => void = () => {}): void {
    this.outs.add(out);
    const onError = (error: NodeJS.ErrnoException) => {
      this.failed(id, out, error);
      then();
    };
    out.on('error', onError);
    this.releases.push(() => out.off('error', onError));
  }

  // Writes a -q replay's chunk, waiting for the reader when it is slow.
  async write(id: StreamId, chunk: Buffer): Promise<void> {
    const out = id === 1 ? process.stdout : process.stderr;
    if (this.interruptedBy !== null || this.broken.has(out)) return;
    this.noteWritten(id, chunk);
    this.outs.add(out);
    if (!out.write(chunk) && !out.destroyed) await this.drained(out);
  }

  // After the command exited: reads until both pipes end, then waits until our own streams
  // have handed everything on. Returns a note for the run log when it stopped short: processes
  // that outlived the command still held a pipe, or a signal came.
  async drain(group: ProcessGroup): Promise<string | null> {
    const note = await this.readToEnd(group);
    return [note, await this.delivered()].filter(Boolean).join('; ') || null;
  }

  // Waits until our own streams have handed all that was written to them to the reader:
  // nothing of cronguard's own (its summary line, on a stderr that shares cron's pipe) may
  // overtake the output, and the outcome is recorded once the output is through. Null when
  // it is; else the note that a signal stopped the wait.
  async delivered(): Promise<string | null> {
    while (this.interruptedBy === null && ![...this.outs].every(handedOn)) await sleep(POLL_MS);
    return this.interruptedBy === null ? null : `${this.interruptedBy} arrived while its output was still being passed on; the rest was dropped`;
  }

  // Not bounded by --timeout: that stops the command, and the output it left in the pipes
  // is delivered however slow the reader, as it is for a command that ends by itself.
  private async readToEnd(group: ProcessGroup): Promise<string | null> {
    const exit = { at: monotonicMs(), bytes: this.bytesRead, holdUps: this.holdUps, held: this.sources.some((s) => s.blocked) };
    // ...never, behind a reader slower than the command, its own last output.
    const survivorsWriting = () =>
      this.bytesRead - exit.bytes > BACKLOG_BYTES || (!exit.held && this.holdUps === exit.holdUps && monotonicMs() - exit.at >= WRITING_ON_MS);
    const ended = () => this.sources.every((s) => s.ended);
    while (this.interruptedBy === null && !ended()) {
      await sleep(POLL_MS);
      // The pipes may have ended during the sleep (a group killed by --timeout or stop closes
      // them a moment after its leader's exit): then nobody held them.
      if (ended()) break;
      // Silence counts from the command's exit at the earliest: a command that wrote nothing,
      // or last wrote long before, has not left a process holding its output by that alone.
      const idle = monotonicMs() - Math.max(this.lastData, exit.at);
      if (this.sources.some((s) => s.blocked) || (idle < IDLE_MS && !survivorsWriting())) continue;
      const members = group.liveMembers();
      if (members !== null) return this.cut(`${members.join(', ') || 'its process group'} kept its output open after the command exited; not waited for`);
      if (idle >= IDLE_OUTSIDE_MS || survivorsWriting()) return this.cut('a process outside its group kept its output open after the command exited; not waited for');
    }
    return null;
  }

  // A signal to cronguard after the command exited: stop waiting for the pipes and for the
  // reader, dropping what is still queued for it (its delivery could take forever).
  interrupt(signal: NodeJS.Signals): void {
    this.interruptedBy ??= signal;
    this.stopReading();
    for (const out of this.outs) if (!handedOn(out)) abandon(out);
    for (const resume of this.waiting) resume();
  }

  // Done with the attempt: a loop (--every) or retries would otherwise pile up listeners,
  // one pair per attempt, on streams that live as long as cronguard.
  release(): void {
    for (const release of this.releases.splice(0)) release();
  }

  // A reader that went away (EPIPE) is no news: `cronguard ... | head` is how one reads the
  // start of the output. Anything else (a full disk, an I/O error) loses output, and says so
  // once per stream.
  private failed(id: StreamId, out: NodeJS.WriteStream, error: NodeJS.ErrnoException): void {
    if (this.broken.has(out)) return;
    this.broken.add(out);
    // What it still holds will never go anywhere: neither this drain nor cronguard's exit
    // waits for it.
    abandon(out);
    if (error.code === 'EPIPE') return;
    const note = `its ${id === 1 ? 'stdout' : 'stderr'} could not be written (${describe(error)}); the rest of the output to it was dropped`;
    this.failures.push(note);
    this.warn(note);
  }

  private drained(out: NodeJS.WriteStream): Promise<void> {
    return new Promise((resolve) => {
      const resume = () => {
        this.waiting.delete(resume);
        out.off('drain', resume).off('error', resume);
        resolve();
      };
      this.waiting.add(resume);
      out.once('drain', resume).once('error', resume);
    });
  }

  // Keeps track of whether cronguard's stderr (where its own lines go) is left in the middle
  // of a line, counting stdout when both are the same file, as in cron's mail.
  private noteWritten(id: StreamId, chunk: Buffer): void {
    this.sharedSink ??= sinkOf(1) === sinkOf(2);
    if (chunk.length > 0 && (id === 2 || this.sharedSink)) setStderrMidLine(chunk[chunk.length - 1] !== 0x0a);
  }

  private cut(note: string): string {
    this.stopReading();
    return note;
  }

  private stopReading(): void {
    for (const source of this.sources) {
      source.stream.destroy();
      this.ended(source);
    }
  }
}

// Shows what -q held when no command is running any more: the retry it was held for will
// not come (a signal or a pause came first, or the lock went). Returns, as a replay does,
// what could not be shown.
export async function replayHeld(held: QuietBuffer, name: string, say: Messages): Promise<string | null> {
  const relay = new Relay(new TailBuffer(0), null, null, (line) => say.warn(`${name}: ${line}`));
  relay.watch(1, process.stdout);
  relay.watch(2, process.stderr);
  const note = await held.replay((id, chunk) => relay.write(id, chunk), say.warn);
  const cut = await relay.delivered();
  relay.release();
  return [...relay.failures, note, cut].filter(Boolean).join('; ') || null;
}
