import { resolve } from 'node:path';
import { UsageError } from '../errors.js';
import type { Setting } from '../util/setting.js';

// Where --syslog sends its lines: the local syslog socket, which journald and rsyslog read.
export interface SyslogConfig {
  readonly socket: string;
}

export const DEFAULT_SYSLOG_SOCKET = '/dev/log';

const ON = new Set(['on', 'true', 'yes', '1']);
const OFF = new Set(['off', 'false', 'no', '0']);

// --syslog, or the `syslog` setting (on/off, true/false, yes/no, 1/0), and the socket's
// path (`syslog_socket`, for a system whose socket lives elsewhere, and for tests).
export function parseSyslog(enabled: Setting | undefined, socket: Setting | undefined): SyslogConfig | null {
  if (!enabled) return null;
  const value = enabled.value.trim().toLowerCase();
  if (!ON.has(value) && !OFF.has(value)) throw new UsageError(`${enabled.from}: '${enabled.value}' is not on or off (on, off, true, false, yes, no, 1, 0)`);
  if (OFF.has(value)) return null;
  if (socket && socket.value.trim() === '') throw new UsageError(`${socket.from}: the syslog socket's path is empty`);
  return Object.freeze({ socket: socket ? resolve(socket.value) : DEFAULT_SYSLOG_SOCKET });
}
