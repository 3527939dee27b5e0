// Every line cronguard writes passes through redact(), so a password reaches neither a
// terminal nor cron mail, however malformed the URL that carried it. Secrets are the exact
// strings seen in the configured URLs and PGPASSWORD (registered before anything is
// parsed), plus anything shaped like URL credentials or a password parameter.
const secrets = new Set<string>();

export function addSecret(value: string | undefined): void {
  if (value && value.length >= 3) secrets.add(value);
}

// The password-like parts of a URL, found without trusting it to parse: what lies between
// the scheme's first ':' after the user and the last '@', and every password= value.
export function addSecretsOf(url: string | undefined): void {
  if (!url) return;
  const credentials = /^[a-z][a-z0-9+.-]*:\/*[^:@/?#]*:(.*)@/is.exec(url);
  if (credentials) addDecoded(credentials[1] as string);
  for (const m of url.matchAll(/[?&]password=([^&#\s]*)/gi)) addDecoded(m[1] as string);
}

// Also its pieces between URL delimiters: a raw '/' or '?' in a password makes a parser see
// part of it as a port or a path, and an error may show that part alone.
function addDecoded(raw: string): void {
  addSecret(raw);
  for (const piece of raw.split(/[/?#:@&=]/)) if (piece.length >= 4) addSecret(piece);
  try {
    addSecret(decodeURIComponent(raw));
  } catch {
    // Not valid %-encoding: the raw form is the one that could be printed.
  }
}

// The user's masks: the patterns of --redact (and the configuration's redact lines), and the
// values of --env-file. They apply to everything cronguard writes (through redact()) and, by
// maskSecrets() alone, to the command's output, which the URL rules below must not touch.
const patterns: RegExp[] = [];
const userSecrets: string[] = [];

// A value shorter than this is not masked: masking `1`, `true` or `prod` would garble the
// output everywhere they occur, and a secret that short is none (--redact can still mask it).
export const MIN_MASKED_LENGTH = 6;

// A --redact pattern, global, compiled and checked by the caller.
export function addPattern(pattern: RegExp): void {
  patterns.push(pattern);
}

// A value of --env-file, and each line of a multi-line one (a key's PEM block is printed a
// line at a time as often as whole).
export function addMaskedValue(value: string): void {
  const add = (piece: string) => {
    if (piece.length >= MIN_MASKED_LENGTH && !userSecrets.includes(piece)) userSecrets.push(piece);
  };
  add(value);
  if (value.includes('\n')) for (const line of value.split(/\r?\n/)) add(line.trim());
  userSecrets.sort((a, b) => b.length - a.length);
  latin1Secrets = null;
}

// The env file's values that are masked, longest first (the masker cuts a long line between them).
export function maskedValues(): readonly string[] {
  return userSecrets;
}

// Whether the user asked for masking: a run without it pays nothing for it.
export function masking(): boolean {
  return patterns.length > 0 || userSecrets.length > 0;
}

// The form of each secret found in text decoded byte by byte (output that is not UTF-8).
let latin1Secrets: string[] | null = null;

// The text with the user's masks applied. `latin1`: the text is bytes decoded one to a
// character (output that is not valid UTF-8), where a secret appears as its UTF-8 bytes.
export function maskSecrets(text: string, latin1 = false): string {
  if (!masking()) return text;
  let out = text;
  if (latin1 && latin1Secrets === null) latin1Secrets = userSecrets.map((s) => Buffer.from(s).toString('latin1'));
  const literal = latin1 ? (latin1Secrets as string[]) : userSecrets;
  for (const secret of literal) if (out.includes(secret)) out = out.split(secret).join('***');
  for (const pattern of patterns) out = out.replace(pattern, '***');
  return out;
}

export function redact(text: string): string {
  let out = maskSecrets(text);
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join('***');
  return out
    .replace(/(\/\/[^:/@\s]*:)[^@\s]*@/g, '$1***@')
    .replace(/([?&]password=)[^&#\s]*/gi, '$1***');
}
