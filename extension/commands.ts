// Command ids, declared once; package.json contributes the same ids (a unit test keeps them in step).
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
  refreshRuns: 'agentRl.refreshRuns',
  showLogs: 'agentRl.showLogs',
  restartLanguageServer: 'agentRl.restartLanguageServer',
  checkSetup: 'agentRl.checkSetup',
  installTrainer: 'agentRl.installTrainer',
  searchEpisodes: 'agentRl.searchEpisodes',
} as const;

export type CommandId = (typeof Commands)[keyof typeof Commands];
