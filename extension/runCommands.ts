// Run commands: Start/Stop/Resume Training, Try Environment, Export Model, Delete Run, Refresh Runs, and the CodeLens
// on run configs. Everything that runs workspace code (a run) needs workspace trust, checked here as well as in the
// manifest. Each command returns what it did (a run id, a folder), which the extension-host tests read. The
// notification of a run this editor starts says what the run is doing (its phase) until there is something to see.
import { cpSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as vscode from 'vscode';
import { ErrorCode, RESUMABLE_RUN_STATUSES, type RunEventParams, type RunStartParams } from '../protocol/generated/rpc';
import { Commands } from './commands';
import { ensureConnected } from './connectionCommands';
import { acceptConfigProblems, RUN_ANYWAY, SHOW_PROBLEMS } from './configProblems';
import { registerCommands, requireTrust, showError, type Ctx } from './ctx';
import { packEnvFolder } from './envBundle';
import { readRunConfig } from './runConfig';
import type { RunsTreeNode } from './runsModel';
import { RUNS_VIEW_ID } from './runsView';
import { RUN_CONFIG_GLOB } from './settings';
import {
  envCheckProblems,
  howTheModelActs,
  toolProblems,
  trySummary,
  type ModelActs,
  type ProblemAt,
} from './toolProblems';
import type { RunHandle } from './trainerConnection';
import { TrainerRequestError } from './trainerClient';
import { EditorFailure } from './troubleshooting';

// An export loads the model on the server: seconds for small models, minutes for large ones.
const EXPORT_TIMEOUT_MS = 30 * 60_000;
// The server gives an env check 300 s (ENV_CHECK_TIMEOUT_S); its answer comes a little after.
const ENV_CHECK_TIMEOUT_MS = 320_000;

export type RunTarget = { runId: string; mode?: 'graceful' | 'immediate' } | RunsTreeNode;
/** Export Model's answers, for callers that ask no questions: `destination` is a folder on this machine; without
 * `step`, the latest checkpoint. A step node of the Runs view exports that step's checkpoint. */
type ExportTarget = { runId: string; step?: number; mergeLora?: boolean; destination?: string } | RunsTreeNode;

export function registerRunCommands(ctx: Ctx): vscode.Disposable {
  // A try run's Tool failures, at each Tool's definition; the next try run replaces them.
  const tryProblems = vscode.languages.createDiagnosticCollection('agentRl.tryEnvironment');
  return vscode.Disposable.from(
    tryProblems,
    registerCommands(ctx, {
      [Commands.refreshRuns]: { title: 'Refresh Runs', make: refreshRuns },
      [Commands.startTraining]: { title: 'Start Training', make: startTraining },
      [Commands.tryEnvironment]: { title: 'Try Environment', make: (ctx) => tryEnvironment(ctx, tryProblems) },
      [Commands.stopTraining]: { title: 'Stop Training', make: stopTraining },
      [Commands.resumeTraining]: { title: 'Resume Training', make: resumeTraining },
      [Commands.exportModel]: { title: 'Export Model', make: exportModel },
      [Commands.deleteRun]: { title: 'Delete Run', make: deleteRun },
    }),
    vscode.languages.registerCodeLensProvider({ pattern: RUN_CONFIG_GLOB }, new RunConfigLenses()),
  );
}

/** Start Training / Try Environment above the first line of every run config. */
class RunConfigLenses implements vscode.CodeLensProvider {
  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const top = new vscode.Range(0, 0, 0, 0);
    return [
      new vscode.CodeLens(top, {
        title: '$(play) Start Training',
        command: Commands.startTraining,
        arguments: [document.uri],
        tooltip: 'Train this config on the connected trainer server',
      }),
      new vscode.CodeLens(top, {
        title: '$(beaker) Try Environment',
        command: Commands.tryEnvironment,
        arguments: [document.uri],
        tooltip: 'Run a few episodes with the base model and no updates, then replay them',
      }),
    ];
  }
}

/** Re-reads the server's run list. */
export const refreshRuns = (ctx: Ctx) => async (): Promise<boolean> => {
  await ctx.connection.refresh();
  return true;
};

