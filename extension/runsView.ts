// The Runs tree view (activity bar "Agent RL"): run -> step -> group -> trajectory from RunsModel, with
// inline stop/resume/replay actions chosen by each item's contextValue (package.json `view/item/context`).
// A run on a Ray cluster lists its workers first, each with an icon for its state.
// A run with a health alert in force (the trainer says it cannot learn) shows a warning icon and the alert in
// its tooltip; an alert that starts while we watch is also a warning notification, once.
// While no server is connected, the view lists the runs of the workspace's runs folder as their files say
// (offlineRuns.ts): rows without children or actions but the replay, which reads their trajectory files.
import * as vscode from 'vscode';
import type { HealthEvent } from '../protocol/generated/rpc';
import type { HealthAlert, RunWarning, TrainerConnection } from './trainerConnection';
import { describeHealth, type RunsTreeNode, type WorkerRowState } from './runsModel';
import { Commands } from './commands';
import { SHOW_LOGS, showError, type Ctx } from './ctx';
import { readOfflineRuns } from './offlineRuns';

export const RUNS_VIEW_ID = 'agentRl.runs';
// A row says how long ago its run started: redrawn this often, so that "just now" does not stay.
const AGE_REFRESH_MS = 60_000;
// A run that steps several times a second sends events faster than anyone reads rows: the view is redrawn once per
// this interval at most, with what the latest event says. (A redraw replaces the rows, and a context menu opened on
// a replaced row runs its command without the row.)
export const REDRAW_INTERVAL_MS = 500;

const STATUS_ICONS: Record<string, [string, string?]> = {
  queued: ['clock'],
  running: ['sync~spin', 'charts.blue'],
  stopping: ['debug-pause', 'charts.yellow'],
  completed: ['pass', 'testing.iconPassed'],
  stopped: ['debug-stop', 'charts.yellow'],
  failed: ['error', 'testing.iconFailed'],
  interrupted: ['warning', 'charts.orange'],
};
const HEALTH_ALERT_ICON: [string, string] = ['warning', 'problemsWarningIcon.foreground'];
const WORKER_STATE_ICONS: Record<WorkerRowState, [string, string?]> = {
  starting: ['loading~spin'],
  ready: ['vm-running', 'testing.iconPassed'],
  restarting: ['debug-restart', 'charts.yellow'],
  dead: ['error', 'testing.iconFailed'],
  ended: ['vm-outline'],
};

const themeIcon = ([icon, color]: [string, string?]): vscode.ThemeIcon =>
  new vscode.ThemeIcon(icon, color ? new vscode.ThemeColor(color) : undefined);

/** One paragraph per alert in a tooltip that supports theme icons (also the status bar's). */
export function appendHealthAlerts(tooltip: vscode.MarkdownString, alerts: HealthEvent[]): vscode.MarkdownString {
  // The alert's words name config keys and tool-call markup such as <tool_call>: text, not Markdown.
  for (const alert of alerts)
    tooltip.appendMarkdown(`$(warning) **${alert.code}**: `).appendText(describeHealth(alert)).appendMarkdown('\n\n');
  return tooltip;
}

