// What the Runs view and the status bar show, kept up to date from `run/list` and the `run/event` stream.
// Pure (no `vscode`): the tree is run -> step -> group -> trajectory, and every node knows its label and
// description, so the tree provider in runsView.ts only maps nodes to TreeItems. A run's health alerts
// (the trainer saying it cannot learn) come from its `health` events. A run on a Ray cluster also has a row per
// worker (rollout and learner actors), before its steps, from its latest `workers` event. Each run's status, metrics and health
// events are also kept in order as they came, for the Run Dashboard to draw from the first step on. A working run's
// row says what its process is doing (its `phase` events); every run's row when it started, so runs of one env differ.
// While no server is connected, the runs read from the workspace's runs folder (offlineRuns.ts) are listed instead.
import {
  ACTIVE_RUN_STATUSES,
  RESUMABLE_RUN_STATUSES,
  WORKING_RUN_STATUSES,
  type HealthEvent,
  type PhaseEvent,
  type RayWorker,
  type RayWorkerState,
  type RunEventParams,
  type RunInfo,
  type RunPhase,
  type TrajectorySummary,
  type WorkerRestartedEvent,
} from '../protocol/generated/rpc';
import { forgetSupersededEvents } from '../protocol/superseded-events';
import type { OfflineRun } from './offlineRuns';
import { counted } from './counted';

export type RunNode = { kind: 'run'; runId: string };
export type StepNode = { kind: 'step'; runId: string; step: number };
export type GroupNode = { kind: 'group'; runId: string; step: number; group: number };
export type TrajectoryNode = { kind: 'trajectory'; runId: string; summary: TrajectorySummary };
export type WorkerNode = { kind: 'worker'; runId: string; worker: RayWorker };
export type RunsTreeNode = RunNode | WorkerNode | StepNode | GroupNode | TrajectoryNode;

/** What a worker row says of its worker: the state its run last reported, or `ended` once the run has ended (the
 *  trainer ends its workers then; one that died stays `dead`). */
export type WorkerRowState = RayWorkerState | 'ended';

interface RunState {
  info: RunInfo;
  /** Trajectories by id: a resumed run re-emits superseded ones, and the latest record of an id wins. */
  trajectories: Map<string, TrajectorySummary>;
  /** Health events by seq: the alerts in force are their fold, and a resume forgets the superseded ones. */
  health: Map<number, HealthEvent>;
  /** Status, metrics and health events in seq order (the stream delivers each once, in order). */
  timeline: TimelineEvent[];
  /** Steps the run wrote a checkpoint at (older ones may since have been pruned, train.keep_checkpoints). */
  checkpoints: Set<number>;
  /** Rollout workers of a run on a Ray cluster that died and were restarted, in order (each really happened, so a
   *  resume forgets none). */
  workerRestarts: WorkerRestartedEvent[];
  /** The Ray workers of the latest `workers` event: each lists them all (none for a run in one process). */
  workers: RayWorker[];
  /** A run read from its folder while no server is connected: that folder (nothing is streamed for it). */
  offlineFolder?: string;
}

/** A run as first listed: nothing streamed yet. */
const newRunState = (info: RunInfo, offlineFolder?: string): RunState => ({
  info,
  trajectories: new Map(),
  health: new Map(),
  timeline: [],
  checkpoints: new Set(),
  workerRestarts: [],
  workers: [],
  ...(offlineFolder === undefined ? {} : { offlineFolder }),
});

/** The events the Run Dashboard draws: what a run's charts, status and alerts are folded from. */
export type TimelineEvent = Extract<RunEventParams, { type: 'status' | 'metrics' | 'health' }>;

const formatNumber = (value: number): string => (Number.isInteger(value) ? String(value) : value.toFixed(2));
const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

const ended = ({ done, total }: PhaseEvent, what: string): string =>
  total === undefined ? '' : `: ${done} of ${total}${what} ended`;

/** Each phase of a run's process in words (rpc.schema.json `runPhase`). */
const PHASE_TEXT: Record<RunPhase, (phase: PhaseEvent) => string> = {
  loading_model: () => 'loading the model',
  starting_engine: () => 'starting the rollout engine',
  restoring_checkpoint: ({ step }) => `restoring the checkpoint of step ${step}`,
  // step 0: a Try run's episodes
  rollouts: (phase) =>
    phase.step ? `rollouts of step ${phase.step}${ended(phase, ' episodes')}` : `episodes${ended(phase, '')}`,
  updating: ({ step }) => `updating step ${step}`,
  evaluating: ({ step }) => `evaluating after step ${step}`,
  checkpointing: ({ step }) => `writing the checkpoint of step ${step}`,
};

