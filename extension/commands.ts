// Command ids, declared once; package.json contributes the same ids (a unit test keeps them in step).
import * as vscode from 'vscode';
export const Commands = {
  newEnvironment: 'agentRl.newEnvironment',
  newTool: 'agentRl.newTool',
  newToolEnv: 'agentRl.newToolEnv',
  tryEnvironment: 'agentRl.tryEnvironment',
  startTraining: 'agentRl.startTraining',
  stopTraining: 'agentRl.stopTraining',
  resumeTraining: 'agentRl.resumeTraining',
  openReplay: 'agentRl.openReplay',
  openDashboard: 'agentRl.openDashboard',
  compareRuns: 'agentRl.compareRuns',
  compareCode: 'agentRl.compareCode',
  exportModel: 'agentRl.exportModel',
  deleteRun: 'agentRl.deleteRun',
  connectServer: 'agentRl.connectServer',
  startLocalServer: 'agentRl.startLocalServer',
  disconnectServer: 'agentRl.disconnectServer',
  forgetServerCertificate: 'agentRl.forgetServerCertificate',
  refreshRuns: 'agentRl.refreshRuns',
  showLogs: 'agentRl.showLogs',
  restartLanguageServer: 'agentRl.restartLanguageServer',
  checkSetup: 'agentRl.checkSetup',
  installTrainer: 'agentRl.installTrainer',
  searchEpisodes: 'agentRl.searchEpisodes',
  addToTrainingSet: 'agentRl.addToTrainingSet',
} as const;

export type CommandId = (typeof Commands)[keyof typeof Commands];

// Context keys set when a command has done its job, not merely started (VS Code's `onCommand` completes a walkthrough
// step as a command starts, even one that then fails or is cancelled): the walkthrough's steps complete on them.
export const Succeeded = {
  newEnvironment: 'agentRl.succeeded.newEnvironment',
  tryEnvironment: 'agentRl.succeeded.tryEnvironment',
  startTraining: 'agentRl.succeeded.startTraining',
  openDashboard: 'agentRl.succeeded.openDashboard',
  openReplay: 'agentRl.succeeded.openReplay',
} as const;

export function markSucceeded(command: keyof typeof Succeeded): void {
  void vscode.commands.executeCommand('setContext', Succeeded[command], true);
}
