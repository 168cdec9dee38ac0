// The trainer server commands: Start Local Server, Connect to Server, Disconnect, Show Logs, and `ensureConnected`,
// which the commands that need a server call first. Starting a server runs workspace code: trusted workspaces only.
// Each command returns what it did (the server's URL), which the extension-host tests read.
import * as vscode from 'vscode';
import { Commands } from './commands';
import { ActionableError, registerCommands, requireTrust, SHOW_LOGS, showError, type Ctx } from './ctx';
import { PYTHON_PATH_SETTING, tokenKey } from './settings';
import { TrainerConnectError } from './trainerClient';
import { checkTrainerInstall } from './trainerInstall';
import { EditorFailure } from './troubleshooting';

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
    ctx.connection.onLocalServerLost((why) => announceServerLost(ctx, why)),
  );
}

/** A killed local server emptied the Runs view without a word: say so, and offer to start it again. */
function announceServerLost(ctx: Ctx, why: string): void {
  const restart = 'Restart';
  void showError(
    ctx,
    `Agent RL: ${why}. Its runs go on in their own processes; restart it to see them again.`,
    'localServerLost',
    restart,
    SHOW_LOGS,
  ).then((choice) => {
    if (choice === restart) void vscode.commands.executeCommand(Commands.startLocalServer);
    if (choice === SHOW_LOGS) void vscode.commands.executeCommand(Commands.showLogs);
  });
}

/** Starts `agentrl serve` with the configured Python, keeping its runs in the workspace; cancellable while it starts. A
 *  start that fails because of that Python (not there, or without agentrl) says so, with the setting and the install
 *  command to fix it, rather than the server's last lines of log. */
export const startLocalServer = (ctx: Ctx) => async (): Promise<string | undefined> => {
  if (!requireTrust(ctx, 'Starting a trainer server')) return undefined;
  const root = ctx.settings.workspaceRoot();
  if (!root)
    throw new EditorFailure('noFolder', 'Open a folder first: the local server keeps its runs in the workspace.');
  const python = ctx.settings.pythonPath();
  const abort = new AbortController();
  try {
    await vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: 'Agent RL: starting the trainer server',
        cancellable: true,
      },
      async (progress, cancel) => {
        progress.report({ message: python });
        cancel.onCancellationRequested(() => abort.abort());
        await ctx.connection.startLocal(python, root, ctx.settings.runsFolder(root), abort.signal);
      },
    );
  } catch (err) {
    throw abort.signal.aborted ? err : ((await pythonTrouble(python, root)) ?? err);
  }
  return ctx.connection.url;
};

/** Why `python` cannot start a trainer, with the two fixes, or undefined when it could (the failure was another). */
async function pythonTrouble(python: string, root: string): Promise<ActionableError | undefined> {
  const install = await checkTrainerInstall(python, root);
  if (install === 'found') return undefined;
  const message =
    install === 'noPython'
      ? `${python} could not be run. Set "${PYTHON_PATH_SETTING}" to a Python (3.11 or newer) with the trainer installed, or install it into a new .venv of the workspace (Install the Trainer).`
      : `${python} has no agentrl (the trainer). Install the Trainer installs it there; or set "${PYTHON_PATH_SETTING}" to a Python that has it.`;
  return new ActionableError('noPython', message, [
    {
      title: 'Open Setting',
      run: () => vscode.commands.executeCommand('workbench.action.openSettings', PYTHON_PATH_SETTING),
    },
    { title: 'Install the Trainer', run: () => vscode.commands.executeCommand(Commands.installTrainer) },
  ]);
}

/** Asks for a URL (the `agentRl.serverUrl` setting first) and connects with the token given or stored for it (secret
 *  storage, per URL), else with none. The token is asked only once the server has answered that it wants one (HTTP
 *  401); a stored token it refuses is forgotten and asked again. Nothing listening at the URL is said as such, without
 *  asking for a token first (a token prompt made a wrong port look like a wrong token). */
export const connectServer =
  (ctx: Ctx) =>
  async (address?: ServerAddress): Promise<string | undefined> => {
    const url = (address?.url ?? (await askUrl(ctx)))?.trim();
    if (!url) return undefined;
    const secrets = ctx.extensionContext.secrets;
    const stored = address?.token ?? (await secrets.get(tokenKey(url)));
    const connect = (token: string | undefined) =>
      vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Agent RL: connecting to ${url}` },
        () => ctx.connection.connectRemote(url, token || undefined),
      );
    let token = stored;
    try {
      await connect(token);
    } catch (err) {
      const failure = err instanceof TrainerConnectError ? err.failure : undefined;
      if (failure === 'refused') throw new EditorFailure('connectionFailed', nothingListens(url));
      // a caller that gives the token asks no questions: its token refused is its answer
      if (failure !== 'unauthorized' || address?.token !== undefined) throw err;
      if (stored !== undefined) await secrets.delete(tokenKey(url));
      token = await askToken(url, stored !== undefined);
      if (token === undefined) return undefined;
      await connect(token);
    }
    if (token) await secrets.store(tokenKey(url), token);
    return url;
  };

function askUrl(ctx: Ctx): Thenable<string | undefined> {
  return vscode.window.showInputBox({
    title: 'Connect to a trainer server',
    prompt: 'WebSocket URL of `agentrl serve`',
    value: ctx.settings.serverUrl() ?? 'ws://127.0.0.1:8765',
    ignoreFocusOut: true,
    validateInput: (v) =>
      /^wss?:\/\/[^\s/]+/.test(v.trim()) ? undefined : 'A ws:// or wss:// URL, e.g. ws://gpu-box:8765',
  });
}

function askToken(url: string, refused: boolean): Thenable<string | undefined> {
  return vscode.window.showInputBox({
    title: `Token for ${url}`,
    prompt: `${refused ? 'The server refused the stored token. ' : ''}The server's token (stored in VS Code's secret storage): the content of its --token-file or AGENTRL_TOKEN; a server started without either wrote one to RUNS_DIR/.serve-token.`,
    password: true,
    ignoreFocusOut: true,
  });
}

/** A refused connection: nothing listens at `url`. Says how the server is started there, on that port. */
function nothingListens(url: string): string {
  const { hostname, port, protocol } = new URL(url);
  const onPort = port || (protocol === 'wss:' ? '443' : '80');
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
  const serve = loopback
    ? `agentrl serve --port ${onPort}`
    : `agentrl serve --host 0.0.0.0 --port ${onPort} --token-file ~/.agentrl-token --allow-code`;
  return `nothing listens at ${url}: start the server there (${serve}) or check the port`;
}

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
  if (!connected) throw new EditorFailure('notConnected', 'No trainer server: start a local one or connect to one.');
}
