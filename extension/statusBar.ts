// One status bar item: the server's state, and the run it follows (step/total, mean reward, a warning while
// a health alert is in force). Its tooltip holds the alerts and command links for what a user wants next:
// logs, dashboard, stop, open replay.
import * as vscode from 'vscode';
import { ACTIVE_RUN_STATUSES } from '../protocol/generated/rpc';
import { Commands } from './commands';
import type { Ctx } from './ctx';
import { appendHealthAlerts, RUNS_VIEW_ID } from './runsView';

const commandLink = (title: string, command: string, args?: unknown): string =>
  `[${title}](command:${command}${args === undefined ? '' : `?${encodeURIComponent(JSON.stringify([args]))}`})`;

export function registerStatusBar({ connection }: Ctx): vscode.Disposable {
  const item = vscode.window.createStatusBarItem('agentRl.status', vscode.StatusBarAlignment.Left, 10);
  item.name = 'Agent RL';
  const update = (): void => {
    const state = connection.state;
    const run = connection.model.focusRun();
    const tooltip = new vscode.MarkdownString('', true);
    tooltip.isTrusted = { enabledCommands: Object.values(Commands) };
    if (state !== 'connected') {
      item.text =
        state === 'connecting' || state === 'reconnecting'
          ? `$(loading~spin) Agent RL: ${state}`
          : '$(circle-slash) Agent RL';
      item.command = state === 'idle' || state === 'closed' ? Commands.startLocalServer : Commands.showLogs;
      tooltip.appendMarkdown(`Trainer server: **${state === 'closed' ? 'disconnected' : state}**\n\n`);
      tooltip.appendMarkdown(
        [
          commandLink('Start Local Server', Commands.startLocalServer),
          commandLink('Connect to Server', Commands.connectServer),
          commandLink('Show Logs', Commands.showLogs),
        ].join(' · '),
      );
    } else {
      const where = connection.kind === 'local' ? 'local server' : (connection.url ?? '');
      if (run) {
        const reward = run.latestMetrics['reward/mean'];
        const active = ACTIVE_RUN_STATUSES.has(run.status);
        const alerts = connection.model.healthAlerts(run.runId);
        item.text = `${active ? '$(sync~spin)' : '$(beaker)'} ${run.name} ${run.mode === 'try' ? 'try' : `${run.step}/${run.totalSteps}`}${reward === undefined ? '' : ` · r ${reward.toFixed(2)}`}${alerts.length ? ' $(warning)' : ''}`;
        tooltip.appendMarkdown(
          `**${run.name}** (${run.mode}): ${run.status}, step ${run.step} of ${run.totalSteps}${reward === undefined ? '' : `, mean reward ${reward.toFixed(3)}`}\n\n`,
        );
        appendHealthAlerts(tooltip, alerts).appendMarkdown(`Connected to the ${where}\n\n`);
        const links = [
          commandLink('Show Logs', Commands.showLogs),
          commandLink('Open Dashboard', Commands.openDashboard, { runId: run.runId }),
          commandLink('Open Replay', Commands.openReplay, { runId: run.runId }),
        ];
        if (active) links.push(commandLink('Stop', Commands.stopTraining, { runId: run.runId }));
        tooltip.appendMarkdown(links.join(' · '));
      } else {
        item.text = '$(beaker) Agent RL';
        tooltip.appendMarkdown(
          `Connected to the ${where}; no runs yet.\n\n${commandLink('Start Training', Commands.startTraining)} · ${commandLink('Show Logs', Commands.showLogs)}`,
        );
      }
      item.command = `${RUNS_VIEW_ID}.focus`;
    }
    item.tooltip = tooltip;
    item.accessibilityInformation = { label: item.text.replace(/\$\([^)]+\)\s*/g, ''), role: 'button' };
    item.show();
  };
  update();
  return vscode.Disposable.from(item, connection.onDidChangeState(update), {
    dispose: connection.model.onDidChange(update).dispose,
  });
}
