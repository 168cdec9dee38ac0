// Host side of the Run Dashboard: the commands that open it (a run, or several picked in the Runs view to
// compare), and the relay from the trainer connection's event stream into the webview. It draws from the
// same stream as the Runs view: the Runs model keeps each followed run's status, metrics and health events
// from its first one (a finished run's whole log is replayed by `run/subscribe` since 0, a live run's arrives
// as it trains), and the trainer client resubscribes `since` the last seq after a reconnect, so nothing is
// lost or doubled. Talks to the webview only through protocol/dashboard-messages.ts.
import * as vscode from 'vscode';
import type {
  DashboardEvent,
  DashboardHostMessage,
  DashboardRun,
  DashboardWebviewMessage,
} from '../protocol/dashboard-messages';
import type { RunEventParams } from '../protocol/generated/rpc';
import { Commands, markSucceeded } from './commands';
import { registerCommands, type Ctx } from './ctx';
import type { RunsTreeNode, TimelineEvent } from './runsModel';
import type { TrainerConnection } from './trainerConnection';
import { EditorFailure } from './troubleshooting';
import { webviewHtml } from './webviewHtml';

/** How long live events wait to travel together: a replayed log of 10,000s of events is a few messages. */
const BATCH_MS = 50;

/** A Runs-view row, or `{runId}` from a link (status bar, notification). */
type DashboardTarget = { runId: string } | RunsTreeNode;

export function registerDashboard(ctx: Ctx): vscode.Disposable {
  // One panel per set of runs: opening it again shows the open one.
  const panels = new Map<string, vscode.WebviewPanel>();
  const open = (runIds: string[]): string[] => {
    const key = runIds.join('\n');
    const existing = panels.get(key);
    if (existing) {
      existing.reveal();
      return runIds;
    }
    const panel = openDashboard(ctx, connectedTrainer(ctx), runIds);
    panels.set(key, panel);
    panel.onDidDispose(() => panels.delete(key));
    markSucceeded('openDashboard');
    return runIds;
  };
  return registerCommands(ctx, {
    [Commands.openDashboard]: {
      title: 'Open Run Dashboard',
      make: (ctx) => async (target?: DashboardTarget) => {
        const picked = target ? [target.runId] : await pickRuns(ctx, 'Open Run Dashboard', false);
        return picked?.length ? open(picked) : undefined;
      },
    },
    // From a run's row: a list of every run with that one ticked, to tick the others to overlay.
    [Commands.compareRuns]: {
      title: 'Compare in Dashboard',
      make: (ctx) => async (target?: DashboardTarget) => {
        const picked = await pickRuns(ctx, 'Compare in Dashboard', true, target?.runId);
        return picked?.length ? open(picked) : undefined;
      },
    },
  });
}

/** The trainer connection, which must be connected: the dashboard draws a server's runs. */
function connectedTrainer(ctx: Ctx): TrainerConnection {
  if (!ctx.connection.isConnected)
    throw new EditorFailure('notConnected', 'not connected to a trainer server; start or connect one to see its runs');
  return ctx.connection;
}

async function pickRuns(ctx: Ctx, title: string, many: boolean, preselected?: string): Promise<string[] | undefined> {
  const trainer = connectedTrainer(ctx);
  // The run the command came from leads: the others are compared with it.
  const runIds = trainer.model.runIds().sort((a, b) => Number(b === preselected) - Number(a === preselected));
  if (runIds.length === 0) throw new Error('the trainer server has no runs yet');
  if (runIds.length === 1) return runIds;
  const items = runIds.map((runId) => ({
    label: trainer.model.runName(runId),
    description: trainer.model.description({ kind: 'run', runId }),
    detail: runId,
    runId,
    picked: runId === preselected,
  }));
  if (!many) {
    const item = await vscode.window.showQuickPick(items, { title, placeHolder: 'Run' });
    return item ? [item.runId] : undefined;
  }
  const chosen = await vscode.window.showQuickPick(items, {
    title,
    placeHolder: 'Runs to overlay (the first is the one the others are compared with)',
    canPickMany: true,
  });
  return chosen?.map((item) => item.runId);
}

function openDashboard(ctx: Ctx, trainer: TrainerConnection, runIds: string[]): vscode.WebviewPanel {
  const webviewRoot = vscode.Uri.joinPath(ctx.extensionContext.extensionUri, 'dist', 'webview');
  const names = runIds.map((runId) => trainer.model.runName(runId));
  const title = runIds.length === 1 ? `Dashboard: ${names[0]}` : `Compare: ${names.join(', ')}`;
  const panel = vscode.window.createWebviewPanel('agentRl.dashboard', title, vscode.ViewColumn.Active, {
    enableScripts: true,
    localResourceRoots: [webviewRoot],
  });
  const post = (message: DashboardHostMessage) => void panel.webview.postMessage(message);
  // Until the webview has had the history, live events are not sent: the history read at that moment holds them.
  let ready = false;
  const pending = new Map<string, DashboardEvent[]>();
  let flushTimer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    flushTimer = undefined;
    for (const [runId, events] of pending) post({ type: 'events', runId, events });
    pending.clear();
  };
  const subscription = trainer.onRunEvent((event) => {
    if (!ready || !runIds.includes(event.runId) || !isTimelineEvent(event)) return;
    pending.set(event.runId, [...(pending.get(event.runId) ?? []), toDashboardEvent(event)]);
    flushTimer ??= setTimeout(flush, BATCH_MS);
  });
  panel.onDidDispose(() => {
    subscription.dispose();
    clearTimeout(flushTimer);
  });
  panel.webview.onDidReceiveMessage(async (message: DashboardWebviewMessage) => {
    switch (message.type) {
      case 'ready': {
        ready = false;
        pending.clear();
        // What the trainer cannot give (an older server, a damaged file) is logged and left out: the charts still draw.
        const orNothing = (what: string, runId: string) => (err: Error) => {
          ctx.log.warn(`dashboard: no ${what} for ${runId}: ${err.message}`);
          return undefined;
        };
        const runs: DashboardRun[] = await Promise.all(
          runIds.map(async (runId, i) => ({
            runId,
            name: names[i],
            config: await trainer.request('run/config', { runId }).then((r) => r.config, orNothing('config', runId)),
            code: await trainer.request('run/code', { runId }).then((r) => r.manifest, orNothing('code', runId)),
          })),
        );
        post({ type: 'runs', runs });
        for (const runId of runIds)
          post({ type: 'events', runId, events: trainer.model.timeline(runId).map(toDashboardEvent) });
        ready = true;
        return;
      }
      case 'openReplay':
        await vscode.commands.executeCommand(Commands.openReplay, { runId: message.runId, step: message.step });
        return;
      case 'compareCode': {
        const rows = [{ runId: message.runId }, { runId: message.otherRunId }];
        await vscode.commands.executeCommand(Commands.compareCode, rows[0], rows);
        return;
      }
    }
  });
  panel.webview.html = webviewHtml(panel.webview, webviewRoot, 'dashboard', 'Run Dashboard');
  for (const runId of runIds)
    void trainer.follow(runId).catch((err: Error) => ctx.log.warn(`dashboard: cannot follow ${runId}: ${err.message}`));
  return panel;
}

function isTimelineEvent(event: RunEventParams): event is TimelineEvent {
  return event.type === 'status' || event.type === 'metrics' || event.type === 'health';
}

/** The log line inside the `run/event` envelope, as the webview folds it. */
function toDashboardEvent(event: TimelineEvent): DashboardEvent {
  return { seq: event.seq, time: event.time, type: event.type, data: event.data } as DashboardEvent;
}