/** What a run's process is doing, in words ("rollouts of step 3: 8 of 32 episodes ended"). */
export const describePhase = (phase: PhaseEvent): string => PHASE_TEXT[phase.phase](phase);

const MINUTE_MS = 60_000;

/** When a run started, as a row shows it: how long ago, coarser as it ages, and its date after a week. */
export function describeAge(createdAt: string | undefined, now: number): string | undefined {
  const started = createdAt ? Date.parse(createdAt) : NaN;
  if (Number.isNaN(started)) return undefined;
  const minutes = Math.max(0, Math.floor((now - started) / MINUTE_MS));
  if (minutes < 1) return 'just now';
  if (minutes < 60) return `${minutes} min ago`;
  if (minutes < 24 * 60) return `${Math.floor(minutes / 60)} h ago`;
  if (minutes < 7 * 24 * 60) return `${Math.floor(minutes / (24 * 60))} d ago`;
  return createdAt!.slice(0, 10);
}

/** A health event in words: what is wrong, the likely fix and the trajectories that show it (to open in the replay), or that it cleared. */
export const describeHealth = (event: HealthEvent): string =>
  event.resolved
    ? event.message
    : `${event.message}. Fix: ${event.fix}${event.trajectory_ids.length ? `. Trajectories that show it: ${event.trajectory_ids.join(', ')}` : ''}`;

export class RunsModel {
  private readonly runs = new Map<string, RunState>();
  private readonly listeners = new Set<(runId: string | undefined) => void>();

  /** `now`: the clock the rows' "started ... ago" is read against. */
  constructor(private readonly now: () => number = Date.now) {}

