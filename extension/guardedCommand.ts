// Registers a command whose failure reaches the user: logged, and shown with a way to the logs, instead of
// a rejected promise that VS Code reports without context.
import * as vscode from 'vscode';

export function registerGuardedCommand<A extends unknown[], R>(
  log: vscode.LogOutputChannel,
  id: string,
  what: string,
  command: (...args: A) => Promise<R | undefined>,
): vscode.Disposable {
  return vscode.commands.registerCommand(id, async (...args: A): Promise<R | undefined> => {
    try {
      return await command(...args);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      log.error(`${what}: ${message}`);
      void vscode.window.showErrorMessage(`${what}: ${message}`, 'Show Logs').then((choice) => choice && log.show());
      return undefined;
    }
  });
}