export class RunsTreeProvider implements vscode.TreeDataProvider<RunsTreeNode> {
  private readonly changed = new vscode.EventEmitter<RunsTreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private redrawPending: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly connection: TrainerConnection) {
    connection.model.onDidChange(() => this.redrawSoon());
  }

  private redrawSoon(): void {
    this.redrawPending ??= setTimeout(() => {
      this.redrawPending = undefined;
      this.changed.fire(undefined);
    }, REDRAW_INTERVAL_MS);
  }

  getChildren(node?: RunsTreeNode): RunsTreeNode[] {
    if (node?.kind === 'run') void this.connection.follow(node.runId).catch(() => undefined); // expanding a run streams it
    return this.connection.model.children(node);
  }

  /** Redraws every row (their ages). */
  refresh(): void {
    this.changed.fire(undefined);
  }

  getTreeItem(node: RunsTreeNode): vscode.TreeItem {
    const model = this.connection.model;
    const offline = node.kind === 'run' && model.offlineFolder(node.runId) !== undefined;
    const collapsible =
      node.kind === 'trajectory' || node.kind === 'worker' || offline // nothing streamed: no steps to list
        ? vscode.TreeItemCollapsibleState.None
        : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(model.label(node), collapsible);
    item.description = model.description(node);
    switch (node.kind) {
      case 'run': {
        const info = model.run(node.runId)!;
        const alerts = model.healthAlerts(node.runId);
        item.iconPath = themeIcon(
          alerts.length ? HEALTH_ALERT_ICON : (STATUS_ICONS[info.status] ?? ['circle-outline']),
        );
        item.id = `run:${node.runId}`;
        // an offline row offers only the replay: stopping, resuming or deleting a run needs its server
        item.contextValue = offline
          ? 'offlineRun'
          : [
              'run',
              model.isActive(node.runId) ? 'active' : 'deletable',
              model.isResumable(node.runId) ? 'resumable' : '',
            ]
              .filter(Boolean)
              .join('.');
        if (offline)
          item.command = { command: Commands.openReplay, title: 'Open Replay', arguments: [{ runId: node.runId }] };
        const activity = model.activity(node.runId);
        const tooltip = new vscode.MarkdownString(
          [
            `**${info.name}** (${info.mode}) \`${info.runId}\``,
            ...(offline
              ? [`Offline: read from \`${model.offlineFolder(node.runId)}\`; no trainer server is connected.`]
              : []),
            `${info.status}, step ${info.step} of ${info.totalSteps}${info.message ? `: ${info.message}` : ''}`,
            ...(activity ? [`Now: ${activity}`] : []),
            ...(info.createdAt ? [`Started ${new Date(info.createdAt).toLocaleString()}`] : []),
            ...Object.entries(info.latestMetrics)
              .filter(([k]) => k.startsWith('reward/'))
              .slice(0, 6)
              .map(([k, v]) => `- ${k}: ${v.toFixed(3)}`),
            ...model.workerRestarts(node.runId).map((line) => `- ${line}`),
          ].join('\n\n') + '\n\n',
          true,
        );
        if (info.damage?.length)
          // what is damaged names files and what was wrong in them: shown as text, never as markdown
          tooltip.appendText(
            `Damaged run folder (skipped when read):\n${info.damage.map((d) => `- ${d}`).join('\n')}\n\n`,
          );
        item.tooltip = appendHealthAlerts(tooltip, alerts);
        break;
      }
      case 'worker': {
        const { role, index } = node.worker;
        item.iconPath = themeIcon(WORKER_STATE_ICONS[model.workerState(node)]);
        item.id = `worker:${node.runId}:${role}:${index}`;
        break;
      }
      case 'step':
        item.iconPath = new vscode.ThemeIcon('layers');
        item.id = `step:${node.runId}:${node.step}`;
        item.contextValue = model.hasCheckpointAt(node.runId, node.step) ? 'step.checkpoint' : 'step';
        break;
      case 'group':
        item.iconPath = new vscode.ThemeIcon('symbol-array');
        item.id = `group:${node.runId}:${node.step}:${node.group}`;
        break;
      case 'trajectory': {
        const t = node.summary;
        item.iconPath = new vscode.ThemeIcon(
          t.status === 'error' || t.num_tool_errors
            ? 'warning'
            : t.status === 'truncated'
              ? 'fold'
              : 'comment-discussion',
        );
        item.id = `trajectory:${node.runId}:${t.id}`;
        item.contextValue = 'trajectory';
        item.command = { command: Commands.openReplay, title: 'Open Replay', arguments: [{ runId: node.runId }] };
        break;
      }
    }
    return item;
  }
}