  /** Called with the run that changed, or undefined when the whole list did. */
  onDidChange(listener: (runId: string | undefined) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** Replaces the list with the server's (`run/list`), keeping what was already streamed. */
  setRuns(infos: RunInfo[]): void {
    const previous = new Map(this.runs);
    this.runs.clear();
    for (const info of infos) {
      const streamed = previous.get(info.runId);
      // a run listed offline before a server connected has streamed nothing, and is the server's run now
      this.runs.set(
        info.runId,
        streamed && streamed.offlineFolder === undefined ? { ...streamed, info } : newRunState(info),
      );
    }
    this.changed(undefined);
  }

  /** Adds or refreshes one run (`run/get`, or a run just started). */
  upsertRun(info: RunInfo): void {
    const state = this.runs.get(info.runId);
    if (state) state.info = info;
    else this.runs.set(info.runId, newRunState(info));
    this.changed(info.runId);
  }

  /** Replaces the list with the runs read from a runs folder while no server is connected. */
  setOfflineRuns(runs: OfflineRun[]): void {
    this.runs.clear();
    for (const { info, folder } of runs) this.runs.set(info.runId, newRunState(info, folder));
    this.changed(undefined);
  }

  clear(): void {
    this.runs.clear();
    this.changed(undefined);
  }

  applyEvent(event: RunEventParams): void {
    const state = this.runs.get(event.runId);
    if (!state) return;
    state.info.lastSeq = Math.max(state.info.lastSeq, event.seq);
    if (event.type === 'status' || event.type === 'metrics' || event.type === 'health') state.timeline.push(event);
    switch (event.type) {
      case 'status': {
        Object.assign(state.info, event.runInfo);
        if (!WORKING_RUN_STATUSES.has(event.runInfo.status)) delete state.info.phase; // no process works on it
        forgetSupersededEvents(state.health, event);
        break;
      }
      case 'phase':
        state.info.phase = event.data;
        break;
      case 'metrics':
        state.info.latestMetrics = event.data.metrics;
        break;
      case 'trajectory':
        state.trajectories.set(event.data.id, event.data);
        break;
      case 'checkpoint':
        state.info.hasCheckpoint = true;
        state.checkpoints.add(event.data.step);
        break;
      case 'health':
        state.health.set(event.seq, event.data);
        break;
      case 'worker_restarted':
        state.workerRestarts.push(event.data);
        break;
      case 'workers':
        state.workers = event.data.workers;
        break;
      case 'log':
        return; // log events change nothing shown here
    }
    this.changed(event.runId);
  }

  run(runId: string): RunInfo | undefined {
    return this.runs.get(runId)?.info;
  }

  /** Every run, newest first: the order of the Runs view and of every run picker. */
  runIds(): string[] {
    return this.newestFirst().map((info) => info.runId);
  }

  private newestFirst(): RunInfo[] {
    return [...this.runs.values()]
      .map((s) => s.info)
      .sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? '') || b.runId.localeCompare(a.runId));
  }

  /** The run the status bar follows: the newest active one, else the newest. */
  focusRun(): RunInfo | undefined {
    const infos = this.newestFirst();
    return infos.find((i) => ACTIVE_RUN_STATUSES.has(i.status)) ?? infos[0];
  }

  /** The run's status, metrics and health events streamed so far, in seq order. */
  timeline(runId: string): TimelineEvent[] {
    return this.runs.get(runId)?.timeline ?? [];
  }

  trajectories(runId: string): TrajectorySummary[] {
    return [...(this.runs.get(runId)?.trajectories.values() ?? [])];
  }

  /** The run's health alerts in force: each started and not yet resolved, the earliest first. */
  healthAlerts(runId: string): HealthEvent[] {
    const inForce = new Map<HealthEvent['code'], HealthEvent>();
    for (const event of this.runs.get(runId)?.health.values() ?? []) {
      // in seq order: the stream delivers it so
      if (event.resolved) inForce.delete(event.code);
      else inForce.set(event.code, event);
    }
    return [...inForce.values()];
  }

  /** The run's rollout workers that died and were restarted, in words, the earliest first (its tooltip lists them). */
  workerRestarts(runId: string): string[] {
    return (this.runs.get(runId)?.workerRestarts ?? []).map(
      (e) =>
        `step ${e.step}: rollout worker ${e.worker} restarted; its ${counted(e.episodes_rerun, 'episode')} ran on worker ${e.rerun_on}`,
    );
  }

  /** The state a worker row shows (see WorkerRowState). */
  workerState(node: WorkerNode): WorkerRowState {
    return node.worker.state === 'dead' || this.isActive(node.runId) ? node.worker.state : 'ended';
  }

  /** Whether the run wrote a checkpoint at this step (Export Model offers it). */
  hasCheckpointAt(runId: string, step: number): boolean {
    return this.runs.get(runId)?.checkpoints.has(step) ?? false;
  }

  /** The folder of a run read from disk while no server is connected; undefined for a server's run. */
  offlineFolder(runId: string): string | undefined {
    return this.runs.get(runId)?.offlineFolder;
  }

  /** What the run's process is doing while it works (its phase), or why it waits while it is queued; undefined once
   *  it has ended. What a row, and the notification of a run this editor started, say of it. */
  activity(runId: string): string | undefined {
    const info = this.run(runId);
    if (!info) return undefined;
    if (info.status === 'queued') return info.message ?? undefined;
    return info.phase && WORKING_RUN_STATUSES.has(info.status) ? describePhase(info.phase) : undefined;
  }

  isActive(runId: string): boolean {
    const info = this.run(runId);
    return !!info && ACTIVE_RUN_STATUSES.has(info.status);
  }

  isResumable(runId: string): boolean {
    const info = this.run(runId);
    return !!info && info.mode === 'train' && info.hasCheckpoint && RESUMABLE_RUN_STATUSES.has(info.status);
  }

  children(node?: RunsTreeNode): RunsTreeNode[] {
    if (!node) {
      return this.runIds().map((runId) => ({ kind: 'run', runId }));
    }
    const all = this.trajectories(node.runId);
    switch (node.kind) {
      case 'run': {
        const workers: RunsTreeNode[] = (this.runs.get(node.runId)?.workers ?? []).map((worker) => ({
          kind: 'worker',
          runId: node.runId,
          worker,
        }));
        const steps: RunsTreeNode[] = [...new Set(all.map((t) => t.step))]
          .sort((a, b) => b - a)
          .map((step) => ({ kind: 'step', runId: node.runId, step }));
        return [...workers, ...steps];
      }
      case 'step':
        return [...new Set(all.filter((t) => t.step === node.step).map((t) => t.group))]
          .sort((a, b) => a - b)
          .map((group) => ({ kind: 'group', runId: node.runId, step: node.step, group }));
      case 'group':
        return all
          .filter((t) => t.step === node.step && t.group === node.group)
          .sort((a, b) => a.sample - b.sample)
          .map((summary) => ({ kind: 'trajectory', runId: node.runId, summary }));
      case 'worker':
      case 'trajectory':
        return [];
    }
  }

  /** How the editor names a run: its name, and where another run has the same name, its mode and start time
   *  ("my-env (try 10:04:31)"), so that two dashboards, a comparison or a picker tell them apart. */
  runName(runId: string): string {
    const info = this.run(runId);
    if (!info) return runId;
    const namesakes = [...this.runs.values()].filter((s) => s.info.name === info.name).length;
    if (namesakes < 2) return info.name;
    const started = info.createdAt ? new Date(info.createdAt) : undefined;
    const time = started
      ? [started.getHours(), started.getMinutes(), started.getSeconds()]
          .map((n) => String(n).padStart(2, '0'))
          .join(':')
      : runId;
    return `${info.name} (${info.mode} ${time})`;
  }

  label(node: RunsTreeNode): string {
    switch (node.kind) {
      case 'run':
        return this.runName(node.runId);
      case 'worker':
        return `${node.worker.role} worker ${node.worker.index}`;
      case 'step':
        return node.step === 0 && this.run(node.runId)?.mode === 'try' ? 'episodes' : `step ${node.step}`;
      case 'group':
        return `group ${node.group} · ${this.groupOf(node)[0]?.task_id ?? ''}`;
      case 'trajectory':
        return `sample ${node.summary.sample}`;
    }
  }

  /** The grey text after the label: status and reward, the figures a user scans the tree for. */
  description(node: RunsTreeNode): string {
    switch (node.kind) {
      case 'run': {
        const info = this.run(node.runId);
        if (!info) return '';
        // a Try or eval run has no steps to count: its mode says what it was
        const progress = info.mode === 'train' ? `${info.step}/${info.totalSteps}` : info.mode;
        const reward = info.latestMetrics['reward/mean'];
        const alerts = this.healthAlerts(node.runId).map((a) => a.code);
        return [
          this.offlineFolder(node.runId) ? 'offline' : undefined,
          info.status,
          progress,
          this.activity(node.runId),
          describeAge(info.createdAt, this.now()),
          reward === undefined ? undefined : `reward ${formatNumber(reward)}`,
          alerts.length ? `⚠ ${alerts.join(', ')}` : undefined,
          info.damage?.length ? '⚠ damaged folder' : undefined,
        ]
          .filter(Boolean)
          .join(' · ');
      }
      case 'worker': {
        const { restarts, node: address } = node.worker;
        return [
          this.workerState(node),
          restarts ? `${restarts} ${restarts === 1 ? 'restart' : 'restarts'}` : undefined,
          address,
        ]
          .filter(Boolean)
          .join(' · ');
      }
      case 'step': {
        const items = this.trajectories(node.runId).filter((t) => t.step === node.step);
        const errors = items.reduce((n, t) => n + t.num_tool_errors, 0);
        return [
          `reward ${formatNumber(mean(items.map((t) => t.reward)))}`,
          counted(items.length, 'episode'),
          errors ? counted(errors, 'tool error') : undefined,
          this.hasCheckpointAt(node.runId, node.step) ? 'checkpoint' : undefined,
        ]
          .filter(Boolean)
          .join(' · ');
      }
      case 'group': {
        const rewards = this.groupOf(node).map((t) => t.reward);
        const flat = rewards.length > 1 && rewards.every((r) => r === rewards[0]);
        return `reward ${formatNumber(mean(rewards))}${flat ? ' · zero variance' : ''}`;
      }
      case 'trajectory': {
        const t = node.summary;
        return [
          `reward ${formatNumber(t.reward)}`,
          t.status,
          counted(t.num_tool_calls, 'tool call'),
          t.num_tool_errors ? counted(t.num_tool_errors, 'error') : undefined,
        ]
          .filter(Boolean)
          .join(' · ');
      }
    }
  }

  private groupOf(node: GroupNode): TrajectorySummary[] {
    return this.trajectories(node.runId).filter((t) => t.step === node.step && t.group === node.group);
  }

  private changed(runId: string | undefined): void {
    for (const listener of [...this.listeners]) listener(runId);
  }
}