/** Trains a run config (the given one, the active editor's, or one picked); returns the run's id. */
export const startTraining =
  (ctx: Ctx) =>
  async (target?: vscode.Uri | string): Promise<string | undefined> => {
    const prepared = await prepareRun(ctx, target, 'train');
    return prepared && (await startRun(ctx, prepared, 'train')).runId;
  };

async function pickConfig(ctx: Ctx, target: unknown, title: string): Promise<vscode.Uri | undefined> {
  // Only a run config's path or Uri is taken as given: a view's title button passes the selected row instead (the
  // Start button with a step row selected sent it on, to fail reading it as YAML), and is asked like the palette.
  const given =
    typeof target === 'string' ? vscode.Uri.file(target) : target instanceof vscode.Uri ? target : undefined;
  if (given?.fsPath.endsWith('.agentrl.yaml')) return given;
  const active = vscode.window.activeTextEditor?.document.uri;
  if (active?.fsPath.endsWith('.agentrl.yaml')) return active;
  const configs = await ctx.settings.findRunConfigs();
  if (configs.length === 0)
    throw new EditorFailure(
      'noEnvironment',
      'No run config (*.agentrl.yaml) in this workspace. "Agent RL: New Environment" writes one.',
    );
  if (configs.length === 1) return configs[0];
  return (
    await vscode.window.showQuickPick(
      configs.map((uri) => ({ label: vscode.workspace.asRelativePath(uri), uri })),
      { title, placeHolder: 'Run config' },
    )
  )?.uri;
}

/** Where the server finds a run config's env: the config's own folder (a local server shares this machine's
 *  files), or the folder uploaded as a bundle (a remote server cannot see them). */
type EnvLocation = { configDir: string } | { envBundle: string };

/** A run config ready to start: trusted, saved, the trainer connected and the env where the server can read it. */
interface PreparedRun {
  configUri: vscode.Uri;
  location: EnvLocation;
}

async function prepareRun(ctx: Ctx, target: unknown, mode: 'train' | 'try'): Promise<PreparedRun | undefined> {
  if (!requireTrust(ctx, mode === 'try' ? 'Trying an environment' : 'Training')) return undefined;
  const title = mode === 'try' ? 'Try Environment' : 'Start Training';
  const configUri = await pickConfig(ctx, target, title);
  if (!configUri) return undefined;
  const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === configUri.toString());
  if (document?.isDirty) await document.save();
  if (!(await acceptConfigProblems(ctx, configUri, mode, title))) return undefined;
  await ensureConnected(ctx);
  return { configUri, location: await envLocation(ctx, dirname(configUri.fsPath)) };
}

async function envLocation(ctx: Ctx, folder: string): Promise<EnvLocation> {
  if (ctx.connection.kind === 'local') return { configDir: folder };
  const bundle = packEnvFolder(folder);
  ctx.log.info(
    `Uploading ${folder} (${bundle.files.length} files, ${(bundle.archive.length / 1024).toFixed(0)} KiB) to ${ctx.connection.url}`,
  );
  const uploaded = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: 'Agent RL: uploading the environment' },
    () =>
      ctx.connection.request(
        'env/upload',
        { name: basename(folder), archive: bundle.archive.toString('base64') },
        120_000,
      ),
  );
  return { envBundle: uploaded.bundleId };
}

async function startRun(ctx: Ctx, prepared: PreparedRun, mode: 'train' | 'try'): Promise<RunHandle> {
  const { configUri, location } = prepared;
  const params: RunStartParams = {
    config: readRunConfig(configUri.fsPath),
    mode,
    ...location,
    ...(mode === 'try' ? { episodes: ctx.settings.tryEpisodes() } : {}),
  };
  const run = await ctx.connection.startRun(params);
  const { runId } = run;
  ctx.log.info(
    `Started ${mode === 'try' ? 'a try run' : 'training'} ${runId} from ${vscode.workspace.asRelativePath(configUri)}`,
  );
  void vscode.commands.executeCommand(`${RUNS_VIEW_ID}.focus`);
  if (mode === 'train') {
    const name = ctx.connection.model.run(runId)?.name ?? runId;
    void vscode.window
      .showInformationMessage(`Agent RL: training ${name} started.`, 'Open Dashboard')
      .then((choice) => choice && vscode.commands.executeCommand(Commands.openDashboard, { runId }));
    // Loading the model and the first step take minutes on a slow machine: said as they happen, until step 1 ends.
    const firstStep = runEventWhere(ctx, runId, (event) => event.type === 'metrics' && event.data.step > 0);
    void withRunActivity(ctx, runId, { title: `Agent RL: training ${name}` }, () =>
      Promise.race([run.ended, firstStep.happened]),
    ).finally(firstStep.dispose);
    void run.ended.then((status) => status && announceEnd(ctx, runId, name, status));
  }
  return run;
}

