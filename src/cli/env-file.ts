import type { Stats } from 'node:fs';
import { PermissionError, UsageError } from '../errors.js';
import { readRegularFile } from '../util/safe-path.js';

// --env-file: the command's variables, from a dotenv file. Loaded only when one is given.

// Secrets live in it: a file others can read has leaked them already, one others can write
// could set LD_PRELOAD for the job, and one of another user's (not root's) is theirs to change.
function trusted(file: string, stat: Stats): void {
  const uid = process.geteuid?.() ?? 0;
  if (stat.uid !== uid && stat.uid !== 0) {
    throw new PermissionError(`env file ${file} belongs to another user (uid ${stat.uid}); it must be yours or root's`);
  }
  const mode = (stat.mode & 0o777).toString(8);
  if (stat.mode & 0o044) throw new PermissionError(`env file ${file} is readable by other users (mode ${mode}); chmod 600 it`);
  if (stat.mode & 0o022) throw new PermissionError(`env file ${file} is writable by other users (mode ${mode}); chmod 600 it`);
}

// Reads and parses FILE; a refusal or a malformed line is one typed error (77 or 64), and
// nothing has run. A message never quotes the file's text: it holds secrets.
export function readEnvFile(file: string): Record<string, string> {
  const text = readRegularFile(file, 'env file', 1024 * 1024, { noFollow: true, trust: (stat) => trusted(file, stat) });
  return parseEnvFile(text, file);
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

// dotenv's syntax: `KEY=VALUE` lines, an optional `export ` before the key, `#` comments and
// blank lines. 'single quotes' are literal; "double quotes" know \n \r \t \" \\ (any other
// backslash stays as written); both may span lines. An unquoted value is trimmed and loses a
// ` #comment` (a '#' with no blank before it is part of the value). No $VARIABLE is
// expanded: a value is what the file says. A key given twice takes its last value.
export function parseEnvFile(text: string, file: string): Record<string, string> {
  const vars: Record<string, string> = {};
  const lines = text.replace(/^\uFEFF/, '').split('\n').map((l) => l.replace(/\r$/, ''));
  for (let i = 0; i < lines.length; i++) {
    const where = `${file}:${i + 1}`;
    // Trailing blanks may belong to a quoted value that goes on to the next line.
    const line = (lines[i] as string).trimStart();
    if (line.trim() === '' || line.startsWith('#')) continue;
    const match = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/s.exec(line);
    if (!match) throw new UsageError(`${where}: expected KEY=VALUE`);
    const key = match[1] as string;
    // Not quoted either: the last line of a key pasted without quotes (base64 and its '='
    // padding) reads as KEY=VALUE, and its 'key' is a piece of the secret.
    if (!NAME.test(key)) throw new UsageError(`${where}: the key is not a variable name (letters, digits and _, not starting with a digit)`);
    const rest = match[2] as string;
    const quote = rest[0];
    let value: string;
    if (quote === "'" || quote === '"') {
      // The value runs to the matching quote, on this line or a later one.
      let body = rest.slice(1);
      let end = closing(body, quote);
      while (end < 0 && i + 1 < lines.length) {
        body += `\n${lines[++i]}`;
        end = closing(body, quote);
      }
      if (end < 0) throw new UsageError(`${where}: the value's opening ${quote} is never closed`);
      const after = body.slice(end + 1).trim();
      if (after !== '' && !after.startsWith('#')) throw new UsageError(`${file}:${i + 1}: unexpected text after the closing ${quote} (put a comment after ' #')`);
      value = quote === "'" ? body.slice(0, end) : unescaped(body.slice(0, end));
    } else {
      value = rest.replace(/(^|\s)#.*$/, '').trim();
    }
    if (value.includes('\0')) throw new UsageError(`${where}: the value of ${key} holds a NUL byte, which no environment can carry`);
    // As for cronguard's own environment (see cli/bytes.ts): passed on unchanged or not at all.
    if (value.includes('\uFFFD')) throw new UsageError(`${where}: the value of ${key} is not valid UTF-8`);
    vars[key] = value;
  }
  return vars;
}

// Where the quote that ends a value stands; a double quote escaped by a backslash does not.
function closing(body: string, quote: string): number {
  if (quote === "'") return body.indexOf("'");
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '\\') i++;
    else if (body[i] === '"') return i;
  }
  return -1;
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\' };

function unescaped(body: string): string {
  return body.replace(/\\(.)/gs, (whole, c: string) => ESCAPES[c] ?? whole);
}
