// The trainer server commands: Start Local Server, Connect to Server, Disconnect, Show Logs, and `ensureConnected`,
// which the commands that need a server call first. Starting a server runs workspace code: trusted workspaces only.
// Each command returns what it did (the server's URL), which the extension-host tests read.
import * as vscode from 'vscode';
import { Commands } from './commands';
import { registerCommands, requireTrust, type Ctx } from './ctx';
import { tokenKey } from './settings';

/** Connect to Server's answers, for callers that ask no questions (tests, `ensureConnected`). */
interface ServerAddress {
  url: string;
  token?: string;
}

export function registerConnectionCommands(ctx: Ctx): vscode.Disposable {
  return vscode.Disposable.from(
    registerCommands(ctx, {
      [Commands.startLocalServer]: { title: 'Start Local Server', make: startLocalServer },
      [Commands.connectServer]: { title: 'Connect to Server', make: connectServer },
      [Commands.disconnectServer]: { title: 'Disconnect', make: disconnectServer },
      [Commands.showLogs]: { title: 'Show Logs', make: showLogs },
    }),
    ctx.connection.onLocalServerLost((why) => announceServerLost(why)),
  );
}

/** A killed local server emptied the Runs view without a word: say so, and offer to start it again. */
function announceServerLost(why: string): void {
  void vscode.window
    .showWarningMessage(
      `Agent RL: ${why}. Its runs go on in their own processes; restart it to see them again.`,
      'Restart',
      'Show Logs',
    )
    .then((choice) => {
      if (choice === 'Restart') void vscode.commands.executeCommand(Commands.startLocalServer);
      if (choice === 'Show Logs') void vscode.commands.executeCommand(Commands.showLogs);
    });
}

/** Starts `agentrl serve` with the configured Python, keeping its runs in the workspace; cancellable while it starts. */
export const startLocalServer = (ctx: Ctx) => async (): Promise<string | undefined> => {
  if (!requireTrust('Starting a trainer server')) return undefined;
  const root = ctx.settings.workspaceRoot();
  if (!root) throw new Error('Open a folder first: the local server keeps its runs in the workspace.');
  const python = ctx.settings.pythonPath();
  await vscode.window.withProgress(
    {
      location: vscode.ProgressLocation.Notification,
      title: 'Agent RL: starting the trainer server',
      cancellable: true,
    },
    async (progress, cancel) => {
      progress.report({ message: python });
      const abort = new AbortController();
      cancel.onCancellationRequested(() => abort.abort());
      await ctx.connection.startLocal(python, root, ctx.settings.runsFolder(root), abort.signal);
    },
  );
  return ctx.connection.url;
};

/** Asks for a URL (the `agentRl.serverUrl` setting first) and its token (kept in secret storage per URL); a token
 *  the server refuses is forgotten. */
export const connectServer =
  (ctx: Ctx) =>
  async (address?: ServerAddress): Promise<string | undefined> => {
    const url =
      address?.url ??
      (await vscode.window.showInputBox({
        title: 'Connect to a trainer server',
        prompt: 'WebSocket URL of `agentrl serve`',
        value: ctx.settings.serverUrl() ?? 'ws://127.0.0.1:8765',
        ignoreFocusOut: true,
        validateInput: (v) =>
          /^wss?:\/\/[^\s/]+/.test(v.trim()) ? undefined : 'A ws:// or wss:// URL, e.g. ws://gpu-box:8765',
      }));
    if (!url) return undefined;
    const secrets = ctx.extensionContext.secrets;
    let token = address?.token ?? (await secrets.get(tokenKey(url)));
    if (token === undefined) {
      token = await vscode.window.showInputBox({
        title: `Token for ${url}`,
        prompt:
          "The server's token (stored in VS Code's secret storage): the content of its --token-file or AGENTRL_TOKEN; a server started without either wrote one to RUNS_DIR/.serve-token.",
        password: true,
        ignoreFocusOut: true,
      });
      if (token === undefined) return undefined;
    }
    try {
      await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Agent RL: connecting to ${url}` },
        () => ctx.connection.connectRemote(url.trim(), token || undefined),
      );
    } catch (err) {
      if (/token|401/.test((err as Error).message)) await secrets.delete(tokenKey(url));
      throw err;
    }
    if (token) await secrets.store(tokenKey(url), token);
    return url;
  };

/** Closes the connection; a local server is shut down with it. */
export const disconnectServer = (ctx: Ctx) => async (): Promise<boolean> => {
  await ctx.connection.disconnect();
  return true;
};

export const showLogs = (ctx: Ctx) => async (): Promise<void> => ctx.log.show();

/** Connects the way the settings say (a URL, else a local server) unless already connected. */
export async function ensureConnected(ctx: Ctx): Promise<void> {
  if (ctx.connection.isConnected) return;
  const url = ctx.settings.serverUrl();
  const connected = url ? await connectServer(ctx)({ url }) : await startLocalServer(ctx)();
  if (!connected) throw new Error('No trainer server: start a local one or connect to one.');
}