/** A progress notification that says what the run is doing (`RunsModel.activity`: its phase, or why it waits) as it
 *  changes, `first` until it says something, while `until` runs; returns what `until` gives. */
async function withRunActivity<T>(
  ctx: Ctx,
  runId: string,
  options: { title: string; first?: string; cancellable?: boolean },
  until: (cancel: vscode.CancellationToken) => Promise<T>,
): Promise<T> {
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: options.title, cancellable: options.cancellable },
    async (progress, cancel) => {
      let said: string | undefined;
      const say = (): void => {
        const now = ctx.connection.model.activity(runId);
        if (now === undefined || now === said) return; // a run that has ended says nothing new: its last words stay
        said = now;
        progress.report({ message: now });
      };
      if (options.first) progress.report({ message: options.first });
      say();
      const changes = ctx.connection.onRunEvent((event) => {
        if (event.runId === runId && (event.type === 'phase' || event.type === 'status')) say();
      });
      try {
        return await until(cancel);
      } finally {
        changes.dispose();
      }
    },
  );
}

/** Settles when an event of the run satisfies `matches`; dispose it when no longer waited for. */
function runEventWhere(
  ctx: Ctx,
  runId: string,
  matches: (event: RunEventParams) => boolean,
): { happened: Promise<void>; dispose: () => void } {
  let listener: vscode.Disposable | undefined;
  const happened = new Promise<void>((resolve) => {
    listener = ctx.connection.onRunEvent((event) => event.runId === runId && matches(event) && resolve());
  });
  return { happened, dispose: () => listener?.dispose() };
}

/** A training run this editor started has ended: said once, with how far it got (no notification said a run had
 * completed; a user watched the Runs view for it). */
function announceEnd(ctx: Ctx, runId: string, name: string, status: string): void {
  const info = ctx.connection.model.run(runId);
  const where = info ? ` at step ${info.step}/${info.totalSteps}` : '';
  const why = status !== 'completed' && info?.message ? `: ${info.message}` : '';
  const text = `Agent RL: training ${name} ${status}${where}${why}.`;
  const show = status === 'completed' ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
  void show(text, 'Open Dashboard', 'Open Replay').then((choice) => {
    if (choice === 'Open Dashboard') void vscode.commands.executeCommand(Commands.openDashboard, { runId });
    if (choice === 'Open Replay') void vscode.commands.executeCommand(Commands.openReplay, { runId });
  });
}

/** Try Environment: the env checked first (its scripted episode, no model: a Tool that raises is in the Problems
 *  panel before any episode is sampled), then a few episodes with the base model and no updates, their replay, and
 *  the Tools that failed in `problems`; returns the try run's id. */
