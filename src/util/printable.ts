// Text from the run log (a job name, an argument, a host, a pause reason) as a terminal or a
// monitoring system may show it: every control character escaped (\n, \t, \x1b, ...), so
// that no value can move the cursor, retitle a window, clear the screen or start a line of
// its own.
export function printable(text: string): string {
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, (ch) => ESCAPES[ch] ?? `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
