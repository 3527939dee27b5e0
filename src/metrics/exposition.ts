import { constants } from 'node:os';
import { isFailing, type JobStatus } from '../store/jobs.js';
import { RUN_STATUSES } from '../store/types.js';

// The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile
// collector and any scraper read it: per metric family a HELP and a TYPE line, then one
// sample per job, labelled `job`.

interface Family {
  readonly name: string;
  readonly type: 'gauge' | 'counter';
  readonly help: string;
  // The job's samples: extra labels and a value; none when unknown.
  readonly samples: (j: JobStatus) => [Record<string, string>, number][];
}

const seconds = (iso: string | null) => (iso === null ? [] : [[{}, Date.parse(iso) / 1000] as [Record<string, string>, number]]);
const FINISHED = RUN_STATUSES.filter((s) => s !== 'running');

const FAMILIES: readonly Family[] = [
  { name: 'cronguard_last_start_timestamp_seconds', type: 'gauge', help: 'When the latest run started (Unix time).', samples: (j) => seconds(j.running_since ?? j.last_started_at) },
  // 0 for a job that never succeeded, so that `time() - metric > limit` alerts on it too.
  { name: 'cronguard_last_success_timestamp_seconds', type: 'gauge', help: 'When the latest successful run started (Unix time; 0: never).', samples: (j) => [[{}, j.last_success_at === null ? 0 : Date.parse(j.last_success_at) / 1000]] },
  { name: 'cronguard_last_duration_seconds', type: 'gauge', help: 'How long the latest finished run took.', samples: (j) => (j.last_duration_ms === null ? [] : [[{}, j.last_duration_ms / 1000]]) },
  { name: 'cronguard_last_exit_code', type: 'gauge', help: "The latest finished run's exit code (128+N when killed by signal N).", samples: (j) => exitCode(j) },
  { name: 'cronguard_running', type: 'gauge', help: 'Whether a run is in progress (1) or not (0).', samples: (j) => [[{}, j.state === 'running' ? 1 : 0]] },
  { name: 'cronguard_paused', type: 'gauge', help: 'Whether the job is paused with cronguard disable.', samples: (j) => [[{}, j.state === 'disabled' ? 1 : 0]] },
  // With a stored schedule (--scheduled) or --min-interval: alert on `time() - metric > N`.
  { name: 'cronguard_next_due_timestamp_seconds', type: 'gauge', help: 'When the job is next due by its stored schedule or --min-interval, or since when it is due (Unix time).', samples: (j) => seconds(j.next_due_at) },
  { name: 'cronguard_pending_requests', type: 'gauge', help: 'Run-now requests waiting for the job.', samples: (j) => [[{}, j.pending_requests]] },
  // The rule status, check and the web page use: the last run failed, or a target's latest request did.
  { name: 'cronguard_failing', type: 'gauge', help: 'Whether the job is failing (1): its last run did not succeed, or a target of its requests failed its latest time.', samples: (j) => [[{}, isFailing(j) ? 1 : 0]] },
  { name: 'cronguard_request_target_failed', type: 'gauge', help: "A target (a request's arguments) whose latest request failed.", samples: (j) => j.failed_requests.map((r) => [{ target: r.args.join(' ') }, 1]) },
  { name: 'cronguard_runs_total', type: 'counter', help: 'Finished runs, by status.', samples: (j) => FINISHED.map((status) => [{ status }, j.runs_total[status] ?? 0]) },
];

function exitCode(j: JobStatus): [Record<string, string>, number][] {
  if (j.last_exit_code !== null) return [[{}, j.last_exit_code]];
  const signal = j.last_signal === null ? undefined : (constants.signals as Record<string, number>)[j.last_signal];
  return signal === undefined ? [] : [[{}, 128 + signal]];
}

export async function exposition(listed: readonly JobStatus[]): Promise<string> {
  // A stored schedule says when its job is due (croner, loaded only when a job has one).
  const scheduled = listed.some((j) => j.schedule !== null) ? (await import('../schedule/job.js')).withScheduleDue : null;
  const jobs = scheduled === null ? listed : listed.map((j) => scheduled(j, Date.now()));
  const lines: string[] = [];
  for (const family of FAMILIES) {
    const samples = jobs.flatMap((j) => family.samples(j).map(([labels, value]) => sample(family.name, { job: j.job, ...labels }, value)));
    if (samples.length === 0) continue;
    lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`, ...samples);
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

function sample(name: string, labels: Record<string, string>, value: number): string {
  const text = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',');
  return `${name}{${text}} ${Number.isInteger(value) ? value : value.toFixed(3)}`;
}

// Label values escape backslash, double quote and line feed.
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
