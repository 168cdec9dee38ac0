// Entry point. Activation is lazy (commands, views, *.agentrl.yaml in the workspace) and does nothing heavy:
// one log channel, the language client, the trainer connection (not connected until asked), the Runs view,
// the status bar item, the replay panel, the Run Dashboard, health alerts as problems, and command registrations.
import { join } from 'node:path';
import * as vscode from 'vscode';
import { Commands } from './commands';
import { registerDashboard } from './dashboard';
import { registerHealthDiagnostics } from './healthDiagnostics';
import { startLanguageClient, type LanguageClientHandle } from './languageClient';
import { registerReplay } from './replay';
import { ensureConnected, registerRunCommands } from './runCommands';
import { registerRunsView } from './runsView';
import { registerScaffoldCommands } from './scaffoldCommands';
import { registerStatusBar } from './statusBar';
import { TrainerConnection } from './trainerConnection';

// The trainer gives a server 60 s to start and list its tools.
const MCP_LIST_TIMEOUT_MS = 75_000;

let languageClient: LanguageClientHandle | undefined;
let connection: TrainerConnection | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('Agent RL', { log: true });
  context.subscriptions.push(log);
  const client = startLanguageClient(context, log);
  languageClient = client;
  const trainer = new TrainerConnection({
    context,
    log,
    onDevices: (devices) => void client.notifyTrainerDevices(devices),
  });
  connection = trainer;
  context.subscriptions.push(
    trainer,
    registerRunsView(trainer),
    registerStatusBar(trainer),
    registerHealthDiagnostics(trainer, log),
    registerRunCommands({ context, log, connection: trainer }),
    registerScaffoldCommands(join(context.extensionPath, 'extension', 'templates'), log, async (server) => {
      // The server's program runs on the trainer's machine, as it would in a run: a trusted workspace only.
      if (!vscode.workspace.isTrusted)
        throw new Error("Listing an MCP server's tools starts its program; trust this workspace first.");
      await ensureConnected({ context, log, connection: trainer });
      return trainer.request('mcp/listTools', { server }, MCP_LIST_TIMEOUT_MS);
    }),
    vscode.commands.registerCommand(Commands.showLogs, () => log.show()),
    registerDashboard(context, { log, trainer: () => (trainer.isConnected ? trainer : undefined) }),
  );
  registerReplay(context, { log, trainer: () => (trainer.isConnected ? trainer : undefined) });
}

/** Awaited by VS Code: the language server and a local trainer server exit before the extension host does. */
export async function deactivate(): Promise<void> {
  await Promise.all([languageClient?.stop(), connection?.disconnect()]);
}
