// Host side of the replay panel: the `agentRl.openReplay` command, a read-only custom editor for trajectory files
// (ours, `*.trajectories.jsonl`, and Harbor's ATIF, `*.atif.jsonl`, `*.atif.json`: trajectoryFile.ts), and the relay
// between a trainer run and the webview. Talks to the webview only through the typed messages of
// protocol/webview-messages.ts. A run listed offline (no server connected) is replayed from its trajectory files.
import { basename, dirname } from 'node:path';
import * as vscode from 'vscode';
import { episodeSourceOf } from '../../protocol/episode-sources';
import { ACTIVE_RUN_STATUSES } from '../../protocol/generated/rpc';
import type {
  HostToWebviewMessage,
  SearchMessage,
  SearchResultsMessage,
  TrajectoryRecord,
  WebviewToHostMessage,
} from '../../protocol/webview-messages';
import { Commands, markSucceeded } from '../commands';
import { registerCommands, showError, type Ctx } from '../ctx';
import { readRunEpisodeSource, readRunTrajectories } from '../offlineRuns';
import type { TrainerConnection } from '../trainerConnection';
import { webviewHtml } from '../webviewHtml';
import { relayReroll, relayRerollGet, relayRerollList } from './reroll';
import { relaySearch } from './search';
import { relayToolRerun } from './toolRerun';
import { findToolDefinition } from './toolSource';
import { parseTrajectories } from './trajectoryFile';

export const TRAJECTORY_EDITOR_VIEW_TYPE = 'agentRl.trajectoryReplay';

export function registerReplay(ctx: Ctx): vscode.Disposable {
  return vscode.Disposable.from(
    registerCommands(ctx, { [Commands.openReplay]: { title: 'Open Trajectory Replay', make: openReplay } }),
    vscode.window.registerCustomEditorProvider(TRAJECTORY_EDITOR_VIEW_TYPE, new TrajectoryEditorProvider(ctx), {
      webviewOptions: { retainContextWhenHidden: false },
      supportsMultipleEditorsPerDocument: true,
    }),
  );
}

/** The trainer connection when connected: a run's trajectories come from it, a file's re-runs go through it. */
const connectedTrainer = (ctx: Ctx): TrainerConnection | undefined =>
  ctx.connection.isConnected ? ctx.connection : undefined;

const webviewRoot = (ctx: Ctx): vscode.Uri => vscode.Uri.joinPath(ctx.extensionContext.extensionUri, 'dist', 'webview');

/** A run to replay; with `step` (the Run Dashboard), the panel opens on that step's groups; with `trajectoryId`
 *  (Search Episodes), on that episode. */
export interface ReplayRunTarget {
  runId: string;
  step?: number;
  trajectoryId?: string;
}

/** Runs view: `{runId}` of a run (followed live); Explorer context menu: a file Uri; palette: a run or a file the
 *  user picks (`pickRunOrFile`). */
const openReplay =
  (ctx: Ctx) =>
  async (target?: vscode.Uri | ReplayRunTarget): Promise<void> => {
    const picked = target ?? (await pickRunOrFile(ctx));
    if (!picked) return;
    if ('runId' in picked) return openRun(ctx, picked);
    await vscode.commands.executeCommand('vscode.openWith', picked, TRAJECTORY_EDITOR_VIEW_TYPE);
    markSucceeded('openReplay');
  };

const OPEN_A_FILE = '$(file) Open a trajectory file...';

/** The runs listed (a server's, or the workspace's offline) and a trajectory file as the last choice; with no run
 *  listed, the file dialog at once. A Runs view row redrawn as it is clicked (the view redraws its ages every
 *  minute) gives its command nothing: it lands here, and offers that run rather than a file dialog. */
async function pickRunOrFile(ctx: Ctx): Promise<vscode.Uri | ReplayRunTarget | undefined> {
  const model = ctx.connection.model;
  const runIds = model.children().flatMap((node) => (node.kind === 'run' ? [node.runId] : [])); // newest first
  if (runIds.length) {
    const items = [
      ...runIds.map((runId) => ({
        label: model.run(runId)!.name,
        description: model.description({ kind: 'run', runId }),
        detail: runId,
        runId,
      })),
      { label: OPEN_A_FILE, runId: undefined },
    ];
    const chosen = await vscode.window.showQuickPick(items, {
      title: 'Open Trajectory Replay',
      placeHolder: 'A run to replay, or a trajectory file',
    });
    if (!chosen) return undefined;
    if (chosen.runId) return { runId: chosen.runId };
  }
  const files = await vscode.window.showOpenDialog({
    title: 'Open trajectories',
    canSelectMany: false,
    filters: { Trajectories: ['jsonl', 'json'] },
  });
  return files?.[0];
}

