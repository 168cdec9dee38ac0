// Run commands: Start/Stop/Resume Training, Try Environment, Export Model, Delete Run, Refresh Runs, and the CodeLens
// on run configs. Everything that runs workspace code (a run) needs workspace trust, checked here as well as in the
// manifest. Each command returns what it did (a run id, a folder), which the extension-host tests read. The
// notification of a run this editor starts says what the run is doing (its phase) until there is something to see.
import { cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { ErrorCode, RESUMABLE_RUN_STATUSES } from '../protocol/generated/rpc';
import { Commands } from './commands';
import { registerCommands, requireTrust, type Ctx } from './ctx';
import type { RunsTreeNode } from './runsModel';
import { RUN_CONFIG_GLOB } from './settings';
import { TrainerRequestError } from './trainerClient';
import { EditorFailure } from './troubleshooting';
import { prepareRun, startRun } from './runStarting';
import { tryEnvironment } from './tryCommands';

// An export loads the model on the server: seconds for small models, minutes for large ones.
const EXPORT_TIMEOUT_MS = 30 * 60_000;

export type RunTarget = { runId: string; mode?: 'graceful' | 'immediate' } | RunsTreeNode;
/** Export Model's answers, for callers that ask no questions: `destination` is a folder on this machine; without
 * `step`, the latest checkpoint. A step node of the Runs view exports that step's checkpoint. */
type ExportTarget = { runId: string; step?: number; mergeLora?: boolean; destination?: string } | RunsTreeNode;

export function registerRunCommands(ctx: Ctx): vscode.Disposable {
  // A try run's Tool failures, at each Tool's definition; the next try run replaces them.
  const tryProblems = vscode.languages.createDiagnosticCollection('agentRl.tryEnvironment');
  return vscode.Disposable.from(
    tryProblems,
    // They are about the code as the Try ran it: a file saved since loses its own (a fixed Tool's error stayed
    // through training runs and restarts); the next Try finds what is still there.
    vscode.workspace.onDidSaveTextDocument((document) => tryProblems.delete(document.uri)),
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
          { title: `Stop ${ctx.connection.model.runName(runId)}` },
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
    const name = model.runName(runId);
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
    const name = ctx.connection.model.runName(runId);
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