const tryEnvironment =
  (ctx: Ctx, problems: vscode.DiagnosticCollection) =>
  async (target?: vscode.Uri | string): Promise<string | undefined> => {
    const prepared = await prepareRun(ctx, target, 'try');
    if (!prepared) return undefined;
    const { configUri } = prepared;
    if (!(await checkEnvironment(ctx, prepared, problems))) return undefined;
    const run = await startRun(ctx, prepared, 'try');
    const { runId } = run;
    const status = await withRunActivity(
      ctx,
      runId,
      {
        title: `Agent RL: trying ${vscode.workspace.asRelativePath(configUri)}`,
        first: `${ctx.settings.tryEpisodes()} episodes with the base model, no updates`,
        cancellable: true,
      },
      async (cancel) => {
        const cancelled = new Promise<undefined>((resolve) =>
          cancel.onCancellationRequested(() => {
            void ctx.connection.request('run/stop', { runId, mode: 'immediate' }).catch(() => undefined);
            resolve(undefined);
          }),
        );
        return Promise.race([run.ended, cancelled]);
      },
    );
    if (!status) return runId;
    const errors = await reportToolErrors(ctx, runId, configUri.fsPath, problems);
    const info = ctx.connection.model.run(runId);
    const episodes = ctx.connection.model.trajectories(runId);
    const failedCalls = episodes.reduce((sum, episode) => sum + episode.num_tool_errors, 0);
    const { text: summary, warning } =
      status === 'completed'
        ? trySummary(info?.name ?? runId, episodes, failedCalls, modelActsIn(configUri.fsPath))
        : {
            text: `Try run ${info?.name ?? runId} ${status}${info?.message ? `: ${info.message}` : ''}.`,
            warning: true,
          };
    ctx.log.info(summary);
    await vscode.commands.executeCommand(Commands.openReplay, { runId });
    const actions = errors ? [SHOW_PROBLEMS] : [];
    const show = warning ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    void show(summary, ...actions).then(
      (choice) => choice && vscode.commands.executeCommand('workbench.actions.view.problems'),
    );
    return runId;
  };

/** The env check (env/check: the env loaded and its scripted episode played, no model), its errors and warnings in
 *  `problems` (a new Try replaces the last one's). Whether to go on: yes when it found no error, else when the user
 *  chooses Try Anyway (an error here is what the episodes would fail on, and they take minutes). */
async function checkEnvironment(
  ctx: Ctx,
  { configUri, location }: PreparedRun,
  problems: vscode.DiagnosticCollection,
): Promise<boolean> {
  problems.clear();
  const configPath = configUri.fsPath;
  const where = 'configDir' in location ? { configDir: location.configDir } : { bundleId: location.envBundle };
  const checked = await vscode.window.withProgress(
    {
      location: vscode.ProgressLocation.Notification,
      title: `Agent RL: checking ${vscode.workspace.asRelativePath(configUri)} (one scripted episode, no model)`,
    },
    () => ctx.connection.request('env/check', { ...where, configFile: basename(configPath) }, ENV_CHECK_TIMEOUT_MS),
  );
  for (const d of checked.diagnostics) ctx.log.info(`[env check] ${d.severity}: ${d.message}`);
  const found = envCheckProblems(checked.diagnostics, dirname(configPath), configPath, existsSync);
  publishProblems(problems, found, 'Agent RL: env check');
  if (checked.ok) return true;
  const errors = found.filter((problem) => problem.error);
  const choice = await showError(
    ctx,
    `Agent RL: the env check of ${vscode.workspace.asRelativePath(configUri)} found ${errors.length} error(s) ` +
      `before any episode ran: ${errors[0]?.message ?? 'see the log'}`,
    'envCheckFailed',
    SHOW_PROBLEMS,
    RUN_ANYWAY.try,
  );
  if (choice === SHOW_PROBLEMS) void vscode.commands.executeCommand('workbench.actions.view.problems');
  return choice === RUN_ANYWAY.try;
}

/** How the config's model acts (by tools, by its reply, as an agent), as far as the config reads. */
function modelActsIn(configPath: string): ModelActs {
  try {
    return howTheModelActs(readRunConfig(configPath));
  } catch {
    return { by: 'tools' }; // a config that no longer reads: the summary as for any env
  }
}

/** Lists the try run's Tool failures in the Problems panel at each Tool's definition (an MCP server's tools: at
 * the server's entry in the run config), beside the env check's; returns how many calls failed. */
