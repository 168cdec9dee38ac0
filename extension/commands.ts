// Command ids, declared once; package.json contributes the same ids (a unit test keeps them in step).
export const Commands = {
  newEnvironment: 'agentRl.newEnvironment',
  showLogs: 'agentRl.showLogs',
} as const;
