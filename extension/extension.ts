// Entry point. Activation is lazy (commands, *.agentrl.yaml in the workspace) and does nothing heavy:
// one log channel, the language client, the replay panel, and command registrations.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { Commands } from './commands';
import { startLanguageClient, type LanguageClientHandle } from './languageClient';
import { registerReplay } from './replay';
import { renderEnvironment, validateEnvName, validateToolName } from './scaffold';

let languageClient: LanguageClientHandle | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('Agent RL', { log: true });
  context.subscriptions.push(log);
  languageClient = startLanguageClient(context, log);
  registerReplay(context, { log });  // replays files; live runs join once the trainer connection exists
  const templatesDir = join(context.extensionPath, 'extension', 'templates');
  context.subscriptions.push(
    vscode.commands.registerCommand(Commands.showLogs, () => log.show()),
    vscode.commands.registerCommand(Commands.newEnvironment, () => newEnvironment(templatesDir, log)),
  );
}

export async function deactivate(): Promise<void> {
  await languageClient?.stop();  // the subscription's dispose alone does not wait for the server to exit
}

/** New Environment: a name, the tool names, a parent folder; writes the env and opens its run config. */
async function newEnvironment(templatesDir: string, log: vscode.LogOutputChannel): Promise<string | undefined> {
  const name = await vscode.window.showInputBox({ title: 'New Environment (1/3)', prompt: 'Environment name', value: 'my-env', validateInput: validateEnvName, ignoreFocusOut: true });
  if (!name) return undefined;
  const toolList = await vscode.window.showInputBox({
    title: 'New Environment (2/3)', prompt: 'Tool names, comma-separated', value: 'search', ignoreFocusOut: true,
    validateInput: (v) => splitTools(v).map(validateToolName).find(Boolean) ?? (splitTools(v).length ? undefined : 'Name at least one tool.'),
  });
  if (!toolList) return undefined;
  const parent = await pickParentFolder();
  if (!parent) return undefined;
  const folder = join(parent.fsPath, name);
  if (existsSync(folder)) {
    void vscode.window.showErrorMessage(`${folder} already exists; choose another name.`);
    return undefined;
  }
  const files = renderEnvironment({ name, tools: splitTools(toolList) }, templatesDir);
  mkdirSync(folder, { recursive: true });
  for (const [file, content] of files) writeFileSync(join(folder, file), content, { flag: 'wx' });
  log.info(`New environment written to ${folder}`);
  await vscode.window.showTextDocument(vscode.Uri.file(join(folder, `${name}.agentrl.yaml`)));
  return folder;
}

function splitTools(value: string): string[] {
  return value.split(',').map((t) => t.trim()).filter(Boolean);
}

async function pickParentFolder(): Promise<vscode.Uri | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 1) return folders[0].uri;
  if (folders.length > 1) return (await vscode.window.showWorkspaceFolderPick({ placeHolder: 'Folder to create the environment in (3/3)' }))?.uri;
  return (await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Create Here' }))?.[0];
}