async function reportToolErrors(
  ctx: Ctx,
  runId: string,
  configPath: string,
  problems: vscode.DiagnosticCollection,
): Promise<number> {
  const envFolder = dirname(configPath);
  const page = await ctx.connection.request('trajectory/query', { runId, hasToolError: true, limit: 1000 });
  // through the connection's cache: the replay panel opened next shows these without fetching them again
  const records = await ctx.connection.records.get(
    runId,
    page.items.map((summary) => summary.id),
  );
  const sources = readdirSync(envFolder)
    .filter((f) => f.endsWith('.py'))
    .map((f) => ({ path: join(envFolder, f), text: readFileSync(join(envFolder, f), 'utf8') }));
  const found = toolProblems(records, page.total, sources, {
    path: configPath,
    text: readFileSync(configPath, 'utf8'),
  });
  for (const problem of found) ctx.log.warn(`[try ${runId}] ${problem.message}`);
  publishProblems(
    problems,
    found.flatMap(({ location, faultOfTool, message }) =>
      location ? [{ ...location, error: faultOfTool, message }] : [],
    ),
    'Agent RL: Try Environment',
  );
  return found.reduce((sum, p) => sum + p.count, 0);
}

/** Adds `found` to what `problems` already shows for each file. */
function publishProblems(problems: vscode.DiagnosticCollection, found: ProblemAt[], source: string): void {
  for (const { path, line, error, message } of found) {
    const diagnostic = new vscode.Diagnostic(
      new vscode.Range(line, 0, line, 200),
      message,
      error ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
    );
    diagnostic.source = source;
    const uri = vscode.Uri.file(path);
    problems.set(uri, [...(problems.get(uri) ?? []), diagnostic]);
  }
}

/** The run a command acts on: its row's (or `{runId}`'s), else the only eligible one, else the one the user picks. */
export async function pickRun(
  ctx: Ctx,
  target: RunTarget | undefined,
  title: string,
  eligible: (runId: string) => boolean,
): Promise<string | undefined> {
  if (target && 'runId' in target) return target.runId;
  if (!ctx.connection.isConnected) throw new EditorFailure('notConnected', 'Not connected to a trainer server.');
  const runIds = ctx.connection.model.runIds().filter(eligible);
  if (runIds.length === 0) throw new Error(`No run to ${title.toLowerCase().split(' ')[0]}.`);
  if (runIds.length === 1) return runIds[0];
  const items = runIds.map((runId) => ({
    label: ctx.connection.model.run(runId)!.name,
    description: ctx.connection.model.description({ kind: 'run', runId }),
    detail: runId,
    runId,
  }));
  return (await vscode.window.showQuickPick(items, { title, placeHolder: 'Run' }))?.runId;
}

/** Stops an active run, gracefully (a checkpoint first, resumable) or at once; returns the status the server gave. */
export const stopTraining =
  (ctx: Ctx) =>
  async (target?: RunTarget): Promise<string | undefined> => {
    const runId = await pickRun(ctx, target, 'Stop Training', (id) => ctx.connection.model.isActive(id));
    if (!runId) return undefined;
    const mode =
      (target && 'mode' in target && target.mode) ||
      (
        await vscode.window.showQuickPick(
          [
            {
              label: 'Graceful',
              description: 'finish the current step, write a checkpoint, then stop (resumable)',
              mode: 'graceful' as const,
            },
            {
              label: 'Immediate',
              description: 'kill it now; work since the last checkpoint is lost',
              mode: 'immediate' as const,
            },
          ],
          { title: `Stop ${ctx.connection.model.run(runId)?.name ?? runId}` },
        )
      )?.mode;
    if (!mode) return undefined;
    const result = await ctx.connection.request('run/stop', { runId, mode });
    ctx.log.info(`Stop (${mode}) requested for ${runId}: ${result.status}`);
    return result.status;
  };

/** Resumes a stopped or failed training run from its latest checkpoint and follows it; returns its id. */
export const resumeTraining =
  (ctx: Ctx) =>
  async (target?: RunTarget): Promise<string | undefined> => {
    if (!requireTrust(ctx, 'Resuming training')) return undefined;
    const runId = await pickRun(ctx, target, 'Resume Training', (id) => ctx.connection.model.isResumable(id));
    if (!runId) return undefined;
    try {
      await ctx.connection.request('run/resume', { runId });
    } catch (err) {
      if (err instanceof TrainerRequestError && err.code === ErrorCode.RUN_STATE_CONFLICT)
        throw new TrainerRequestError(
          err.method,
          err.code,
          `${err.message} (only a training run with a checkpoint resumes, once it is ${[...RESUMABLE_RUN_STATUSES].join(', ')})`,
          err.data,
        );
      throw err;
    }
    await ctx.connection.refresh();
    await ctx.connection.follow(runId);
    ctx.log.info(`Resumed ${runId}`);
    return runId;
  };

