// stdout for output that may be large or endless (`logs`, `logs -f`): a slow reader is
// waited for, and a reader that went away (EPIPE, as with `| head`) ends the writing
// quietly instead of crashing on an unhandled 'error'.
export class Stdout {
  private lastByte: number | null = null;

  constructor(
    private readonly stop: AbortController,
    private readonly stream: NodeJS.WriteStream = process.stdout,
  ) {
    stream.on('error', () => stop.abort('EPIPE'));
  }

  get isTerminal(): boolean {
    return this.stream.isTTY === true;
  }

  // Whether what was written so far ends in the middle of a line.
  get midLine(): boolean {
    return this.lastByte !== null && this.lastByte !== 0x0a;
  }

  // Resolves false once writing should end (the reader left, or a signal came).
  write = async (data: Buffer | string): Promise<boolean> => {
    const { signal } = this.stop;
    if (signal.aborted) return false;
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    if (bytes.length === 0) return true;
    this.lastByte = bytes[bytes.length - 1] as number;
    if (!this.stream.write(bytes)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.stream.off('drain', done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.stream.on('drain', done);
        signal.addEventListener('abort', done);
      });
    }
    return !signal.aborted;
  };
}
