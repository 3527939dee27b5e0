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

export function redact(text: string): string {
  let out = text;
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join('***');
  return out
    .replace(/(\/\/[^:/@\s]*:)[^@\s]*@/g, '$1***@')
    .replace(/([?&]password=)[^&#\s]*/gi, '$1***');
}
