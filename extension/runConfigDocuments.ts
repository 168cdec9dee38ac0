// The moment a window first edits a run config. The extension activates in every window (so that the Get Started
// walkthrough finds a newcomer in an empty folder), but what serves run configs (the language server, a Node process)
// starts only where one is open.
import * as vscode from 'vscode';

/** A run config (`*.agentrl.yaml`, as RUN_CONFIG_GLOB in settings.ts) open in an editor, on disk or not. */
export const isRunConfig = (document: vscode.TextDocument): boolean => document.uri.path.endsWith('.agentrl.yaml');

/** Calls `start` once: at once where a run config is already open, else when the first one opens. Disposing before
 *  then cancels it. */
export function onFirstRunConfig(start: () => void): vscode.Disposable {
  if (vscode.workspace.textDocuments.some(isRunConfig)) {
    start();
    return new vscode.Disposable(() => undefined);
  }
  const opened = vscode.workspace.onDidOpenTextDocument((document) => {
    if (!isRunConfig(document)) return;
    opened.dispose();
    start();
  });
  return opened;
}
