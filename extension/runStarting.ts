// Starting a run from a run config, shared by Start Training, Resume and Try Environment: the config picked (or the
// active one), saved, its problems accepted, the trainer connected, the env where the server can read it, then the run
// started and followed with a progress notification that says what it is doing.
import { basename, dirname } from 'node:path';
import * as vscode from 'vscode';
import type { RunStartParams } from '../protocol/generated/rpc';
import { Commands, markSucceeded } from './commands';
import { ensureConnected } from './connectionCommands';
import { acceptConfigProblems } from './configProblems';
import { requireTrust, type Ctx } from './ctx';
import { packEnvFolder } from './envBundle';
import { readRunConfig } from './runConfig';
import { RUNS_VIEW_ID } from './runsView';
import type { RunHandle } from './trainerConnection';
import { EditorFailure } from './troubleshooting';

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
export interface PreparedRun {
  configUri: vscode.Uri;
  location: EnvLocation;
}

export async function prepareRun(ctx: Ctx, target: unknown, mode: 'train' | 'try'): Promise<PreparedRun | undefined> {
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

export async function startRun(ctx: Ctx, prepared: PreparedRun, mode: 'train' | 'try'): Promise<RunHandle> {
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
    markSucceeded('startTraining');
    const name = ctx.connection.model.runName(runId);
    void vscode.window
      .showInformationMessage(`Agent RL: training ${name} started.`, 'Open Dashboard')
      .then((choice) => choice && vscode.commands.executeCommand(Commands.openDashboard, { runId }));
    // What the run does, said as it happens until it ends: loading the model and the first step take minutes on a
    // slow machine, and a notification that went after step 1 left the status bar alone to say the rest.
    void withRunActivity(ctx, runId, { title: `Agent RL: training ${name}` }, () => run.ended);
    void run.ended.then((status) => status && announceEnd(ctx, runId, name, status));
  }
  return run;
}

/** A progress notification that says what the run is doing (`RunsModel.activity`: its phase, or why it waits) as it
 *  changes, `first` until it says something, while `until` runs; returns what `until` gives. */
export async function withRunActivity<T>(
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