export function registerRunsView(ctx: Ctx): vscode.Disposable {
  const { connection } = ctx;
  const provider = new RunsTreeProvider(connection);
  // Several rows at once: Compare Code on two selected runs compares them, Search Episodes searches every selected run
  // (a command gets the clicked row, then every selected one).
  const view = vscode.window.createTreeView(RUNS_VIEW_ID, {
    treeDataProvider: provider,
    showCollapseAll: true,
    canSelectMany: true,
  });
  const onStateChange = (): void => {
    void vscode.commands.executeCommand('setContext', 'agentRl.connected', connection.isConnected);
    if (noServer(connection)) void listOfflineRuns(ctx, view);
    else view.message = undefined;
  };
  onStateChange();
  const ages = setInterval(() => provider.refresh(), AGE_REFRESH_MS);
  ages.unref(); // a redraw is never a reason for the extension host to stay
  return vscode.Disposable.from(
    view,
    connection.onDidChangeState(onStateChange),
    connection.onHealthAlert((alert) => notifyHealthAlert(ctx, alert)),
    connection.onRunWarning(notifyRunWarningOnce()),
    { dispose: () => clearInterval(ages) },
  );
}

/** Whether no server is connected or being connected to: what the offline list is for. */
const noServer = ({ state }: TrainerConnection): boolean => state === 'idle' || state === 'closed';

/** While no server is connected: the runs of the folder a local server would keep them in, from their files. */
async function listOfflineRuns({ connection, settings, log }: Ctx, view: vscode.TreeView<RunsTreeNode>): Promise<void> {
  const root = settings.workspaceRoot();
  if (!root) return;
  const folder = settings.runsFolder(root);
  const runs = await readOfflineRuns(folder).catch((err: Error) => {
    log.warn(`Could not read the runs in ${folder}: ${err.message}`);
    return [];
  });
  if (!noServer(connection)) return; // a server connected (or is connecting) meanwhile
  connection.model.setOfflineRuns(runs);
  view.message = runs.length
    ? `No trainer server is connected: these runs are read from ${vscode.workspace.asRelativePath(folder)}, as their files say. Start Local Server to follow them again.`
    : undefined;
}

function notifyHealthAlert(ctx: Ctx, { runId, runName, alert }: HealthAlert): void {
  const actions = { dashboard: 'Open Dashboard', replay: 'Open Replay', logs: SHOW_LOGS };
  // severity error: the run stopped (a non-finite loss, say); warning: it goes on but is unlikely to learn.
  const shown =
    alert.severity === 'error'
      ? showError(
          ctx,
          `Agent RL: run ${runName} stopped (${alert.code}): ${describeHealth(alert)}`,
          'healthError',
          actions.dashboard,
          actions.replay,
          actions.logs,
        )
      : vscode.window.showWarningMessage(
          `Agent RL: run ${runName} is not learning (${alert.code}): ${describeHealth(alert)}`,
          actions.dashboard,
          actions.replay,
          actions.logs,
        );
  void shown.then((choice) => {
    if (choice === actions.dashboard) void vscode.commands.executeCommand(Commands.openDashboard, { runId });
    if (choice === actions.replay) void vscode.commands.executeCommand(Commands.openReplay, { runId });
    if (choice === actions.logs) void vscode.commands.executeCommand(Commands.showLogs);
  });
}

/** A run's warnings as notifications, each message once per run (a warning the trainer repeats every step is one
 * notification, not one a step): the log holds them all, one click away. */
export function notifyRunWarningOnce(): (warning: RunWarning) => void {
  const shown = new Set<string>();
  return ({ runId, runName, message }) => {
    const key = `${runId}\u0000${message}`;
    if (shown.has(key)) return;
    shown.add(key);
    void vscode.window.showWarningMessage(`Agent RL: run ${runName}: ${message}`, SHOW_LOGS).then((choice) => {
      if (choice === SHOW_LOGS) void vscode.commands.executeCommand(Commands.showLogs);
    });
  };
}
