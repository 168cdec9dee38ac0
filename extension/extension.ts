// Entry point. The extension activates in every window once it has started (so that the Get Started walkthrough
// finds a newcomer in an empty folder), and earlier where a run config or a trajectory file is there; activation does
// nothing heavy, and the language server starts only when a run config opens (runConfigDocuments.ts). It
// builds the one Ctx (the log channel, the trainer connection, not connected until asked, and the settings) and
// gives it to the language client, the Runs view, the status bar item, health alerts as problems, the server, run
// and scaffold commands, the Run Dashboard, Compare Code, the replay panel, the Get Started walkthrough, the set-up
// commands (Check Setup, Install the Trainer), Search Episodes and Add to Training Set.
import * as vscode from 'vscode';
import { registerCompareCode } from './compareCode';
import { registerConnectionCommands } from './connectionCommands';
import type { Ctx } from './ctx';
import { registerDashboard } from './dashboard';
import { registerHealthDiagnostics } from './healthDiagnostics';
import { startLanguageClient, type LanguageClientHandle } from './languageClient';
import { registerReplay } from './replay';
import { registerRunCommands } from './runCommands';
import { registerRunsView } from './runsView';
import { registerScaffoldCommands } from './scaffoldCommands';
import { registerSearchCommands } from './searchCommands';
import { registerSetupCommands } from './setupCommands';
import { workspaceSettings } from './settings';
import { registerStatusBar } from './statusBar';
import { TrainerConnection } from './trainerConnection';
import { registerTrainingSets } from './trainingSets';
import { registerWalkthrough } from './walkthrough';

let languageClient: LanguageClientHandle | undefined;
let connection: TrainerConnection | undefined;

export function activate(extensionContext: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('Agent RL', { log: true });
  connection = new TrainerConnection(extensionContext, log);
  const ctx: Ctx = { extensionContext, log, connection, settings: workspaceSettings };
  extensionContext.subscriptions.push(log, connection);
  languageClient = startLanguageClient(ctx);
  extensionContext.subscriptions.push(
    ...[
      registerRunsView,
      registerStatusBar,
      registerHealthDiagnostics,
      registerConnectionCommands,
      registerRunCommands,
      registerScaffoldCommands,
      registerDashboard,
      registerCompareCode,
      registerReplay,
      registerWalkthrough,
      registerSetupCommands,
      registerSearchCommands,
      registerTrainingSets,
    ].map((register) => register(ctx)),
  );
}

/** Awaited by VS Code: the language server and a local trainer server exit before the extension host does. */
export async function deactivate(): Promise<void> {
  await Promise.all([languageClient?.stop(), connection?.disconnect()]);
}
