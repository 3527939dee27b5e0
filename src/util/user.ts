import { userInfo } from 'node:os';

// Who is running cronguard: the account's name, as libpq and logins know it ($USER is not
// set under cron).
export function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return process.env.LOGNAME ?? process.env.USER ?? String(process.geteuid?.() ?? 'unknown');
  }
}