/** Deletes a run that no process works on, after a modal confirmation: the server removes its folder (checkpoints,
 *  trajectories, exports, logs); returns its id. */
export const deleteRun =
  (ctx: Ctx) =>
  async (target?: RunTarget): Promise<string | undefined> => {
    const model = ctx.connection.model;
    const runId = await pickRun(ctx, target, 'Delete Run', (id) => !model.isActive(id));
    if (!runId) return undefined;
    const name = model.run(runId)?.name ?? runId;
    const choice = await vscode.window.showWarningMessage(
      `Delete the run ${name} (${model.description({ kind: 'run', runId })})?`,
      {
        modal: true,
        detail: `Its folder on the trainer server is removed: checkpoints, trajectories, exports and logs. This cannot be undone.\n\n${runId}`,
      },
      'Delete',
    );
    if (choice !== 'Delete') return undefined;
    await ctx.connection.request('run/delete', { runId });
    ctx.log.info(`Deleted the run ${runId}`);
    await ctx.connection.refresh();
    return runId;
  };

/** Export Model: the server writes the run's latest checkpoint as a model folder into the run's own folder
 * (`run/export`); with a local server it is copied where the user picks, with a remote one its path is given. */
export const exportModel =
  (ctx: Ctx) =>
  async (target?: ExportTarget): Promise<string | undefined> => {
    const runId = await pickRun(ctx, target, 'Export Model', () => true);
    if (!runId) return undefined;
    const given = target && !('kind' in target) ? target : undefined;
    const step = target && 'kind' in target && target.kind === 'step' ? target.step : given?.step;
    const name = ctx.connection.model.run(runId)?.name ?? runId;
    const mergeLora =
      given?.mergeLora ??
      (
        await vscode.window.showQuickPick(
          [
            {
              label: 'As trained',
              description: 'the full model, or the LoRA adapter alone if the run trained one',
              merge: false,
            },
            {
              label: 'LoRA merged into a full model',
              description: 'for a run that trained a LoRA adapter',
              merge: true,
            },
          ],
          { title: `Export Model: ${name}` },
        )
      )?.merge;
    if (mergeLora === undefined) return undefined;
    const local = ctx.connection.kind === 'local';
    const destination = local
      ? (given?.destination ??
        (
          await vscode.window.showOpenDialog({
            canSelectFolders: true,
            canSelectFiles: false,
            openLabel: 'Export Here',
            title: `Export Model: ${name}`,
          })
        )?.[0]?.fsPath)
      : undefined;
    if (local && !destination) return undefined;
    const exported = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Agent RL: exporting ${name}` },
      () => ctx.connection.request('run/export', { runId, mergeLora, ...(step ? { step } : {}) }, EXPORT_TIMEOUT_MS),
    );
    const kind = exported.weights === 'adapter' ? 'LoRA adapter' : 'model';
    if (!destination) {
      ctx.log.info(`Exported ${runId} step ${exported.step} (${kind}) on the server: ${exported.path}`);
      void vscode.window
        .showInformationMessage(
          `Agent RL: ${name} step ${exported.step} exported on the server to ${exported.path}.`,
          'Copy Path',
        )
        .then((choice) => choice && vscode.env.clipboard.writeText(exported.path));
      return exported.path;
    }
    const folder = join(destination, `${name}-step-${exported.step}${mergeLora ? '-merged' : ''}`);
    if (existsSync(folder)) throw new Error(`${folder} already exists; pick another folder.`);
    cpSync(exported.path, folder, { recursive: true });
    ctx.log.info(`Exported ${runId} step ${exported.step} (${kind}) to ${folder}`);
    void vscode.window
      .showInformationMessage(`Agent RL: ${name} step ${exported.step} exported to ${folder}.`, 'Open Folder')
      .then((choice) => choice && vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(folder)));
    return folder;
  };