async function openRun(ctx: Ctx, { runId, step, trajectoryId }: ReplayRunTarget): Promise<void> {
  const trainer = connectedTrainer(ctx);
  const folder = ctx.connection.model.offlineFolder(runId);
  if (!trainer && folder) return openRunFolder(ctx, runId, folder, step);
  if (!trainer) {
    void showError(
      ctx,
      'Agent RL: not connected to a trainer server; start or connect one to replay a live run.',
      'notConnected',
    );
    return;
  }
  const panel = runPanel(ctx, runId, step);
  const fetchRecords = async (): Promise<TrajectoryRecord[]> => {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      // pages of at most 1,000 summaries (the server's limit)
      const page = await trainer.request('trajectory/query', { runId, limit: 1000, ...(cursor ? { cursor } : {}) });
      ids.push(...page.items.map((item) => item.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return trainer.records.get(runId, ids);
  };
  const seen = new Set<string>();
  const pending: string[] = [];
  const subscription = trainer.onRunEvent((event) => {
    if (event.runId !== runId) return;
    if (event.type === 'status') {
      const runStatus = event.runInfo.status;
      if (ready) post(panel.webview, { type: 'runStatus', live: ACTIVE_RUN_STATUSES.has(runStatus), runStatus });
      return;
    }
    if (event.type !== 'trajectory') return;
    const id = event.data.id;
    if (seen.has(id)) return;
    seen.add(id);
    pending.push(id);
    void flush();
  });
  let flushing = false;
  let ready = false;
  const flush = async (): Promise<void> => {
    if (flushing || !ready || pending.length === 0) return;
    flushing = true;
    const ids = pending.splice(0);
    try {
      const records = await trainer.records.get(runId, ids);
      post(panel.webview, { type: 'append', records });
    } catch (err) {
      ctx.log.error(`replay: could not fetch new trajectories of ${runId}: ${(err as Error).message}`);
    } finally {
      flushing = false;
      void flush();
    }
  };
  panel.onDidDispose(() => subscription.dispose());
  void trainer.follow(runId).catch((err: Error) => ctx.log.warn(`replay: cannot follow ${runId} live: ${err.message}`));
  const search = async (message: SearchMessage) => relaySearch(message, runId, connectedTrainer(ctx));
  connect(ctx, panel.webview, search, async () => {
    const [records, info, episodeSource] = await Promise.all([
      fetchRecords(),
      trainer.request('run/get', { runId }),
      trainer.request('run/config', { runId }).then(
        ({ config }) => episodeSourceOf(config),
        () => undefined, // the panel offers what it offers every run
      ),
    ]);
    records.forEach((r) => seen.add(r.id));
    ready = true;
    void flush();
    return {
      type: 'load',
      source: runId,
      records,
      live: ACTIVE_RUN_STATUSES.has(info.status),
      runStatus: info.status,
      searchable: true,
      ...(episodeSource === undefined ? {} : { episodeSource }),
      ...(step === undefined ? {} : { focusStep: step }),
      ...(trajectoryId === undefined ? {} : { focusId: trajectoryId }),
    };
  });
}

function runPanel(ctx: Ctx, runId: string, step: number | undefined): vscode.WebviewPanel {
  const name = ctx.connection.model.runName(runId);
  const title = step === undefined ? `Replay: ${name}` : `Replay: ${name} step ${step}`;
  const panel = vscode.window.createWebviewPanel(
    'agentRl.replay',
    title,
    vscode.ViewColumn.Active,
    webviewOptions(ctx),
  );
  markSucceeded('openReplay');
  return panel;
}

/** A run listed offline: every trajectory its folder holds, as its files say (nothing follows it live). */
function openRunFolder(ctx: Ctx, runId: string, folder: string, step: number | undefined): void {
  const panel = runPanel(ctx, runId, step);
  // no search: that is the trainer's index
  connect(ctx, panel.webview, undefined, async () => {
    const [{ records, errors }, episodeSource] = await Promise.all([
      readRunTrajectories(folder),
      readRunEpisodeSource(folder),
    ]);
    if (errors.length) warnUnreadable(ctx, folder, errors);
    const runStatus = ctx.connection.model.run(runId)?.status;
    return {
      type: 'load',
      source: `${runId} (offline)`,
      records,
      live: false,
      ...(runStatus ? { runStatus } : {}),
      ...(episodeSource === undefined ? {} : { episodeSource }),
      ...(step === undefined ? {} : { focusStep: step }),
    };
  });
}

/** Lines of trajectory files that hold no trajectory: skipped, said in the log and in a warning. */
function warnUnreadable(ctx: Ctx, where: string, errors: string[]): void {
  ctx.log.warn(`replay: ${where}: ${errors.length} unreadable line(s): ${errors.slice(0, 3).join('; ')}`);
  void vscode.window.showWarningMessage(
    `${errors.length} line(s) of ${vscode.workspace.asRelativePath(where)} hold no trajectory and were skipped (see the Agent RL log).`,
  );
}

class TrajectoryEditorProvider implements vscode.CustomReadonlyEditorProvider {
  constructor(private readonly ctx: Ctx) {}

  openCustomDocument(uri: vscode.Uri): vscode.CustomDocument {
    return { uri, dispose: () => undefined };
  }

  resolveCustomEditor(document: vscode.CustomDocument, panel: vscode.WebviewPanel): void {
    panel.webview.options = webviewOptions(this.ctx);
    connect(this.ctx, panel.webview, undefined, async () => {
      const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(document.uri));
      const { records, errors } = parseTrajectories(text);
      const name = vscode.workspace.asRelativePath(document.uri);
      // a file with no trajectory at all is not a trajectory file: say what it holds instead of an empty replay
      if (errors.length && !records.length) {
        throw new Error(`${name}: ${errors[0]}${errors.length > 1 ? ` (and ${errors.length - 1} more line(s))` : ''}`);
      }
      if (errors.length) warnUnreadable(this.ctx, document.uri.fsPath, errors);
      // a step's file in a run folder (RUN/trajectories/): the run's config says where its episodes came from
      const folder = dirname(document.uri.fsPath);
      const episodeSource =
        document.uri.scheme === 'file' && basename(folder) === 'trajectories'
          ? await readRunEpisodeSource(dirname(folder))
          : undefined;
      return {
        type: 'load',
        source: name,
        records,
        live: false,
        ...(episodeSource === undefined ? {} : { episodeSource }),
      };
    });
  }
}

function webviewOptions(ctx: Ctx): vscode.WebviewOptions & vscode.WebviewPanelOptions {
  return { enableScripts: true, localResourceRoots: [webviewRoot(ctx)] };
}

/** Sets the HTML and answers every `ready` (first load and each reload) with what `load` gives, and each `search`
 *  with what `search` gives (a run's replay; a file's has no run to search and never offers it). */
function connect(
  ctx: Ctx,
  webview: vscode.Webview,
  search: ((message: SearchMessage) => Promise<SearchResultsMessage>) | undefined,
  load: () => Promise<HostToWebviewMessage>,
): void {
  webview.onDidReceiveMessage(async (message: WebviewToHostMessage) => {
    switch (message.type) {
      case 'ready':
        try {
          post(webview, await load());
        } catch (err) {
          ctx.log.error(`replay: ${(err as Error).message}`);
          void showError(
            ctx,
            `Agent RL: could not load trajectories: ${(err as Error).message}`,
            'trajectoriesUnreadable',
          );
        }
        return;
      case 'openToolSource':
        await openToolSource(ctx, message.toolName);
        return;
      case 'search':
        if (search) post(webview, await search(message));
        return;
      case 'rerunToolCall': {
        // A file's records name their run too: any trainer that has the run can re-run its calls.
        const reply = await relayToolRerun(message, {
          isTrusted: () => vscode.workspace.isTrusted,
          trainer: () => connectedTrainer(ctx),
        });
        if (!reply.reply.ok) ctx.log.info(`replay: re-run of ${message.trajectoryId}: ${reply.reply.message}`);
        post(webview, reply);
        return;
      }
      case 'addToTrainingSet': // the command asks which set and says how it went (extension/trainingSets.ts)
        await vscode.commands.executeCommand(Commands.addToTrainingSet, message.records, message.fromTurn);
        return;
      case 'listRerolls':
        post(webview, await relayRerollList(message, connectedTrainer(ctx)));
        return;
      case 'openReroll':
        post(webview, await relayRerollGet(message, connectedTrainer(ctx)));
        return;
      case 'rerollEpisode': {
        const reply = await relayReroll(
          message,
          { isTrusted: () => vscode.workspace.isTrusted, trainer: () => connectedTrainer(ctx) },
          (progress) => post(webview, progress),
        );
        const what = `re-roll of ${message.params.trajectoryId} from turn ${message.params.turn}`;
        ctx.log.info(
          `replay: ${what}: ${reply.reply.ok ? `stored as ${reply.reply.result.reroll.rerollId}` : reply.reply.message}`,
        );
        post(webview, reply);
        return;
      }
    }
  });
  webview.html = webviewHtml(webview, webviewRoot(ctx), 'main', 'Trajectory replay');
}

/** Typed: the webview's messages are declared once, in protocol/webview-messages.ts. */
function post(webview: vscode.Webview, message: HostToWebviewMessage): void {
  void webview.postMessage(message);
}

/** Opens the Python file of the workspace that defines the Tool, at its definition. */
async function openToolSource(ctx: Ctx, toolName: string): Promise<void> {
  const files = await vscode.workspace.findFiles(
    '**/*.py',
    '{**/.venv/**,**/node_modules/**,**/site-packages/**}',
    5000,
  );
  for (const file of files) {
    const source = new TextDecoder().decode(await vscode.workspace.fs.readFile(file));
    const line = findToolDefinition(source, toolName);
    if (line === undefined) continue;
    const position = new vscode.Position(line, 0);
    await vscode.window.showTextDocument(file, { selection: new vscode.Range(position, position), preview: true });
    return;
  }
  ctx.log.info(`replay: no Tool named "${toolName}" in the workspace's Python files`);
  void vscode.window.showInformationMessage(
    `No Tool named "${toolName}" found in this workspace (looked for name = "${toolName}", class ...(Tool), a function under @tool and a method def ${toolName}(self, ...)).`,
  );
}
