// A job as `status` shows it: what it is doing, how it last ended, what waits for it.

// Why and since when a job is paused (`cronguard disable`).
export interface Paused {
  readonly reason: string | null;
  readonly since: string | null;
  readonly by: string | null;
}

export interface JobStatus {
  job: string;
  state: 'running' | 'idle' | 'disabled';
  // The running run, when there is one.
  running_since: string | null;
  running_host: string | null;
  running_pid: number | null;
  running_run_id: number | null;
  disabled_reason: string | null;
  disabled_since: string | null;
  disabled_by: string | null;
  last_run_id: number | null;
  last_status: string | null;
  last_exit_code: number | null;
  last_started_at: string | null;
  last_finished_at: string | null;
  last_success_at: string | null;
  pending_requests: number;
}
