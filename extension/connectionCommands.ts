// The trainer server commands: Start Local Server, Connect to Server, Disconnect, Show Logs, Forget Server
// Certificate, and `ensureConnected`, which the commands that need a server call first. Starting a server runs
// workspace code: trusted workspaces only. Each command returns what it did (the server's URL), which the
// extension-host tests read.
import * as vscode from 'vscode';
import { Commands } from './commands';
import { ActionableError, registerCommands, requireTrust, SHOW_LOGS, showError, type Ctx } from './ctx';
import { CertificateMessages, CertificatePins, serverOf, trustOnFirstUse } from './serverCertificates';
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
      [Commands.forgetServerCertificate]: { title: 'Forget Server Certificate', make: forgetServerCertificate },
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
 *  asking for a token first (a token prompt made a wrong port look like a wrong token). A wss:// server's certificate
 *  that no authority vouches for is shown (its fingerprint) in a modal dialog the first time, and, trusted, pinned
 *  for that server (host:port); a certificate other than the pinned one is refused before the token is sent. A ws://
 *  URL of a server whose certificate is pinned is refused: it spoke TLS before, and the token would go in clear. */
export const connectServer =
  (ctx: Ctx) =>
  async (address?: ServerAddress): Promise<string | undefined> => {
    const url = (address?.url ?? (await askUrl(ctx)))?.trim();
    if (!url) return undefined;
    const pins = new CertificatePins(ctx.extensionContext.globalState);
    if (url.startsWith('ws:') && pins.get(url) !== undefined)
      throw forgetAction(url, new EditorFailure('connectionFailed', CertificateMessages.downgrade(serverOf(url), url)));
    const secrets = ctx.extensionContext.secrets;
    const stored = address?.token ?? (await secrets.get(tokenKey(url)));
    const connect = (token: string | undefined) =>
      trustOnFirstUse(url, pins, askTrust, (pinned) =>
        vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: `Agent RL: connecting to ${url}` },
          () => ctx.connection.connectRemote(url, token || undefined, pinned),
        ),
      ).catch((err: unknown) => Promise.reject(explained(url, err)));
    let token = stored;
    try {
      if (!(await connect(token))) return undefined; // the certificate was not trusted
    } catch (err) {
      const failure = err instanceof TrainerConnectError ? err.failure : undefined;
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

/** A failed connection in words where the socket's failure says more: nothing listens, or the certificate changed. */
function explained(url: string, err: unknown): unknown {
  const failure = err instanceof TrainerConnectError ? err.failure : undefined;
  if (failure === 'refused') return new EditorFailure('connectionFailed', nothingListens(url));
  if (failure === 'certificateChanged')
    return forgetAction(url, new EditorFailure('certificateChanged', (err as Error).message));
  return err;
}

/** `failure` with Forget Server Certificate (of `url`'s server) among its fixes. */
function forgetAction(url: string, failure: EditorFailure): ActionableError {
  return new ActionableError(failure.kind, failure.message, [
    {
      title: 'Forget Server Certificate',
      run: () => vscode.commands.executeCommand(Commands.forgetServerCertificate, url),
    },
  ]);
}

/** The modal dialog of a certificate's first use: its fingerprint, to compare with what `agentrl serve` printed. */
async function askTrust(server: string, fingerprint: string): Promise<boolean> {
  const choice = await vscode.window.showWarningMessage(
    CertificateMessages.trustQuestion(server),
    { modal: true, detail: CertificateMessages.trustDetail(fingerprint) },
    CertificateMessages.trustAction,
  );
  return choice === CertificateMessages.trustAction;
}

/** Forgets the certificate trusted for a server: the one of `url` when given (a fix of a refused connection), else
 *  one picked from those trusted. The next connection to it shows its fingerprint again. Returns the server
 *  (host:port), or undefined when none was forgotten. */
export const forgetServerCertificate =
  (ctx: Ctx) =>
  async (url?: string): Promise<string | undefined> => {
    const pins = new CertificatePins(ctx.extensionContext.globalState);
    const trusted = pins.all();
    let server = typeof url === 'string' ? serverOf(url) : undefined;
    if (server === undefined) {
      const servers = Object.keys(trusted);
      if (servers.length === 0) {
        void vscode.window.showInformationMessage(CertificateMessages.noneTrusted);
        return undefined;
      }
      const picked = await vscode.window.showQuickPick(
        servers.map((label) => ({ label, description: trusted[label] })),
        { title: CertificateMessages.pickTitle },
      );
      server = picked?.label;
      if (server === undefined) return undefined;
    }
    if (!(await pins.forget(server))) {
      void vscode.window.showInformationMessage(CertificateMessages.notTrusted(server));
      return undefined;
    }
    void vscode.window.showInformationMessage(CertificateMessages.forgotten(server));
    return server;
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
  if (loopback)
    return `nothing listens at ${url}: start the server there (agentrl serve --port ${onPort}) or check the port`;
  const serve = `agentrl serve --host 0.0.0.0 --port ${onPort} --token-file ~/.agentrl-token --allow-code --tls-self-signed`;
  const secure = protocol === 'wss:' ? '' : `, then connect to ${url.replace(/^ws:/, 'wss:')}`;
  return `nothing listens at ${url}: start the server there (${serve}${secure}) or check the port`;
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
