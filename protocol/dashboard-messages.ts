// Messages between the Run Dashboard's host (extension/dashboard.ts) and its webview (webview/dashboard/).
// Both sides import only this file, never each other. Every message says who sends it and why.
import type { CodeManifest, HealthEvent, MetricsEvent, StatusEvent } from './generated/rpc';

/** A health event as the dashboard reads it: the trainer adds codes over time, and newer trainers say how
 * severe an alert is and which trajectories show it; an unknown code is shown as it comes. */
export type DashboardHealth = Omit<HealthEvent, 'code' | 'severity' | 'trajectory_ids'> & {
  code: string;
  severity?: string;
  trajectory_ids?: string[];
};

/** The run events the dashboard draws, as the run's log has them (`seq` orders them, `time` in epoch seconds). */
export type DashboardEvent =
  | { seq: number; time: number; type: 'metrics'; data: MetricsEvent }
  | { seq: number; time: number; type: 'status'; data: StatusEvent }
  | { seq: number; time: number; type: 'health'; data: DashboardHealth };

/** One run the dashboard shows; the first is the one the others' configs are compared with. */
export interface DashboardRun {
  runId: string;
  name: string;
  /** The run's frozen config (`run/config`); absent when the trainer could not give it. */
  config?: Record<string, unknown>;
  /** The code the run trained with (`run/code`): null when it recorded none, absent when the trainer could not say
   * (an older server, a damaged code.json). */
  code?: CodeManifest | null;
}

/** Webview → host, once its listener is installed (and after every reload): "send me what to show". */
export interface DashboardReadyMessage {
  type: 'ready';
}

/** Webview → host, from a chart point or an alert: open the replay of that run at that step's groups. */
export interface DashboardOpenReplayMessage {
  type: 'openReplay';
  runId: string;
  step: number;
}

/** Webview → host, from the Code section: open the diff of these two runs' code (Agent RL: Compare Code). */
export interface DashboardCompareCodeMessage {
  type: 'compareCode';
  runId: string;
  otherRunId: string;
}

/** Host → webview, answering `ready`: the runs to overlay, in the order the user picked them. */
export interface DashboardRunsMessage {
  type: 'runs';
  runs: DashboardRun[];
}

/** Host → webview: events of one run, the history first, then live ones as the trainer writes them. The same
 * event may come twice (after a reload or a reconnect); the webview keeps one per `seq`. */
export interface DashboardEventsMessage {
  type: 'events';
  runId: string;
  events: DashboardEvent[];
}

export type DashboardHostMessage = DashboardRunsMessage | DashboardEventsMessage;
export type DashboardWebviewMessage = DashboardReadyMessage | DashboardOpenReplayMessage | DashboardCompareCodeMessage;
