// Resolves once everything written to the stream has been handed to the OS. process.exit()
// would otherwise drop what is still queued for a pipe, such as a -q replay of a failed job.
export function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('drain', resolve);
    stream.once('error', resolve);
    stream.once('close', resolve);
  });
}
